import net from 'node:net';

export interface ConnectProxy {
  url: string;
  port: number;
  /** Each CONNECT asked for: its authority and its Proxy-Authorization header. */
  tunnels: { authority: string; authorization: string | undefined }[];
  close(): Promise<void>;
}

/**
 * A small egress proxy that speaks CONNECT only: it opens a TCP connection to `route(host)` (default
 * the host itself) and the asked port, answers `200`, and pipes both ways; `refuse` answers that
 * status instead, as an allow-list proxy does for a host it denies.
 */
export async function startConnectProxy(
  options: { route?: (host: string) => string; refuse?: number } = {},
): Promise<ConnectProxy> {
  const tunnels: ConnectProxy['tunnels'] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => {});
    let head = '';
    const onData = (chunk: Buffer) => {
      head += chunk.toString('latin1');
      const end = head.indexOf('\r\n\r\n');
      if (end === -1) return;
      client.off('data', onData);
      const [requestLine = '', ...lines] = head.slice(0, end).split('\r\n');
      const [method, authority = ''] = requestLine.split(' ');
      const authorization = lines.find((line) => /^proxy-authorization:/i.test(line))?.replace(/^[^:]+:\s*/, '');
      tunnels.push({ authority, authorization });
      if (method !== 'CONNECT') return void client.end('HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n');
      if (options.refuse !== undefined)
        return void client.end(`HTTP/1.1 ${options.refuse} Refused\r\nContent-Length: 0\r\n\r\n`);
      const colon = authority.lastIndexOf(':');
      const host = authority.slice(0, colon).replace(/^\[(.*)\]$/, '$1');
      const upstream = net.connect({
        host: (options.route ?? ((name) => name))(host),
        port: Number(authority.slice(colon + 1)),
      });
      sockets.add(upstream);
      upstream.on('close', () => sockets.delete(upstream));
      upstream.on('error', () => client.destroy());
      upstream.once('connect', () => {
        client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        const rest = Buffer.from(head.slice(end + 4), 'latin1');
        if (rest.length > 0) upstream.write(rest);
        client.pipe(upstream).pipe(client);
      });
    };
    client.on('data', onData);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    tunnels,
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
