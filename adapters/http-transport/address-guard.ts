import { isIPv4, isIPv6 } from 'node:net';

/** A refusal of the SSRF guard: the address is one the portal does not call. */
export class RefusedAddressError extends Error {
  readonly code = 'ERR_WEBHOOK_ADDRESS_REFUSED';
}

/** What a refused host's message says to the tenant: no address, no kind. */
export const refusedHostMessage = (hostname: string) =>
  `refused to call ${hostname}: it has no address the portal may call (allowPrivateNetworks is off)`;

/** A refusal's details for the operator's log: never part of the attempt's error. */
export type RefusalReport = (details: { hostname: string; addresses: string[]; reasons: string[] }) => void;

/**
 * What an IP address is, for the SSRF guard. Everything but `public` is refused unless
 * `allowPrivateNetworks` is set: a webhook URL is chosen by a client, and must not reach the
 * portal's own machine, its network, or a cloud metadata service.
 */
export type AddressKind =
  | 'public'
  | 'loopback'
  | 'private'
  | 'shared'
  | 'link-local'
  | 'multicast'
  | 'unspecified'
  | 'broadcast'
  | 'reserved'
  | 'invalid';

/** One IPv4 range: network as a 32-bit number, prefix length, and what it is. */
type V4Range = readonly [network: number, prefix: number, kind: AddressKind];

const v4 = (dotted: string, prefix: number, kind: AddressKind): V4Range => [parseIPv4(dotted)!, prefix, kind];

/** IANA special-purpose IPv4 ranges (RFC 6890 and successors), most specific first where they nest. */
const V4_RANGES: readonly V4Range[] = [
  v4('255.255.255.255', 32, 'broadcast'),
  v4('0.0.0.0', 32, 'unspecified'),
  v4('0.0.0.0', 8, 'reserved'), // "this network"
  v4('10.0.0.0', 8, 'private'),
  v4('100.64.0.0', 10, 'shared'), // carrier-grade NAT
  v4('127.0.0.0', 8, 'loopback'),
  v4('169.254.0.0', 16, 'link-local'), // includes 169.254.169.254, the cloud metadata address
  v4('172.16.0.0', 12, 'private'),
  v4('192.0.0.0', 24, 'reserved'), // IETF protocol assignments
  v4('192.0.2.0', 24, 'reserved'), // documentation
  v4('192.88.99.0', 24, 'reserved'), // 6to4 relay anycast
  v4('192.168.0.0', 16, 'private'),
  v4('198.18.0.0', 15, 'reserved'), // benchmarking
  v4('198.51.100.0', 24, 'reserved'), // documentation
  v4('203.0.113.0', 24, 'reserved'), // documentation
  v4('224.0.0.0', 4, 'multicast'),
  v4('240.0.0.0', 4, 'reserved'),
];

/** A dotted-quad IPv4 address as an unsigned 32-bit number; `null` when it is not one. */
function parseIPv4(text: string): number | null {
  if (!isIPv4(text)) return null;
  return text.split('.').reduce((sum, part) => sum * 256 + Number(part), 0);
}

/** An IPv6 address as its eight 16-bit groups (an embedded dotted IPv4 tail included); `null` when it is not one. */
function parseIPv6(text: string): number[] | null {
  const address = text.replace(/%.*$/, ''); // a zone index names an interface, not an address
  if (!isIPv6(address)) return null;
  let groups: number[] = [];
  const halves = address.split('::');
  const parse = (part: string): number[] => {
    if (part === '') return [];
    const out: number[] = [];
    for (const piece of part.split(':')) {
      const quad = parseIPv4(piece);
      if (quad !== null) out.push(quad >>> 16, quad & 0xffff);
      else out.push(parseInt(piece, 16));
    }
    return out;
  };
  const head = parse(halves[0]!);
  if (halves.length === 2) {
    const tail = parse(halves[1]!);
    groups = [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
  } else {
    groups = head;
  }
  return groups.length === 8 ? groups : null;
}

function classifyV4(address: number): AddressKind {
  for (const [network, prefix, kind] of V4_RANGES) {
    const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
    if ((address & mask) >>> 0 === network) return kind;
  }
  return 'public';
}

/** The IPv4 address held in groups `at` and `at + 1`. */
const embeddedV4 = (groups: number[], at: number) => ((groups[at]! << 16) >>> 0) + groups[at + 1]!;

function classifyV6(groups: number[]): AddressKind {
  const [g0, g1, g2, g3, g4, g5, , g7] = groups as [number, number, number, number, number, number, number, number];
  const zeroTo = (n: number) => groups.slice(0, n).every((group) => group === 0);
  if (zeroTo(8)) return 'unspecified';
  if (zeroTo(7) && g7 === 1) return 'loopback';
  // IPv4-mapped (::ffff:a.b.c.d) and the deprecated IPv4-compatible (::a.b.c.d): the IPv4 address decides.
  if (zeroTo(5) && g5 === 0xffff) return classifyV4(embeddedV4(groups, 6));
  if (zeroTo(6)) return classifyV4(embeddedV4(groups, 6));
  // IPv4-translated (::ffff:0:a.b.c.d, SIIT): a translator on the path turns it into the IPv4 address it holds.
  if (zeroTo(4) && g4 === 0xffff && g5 === 0) return classifyV4(embeddedV4(groups, 6));
  // NAT64 (64:ff9b::/96 and the local-use 64:ff9b:1::/48) reaches the IPv4 address it embeds.
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0)
    return classifyV4(embeddedV4(groups, 6));
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 1) return 'reserved';
  // The rest of ::/8 is reserved by the IETF (RFC 4291): no unicast address anyone should call lives there.
  if ((g0 & 0xff00) === 0) return 'reserved';
  // 6to4 (2002::/16) routes to the IPv4 address in groups 1–2.
  if (g0 === 0x2002) return classifyV4(embeddedV4(groups, 1));
  if (g0 === 0x2001 && g1 === 0) return 'reserved'; // Teredo: the IPv4 server is obfuscated, refuse outright
  if (g0 === 0x2001 && g1 === 0xdb8) return 'reserved'; // documentation
  if (g0 === 0x100 && g1 === 0 && g2 === 0 && g3 === 0) return 'reserved'; // discard-only
  if ((g0 & 0xfe00) === 0xfc00) return 'private'; // unique local fc00::/7
  if ((g0 & 0xffc0) === 0xfe80) return 'link-local'; // fe80::/10
  if ((g0 & 0xffc0) === 0xfec0) return 'private'; // site-local fec0::/10, deprecated
  if ((g0 & 0xff00) === 0xff00) return 'multicast';
  return 'public';
}

/** Classifies an IPv4 or IPv6 address (no brackets); anything else is `invalid`. */
export function classifyAddress(address: string): AddressKind {
  const quad = parseIPv4(address);
  if (quad !== null) return classifyV4(quad);
  const groups = parseIPv6(address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address);
  return groups === null ? 'invalid' : classifyV6(groups);
}

/** Why `address` may not be called, or `null` when it may. */
export function refusalOf(address: string): string | null {
  const kind = classifyAddress(address);
  if (kind === 'public') return null;
  const label = kind === 'shared' ? 'shared (carrier-grade NAT)' : kind;
  const article = /^[aeiu]/.test(label) ? 'an' : 'a';
  return `refused to call ${address}: ${article} ${label} address (allowPrivateNetworks is off)`;
}
