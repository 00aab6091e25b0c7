/**
 * allowed_ips lists (SPEC User.allowed_ips and the site's list): one address or CIDR range per
 * line; blank allows all. Matching uses ipaddr.js, the parser Express's proxy-addr relies on,
 * rather than hand-written CIDR arithmetic; IPv4-mapped IPv6 clients (::ffff:a.b.c.d, as Node
 * reports them on dual-stack sockets) are compared as IPv4.
 */
import ipaddr from 'ipaddr.js';

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number];

/** parseAllowedIps splits a list into entries, reporting the ones that are not an address or range. */
export function parseAllowedIps(text: string | readonly string[]): { ranges: Range[]; invalid: string[] } {
  const entries = (typeof text === 'string' ? text.split(/[\r\n,]+/) : text)
    .map((s) => s.trim())
    .filter(Boolean);
  const ranges: Range[] = [];
  const invalid: string[] = [];
  for (const entry of entries) {
    try {
      if (!isStandardForm(entry)) throw new Error('not a standard address');
      if (entry.includes('/')) {
        const [addr, bits] = ipaddr.parseCIDR(entry);
        ranges.push([
          normalize(addr),
          addr.kind() === 'ipv6' && normalize(addr).kind() === 'ipv4' ? bits - 96 : bits,
        ]);
      } else {
        const addr = normalize(ipaddr.parse(entry));
        ranges.push([addr, addr.kind() === 'ipv4' ? 32 : 128]);
      }
    } catch {
      invalid.push(entry);
    }
  }
  return { ranges, invalid };
}

// ipaddr.js also reads legacy IPv4 spellings (octal `010`, hex `0x0a`, `10.1`, a 32-bit number), so
// an admin's zero-padded `10.0.0.010` would silently mean 10.0.0.8: IPv4 must be four-part decimal.
function isStandardForm(entry: string): boolean {
  const addr = entry.split('/')[0]!;
  return addr.includes(':') || ipaddr.IPv4.isValidFourPartDecimal(addr);
}

function normalize(addr: ipaddr.IPv4 | ipaddr.IPv6): ipaddr.IPv4 | ipaddr.IPv6 {
  return addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress()
    ? (addr as ipaddr.IPv6).toIPv4Address()
    : addr;
}

/**
 * clientIp is the form every record and counter uses for a client address: IPv4-mapped IPv6
 * (::ffff:a.b.c.d, as dual-stack sockets report IPv4 clients) becomes plain IPv4, so one client
 * is one address in Actions and in the per-IP login limit.
 */
export function clientIp(ip: string): string {
  try {
    return normalize(ipaddr.parse(ip)).toString();
  } catch {
    return ip;
  }
}

/** PARSED_LISTS bounds the lists kept parsed (a site's list and its users' lists). */
const PARSED_LISTS = 256;
const parsedLists = new Map<string, ReturnType<typeof parseAllowedIps>>();

/**
 * parsed is parseAllowedIps of a list the login gate checks on every request (an HTTP request logs
 * in each time): kept by its text, since a list changes far less often than it is read.
 */
function parsed(text: string | readonly string[]): ReturnType<typeof parseAllowedIps> {
  // A list given as entries keeps its entries (one may hold a comma the text form would split on).
  const key = typeof text === 'string' ? text : `\0${text.join('\0')}`;
  let list = parsedLists.get(key);
  if (!list) {
    if (parsedLists.size >= PARSED_LISTS) parsedLists.clear();
    list = parseAllowedIps(text);
    parsedLists.set(key, list);
  }
  return list;
}

/** isBlank tells whether a list allows every address (no entries at all). */
export function isBlank(text: string | readonly string[]): boolean {
  const list = parsed(text);
  return list.ranges.length === 0 && list.invalid.length === 0;
}

/** ipInList tells whether the client IP falls in one of the list's entries. */
export function ipInList(ip: string, text: string | readonly string[]): boolean {
  let client: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    client = normalize(ipaddr.parse(ip));
  } catch {
    return false;
  }
  return parsed(text).ranges.some(
    ([range, bits]) => range.kind() === client.kind() && client.match(range as never, bits),
  );
}

/**
 * ipAllowed applies DESIGN.md's login rule: a match in either the user's or the site's list
 * allows; both lists blank allow everyone.
 */
export function ipAllowed(ip: string, userList: string, siteList: readonly string[]): boolean {
  if (isBlank(userList) && isBlank(siteList)) return true;
  return ipInList(ip, userList) || ipInList(ip, siteList);
}
