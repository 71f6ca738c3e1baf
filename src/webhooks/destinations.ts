import type { DestinationContext, WebhookDestination, WebhookTransport } from '../ports.js';

/** The option `destinations`: one destination per kind of broker, each from its adapter. */
export interface Destinations {
  amqp?: WebhookDestination;
  nats?: WebhookDestination;
  mqtt?: WebhookDestination;
  redis?: WebhookDestination;
  sqs?: WebhookDestination;
}

/** The schemes HTTP calls take: always. */
const HTTP_SCHEMES = ['http', 'https'] as const;

/** Which destination takes each scheme a webhook URL may have; `http` and `https` go to the HTTP transport. */
export interface Routes {
  /** Every scheme taken, `http` and `https` first: what a `400` for another scheme names. */
  readonly schemes: readonly string[];
  /** The destination of a scheme (without its colon), or `undefined` for HTTP's and for one no destination takes. */
  destinationOf(scheme: string): WebhookDestination | undefined;
  /** What its destination finds wrong with a URL of a broker's scheme, or `null` (the `WebhookUrls` a webhook is checked by). */
  check(url: URL): string | null;
}

/** The routes of `destinations`; a scheme taken by two of them, or by one of them and HTTP, is a mistake of the host. */
export function routesOf(destinations: Destinations = {}): Routes {
  const byScheme = new Map<string, WebhookDestination>();
  for (const [kind, destination] of Object.entries(destinations) as [string, WebhookDestination | undefined][]) {
    if (destination === undefined) continue;
    for (const scheme of destination.schemes) {
      if ((HTTP_SCHEMES as readonly string[]).includes(scheme) || byScheme.has(scheme))
        throw new TypeError(`destinations.${kind}: the scheme ${scheme} is taken twice`);
      byScheme.set(scheme, destination);
    }
  }
  return {
    schemes: [...HTTP_SCHEMES, ...byScheme.keys()],
    destinationOf: (scheme) => byScheme.get(scheme),
    check: (url) => byScheme.get(url.protocol.slice(0, -1))?.check(url) ?? null,
  };
}

/** A URL's scheme, lower case and without its colon (`amqps`), or `''` when it does not parse. */
const schemeOf = (url: string): string => {
  const colon = url.indexOf(':');
  return colon < 1 ? '' : url.slice(0, colon).toLowerCase();
};

/** What a call to a destination gets once the transport is closed. */
const CLOSED: WebhookTransport = {
  send: async () => ({ statusCode: null, headers: {}, error: 'the destination is closed' }),
};

/**
 * One transport for every webhook: a call goes to the destination its URL's scheme names, else to
 * `http`. Each destination is opened once, with the context the HTTP transport follows too, and
 * closed with the rest.
 */
export function routedTransport(http: WebhookTransport, routes: Routes, context: DestinationContext): WebhookTransport {
  const opened = new Map<WebhookDestination, WebhookTransport>();
  let closed = false;
  const transportOf = (url: string): WebhookTransport => {
    const destination = routes.destinationOf(schemeOf(url));
    if (destination === undefined) return http;
    // Closed, a destination is not opened again: nothing would close it.
    if (closed) return CLOSED;
    let transport = opened.get(destination);
    if (transport === undefined) opened.set(destination, (transport = destination.open(context)));
    return transport;
  };
  return {
    send: (call, options) => transportOf(call.url).send(call, options),
    async close() {
      closed = true;
      await Promise.allSettled([http.close?.(), ...[...opened.values()].map((transport) => transport.close?.())]);
    },
  };
}
