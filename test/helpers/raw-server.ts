import net from 'node:net';

/**
 * A server on 127.0.0.1 that answers each request with `answer(index of the request on its
 * connection, connection number, socket)` as raw bytes (or destroys the socket for `'reset'`), so
 * framings Node's server never writes can be tried. Requests are split on their Content-Length.
 */
export async function rawServer(
  answer: (request: number, connection: number, socket: net.Socket) => string | 'reset' | 'silent',
) {
  const requests: { connection: number; head: string; body: string }[] = [];
  let connections = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    const connection = ++connections;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    let buffered = '';
    let count = 0;
    socket.on('error', () => {});
    socket.on('data', (chunk) => {
      buffered += chunk.toString('latin1');
      for (;;) {
        const end = buffered.indexOf('\r\n\r\n');
        if (end === -1) return;
        const length = Number(/\r\ncontent-length: (\d+)/i.exec(buffered.slice(0, end))?.[1] ?? 0);
        if (buffered.length < end + 4 + length) return;
        requests.push({ connection, head: buffered.slice(0, end), body: buffered.slice(end + 4, end + 4 + length) });
        buffered = buffered.slice(end + 4 + length);
        const reply = answer(count++, connection, socket);
        if (reply === 'reset') return void socket.resetAndDestroy();
        if (reply !== 'silent') socket.write(reply);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    port,
    requests,
    get connections() {
      return connections;
    },
    /** Connections open now. */
    get open() {
      return sockets.size;
    },
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(resolve);
      }),
  };
}
