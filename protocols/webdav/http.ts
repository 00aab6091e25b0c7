/**
 * The HTTP side of WebDAV requests: request URLs to the session's paths and back to hrefs, and the
 * headers RFC 4918 adds (Depth, Destination, Overwrite, Timeout). Paths are the session's own
 * (user_root is `/`, '' here); the core normalizes and authorizes them.
 */
import type { Context } from 'koa';
import {
  GatewayError,
  type Core,
  type Entry,
  type FileSession,
  type Principal,
} from '../../src/core/index.ts';
import { DavCondition } from './errors.ts';

/** DavState is what the middleware leaves on ctx.state for the methods. */
export interface DavState {
  principal: Principal;
  session: FileSession;
  /** the request URL's path, decoded, in the session's paths ('' is the root) */
  path: string;
  /** set with a 405: the methods the target takes (its Allow header); else every method */
  allow?: string;
}

/** DavContext is a Koa context of a WebDAV request. */
export type DavContext = Context & { state: DavState };

/** Method is one WebDAV method's handler. */
export type Method = (ctx: DavContext, core: Core) => Promise<void>;

const invalid = (message: string) => new GatewayError('bad-request/invalid-path', message);

/**
 * decodePath turns a raw URL path into the session's path. Each segment is decoded on its own, so
 * an encoded `/` (`%2f`) or a `.`/`..` segment (`%2e%2e`) can never change the tree it names.
 */
export function decodePath(raw: string): string {
  const segments = raw.split('/').filter((s, i, all) => !(s === '' && (i === 0 || i === all.length - 1)));
  const out: string[] = [];
  for (const s of segments) {
    let d: string;
    try {
      d = decodeURIComponent(s);
    } catch {
      throw invalid('The path is not valid percent-encoded UTF-8');
    }
    if (d.includes('/')) throw invalid('A name must not contain an encoded slash');
    if (d === '.' || d === '..' || d === '') throw invalid('Paths must not contain ., .. or empty segments');
    out.push(d);
  }
  return out.join('/');
}

/** hrefOf is the href of a session path: each segment percent-encoded; collections end with `/`. */
export function hrefOf(path: string, collection: boolean): string {
  if (path === '') return '/';
  const encoded = `/${path.split('/').map(encodeURIComponent).join('/')}`;
  return collection ? `${encoded}/` : encoded;
}

/** etagOf is a file's strong ETag: its content digest and modification time. Folders have none. */
export function etagOf(entry: Entry): string | null {
  if (entry.type === 'directory') return null;
  return `"${etagBody(entry)}"`;
}

const etagBody = (entry: Entry) =>
  `${entry.md5 ?? 'x'}-${base36(entry.size ?? 0)}-${base36(entry.mtime.getTime())}`;

const DIGITS = '0123456789abcdefghijklmnopqrstuvwxyz';

/**
 * base36 is `n.toString(36)`, by hand for whole numbers: V8's radix conversion handles fractions
 * and took about 0.3 µs a number, two per entry of a listing.
 */
function base36(n: number): string {
  if (!Number.isSafeInteger(n)) return n.toString(36);
  let rest = Math.abs(n);
  let out = rest === 0 ? '0' : '';
  while (rest > 0) {
    const q = Math.floor(rest / 36);
    out = DIGITS[rest - q * 36]! + out;
    rest = q;
  }
  return n < 0 ? `-${out}` : out;
}

/** Depth is RFC 4918's Depth header. */
export type Depth = '0' | '1' | 'infinity';

/** depthOf reads the Depth header; absent is `fallback`, anything else than 0, 1, infinity is 400. */
export function depthOf(ctx: DavContext, fallback: Depth): Depth {
  const raw = ctx.get('Depth').trim().toLowerCase();
  if (raw === '') return fallback;
  if (raw === '0' || raw === '1' || raw === 'infinity') return raw;
  throw new GatewayError('bad-request/request-params-invalid', `Invalid Depth header: ${raw.slice(0, 40)}`);
}

/** overwriteOf reads the Overwrite header (T unless F). */
export function overwriteOf(ctx: DavContext): boolean {
  const raw = ctx.get('Overwrite').trim().toUpperCase();
  if (raw === '' || raw === 'T') return true;
  if (raw === 'F') return false;
  throw new GatewayError('bad-request/request-params-invalid', 'Overwrite must be T or F');
}

/** destinationOf reads the Destination header (absolute URL or absolute path) as a session path. */
export function destinationOf(ctx: DavContext): string {
  const raw = ctx.get('Destination');
  if (!raw)
    throw new GatewayError('bad-request/request-params-required', 'COPY and MOVE need a Destination header');
  // Taken apart by hand rather than with URL, which would resolve `..` and decode `%2e%2e`.
  const m = /^(?:(https?):\/\/([^/?#]*))?(\/[^?#]*)/i.exec(raw);
  if (!m) throw new GatewayError('bad-request/request-params-invalid', 'The Destination header is not a URL');
  const [, scheme, authority] = m;
  // RFC 4918 §9.8.5, §9.9.4: a destination on another server is 502; it used to be carried out
  // here under the same path.
  if (authority !== undefined && hostOf(authority, scheme!) !== hostOf(ctx.get('Host'), ctx.protocol))
    throw new DavCondition(502, null, [], 'The Destination is on another server\n');
  return decodePath(m[3]!);
}

/** hostOf normalizes a URL authority for comparison: lower case, no user info, no default port. */
function hostOf(authority: string, scheme: string): string {
  const host = authority.replace(/^[^@]*@/, '').toLowerCase();
  const defaultPort = scheme.toLowerCase() === 'http' ? ':80' : ':443';
  return host.endsWith(defaultPort) ? host.slice(0, -defaultPort.length) : host;
}

/** timeoutOf reads the Timeout header's first choice in seconds (Infinite and absent: `fallback`). */
export function timeoutOf(ctx: DavContext, fallback: number): number {
  for (const part of ctx.get('Timeout').split(',')) {
    const t = part.trim();
    const m = /^Second-(\d+)$/i.exec(t);
    if (m) return Math.max(1, Math.min(Number(m[1]), 2 ** 31 - 1));
    if (/^Infinite$/i.test(t)) return fallback;
  }
  return fallback;
}

/** isCollectionEntry tells whether an entry is a folder. */
export const isCollection = (e: Entry) => e.type === 'directory';

/** httpDate formats a date for Last-Modified and getlastmodified (whole seconds: toUTCString drops the rest). */
export function httpDate(d: Date): string {
  const t = utcOf(d.getTime());
  return t
    ? `${WEEKDAYS[t.weekday]}, ${TWO_DIGITS[t.day]} ${MONTHS[t.month - 1]} ${t.year} ${clockOf(t)} GMT`
    : d.toUTCString();
}

/** isoDate formats a date for creationdate (RFC 3339, whole seconds). */
export function isoDate(d: Date): string {
  const t = utcOf(d.getTime());
  if (t) return `${t.year}-${TWO_DIGITS[t.month]}-${TWO_DIGITS[t.day]}T${clockOf(t)}Z`;
  const iso = d.toISOString();
  // Other years than 1000-9999: ±YYYYYY (or 0YYY) as toISOString writes them, without the milliseconds.
  return iso.length === 24 ? `${iso.slice(0, 19)}Z` : iso.replace(/\.\d{3}Z$/, 'Z');
}

/** WEEKDAYS are the weekdays' names from 1970-01-01, a Thursday (UtcFields.weekday). */
export const WEEKDAYS = ['Thu', 'Fri', 'Sat', 'Sun', 'Mon', 'Tue', 'Wed'];
export const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const TWO_DIGITS = Array.from({ length: 100 }, (_, i) => String(i).padStart(2, '0'));

/** UtcFields are a time's calendar fields in UTC: month 1-12, weekday 0 for Thursday (WEEKDAYS). */
export interface UtcFields {
  weekday: number;
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

/**
 * utcOf is a time's calendar fields in UTC for years 1000-9999 (null for others), by arithmetic
 * (Howard Hinnant's civil_from_days): a listing writes two dates per entry, and Date's own
 * toUTCString and toISOString took about 0.8 µs for the pair, twice this.
 */
export function utcOf(ms: number): UtcFields | null {
  if (!Number.isFinite(ms)) return null;
  const seconds = Math.floor(ms / 1000);
  const days = Math.floor(seconds / 86400);
  const second = seconds - days * 86400;
  // Days since 0000-03-01 in 400-year eras, so that a leap day ends its year.
  const z = days + 719468;
  const era = Math.floor(z / 146097);
  const doe = z - era * 146097;
  const yoe = Math.floor(
    (doe - Math.floor(doe / 1460) + Math.floor(doe / 36524) - Math.floor(doe / 146096)) / 365,
  );
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const month = mp < 10 ? mp + 3 : mp - 9;
  const year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  if (year < 1000 || year > 9999) return null;
  const hour = Math.floor(second / 3600);
  const minute = Math.floor((second - hour * 3600) / 60);
  return {
    weekday: ((days % 7) + 7) % 7,
    year,
    month,
    day: doy - Math.floor((153 * mp + 2) / 5) + 1,
    hour,
    minute,
    second: second - hour * 3600 - minute * 60,
  };
}

/** clockOf is a time of day as `hh:mm:ss`. */
const clockOf = (t: UtcFields) => `${TWO_DIGITS[t.hour]}:${TWO_DIGITS[t.minute]}:${TWO_DIGITS[t.second]}`;

/** MAX_TIME_MS is the largest distance from 1970 a JavaScript Date can hold (ECMA-262 §21.4.1.1). */
const MAX_TIME_MS = 8.64e15;

/**
 * unixTimeOf reads a time given in unix seconds, maybe fractional (`X-OC-Mtime`, ownCloud's
 * `DAV:lastmodified`), or null when it is not a number of seconds a date can hold.
 */
export function unixTimeOf(raw: string): Date | null {
  const t = raw.trim();
  if (!/^-?\d+(\.\d+)?$/.test(t)) return null;
  const ms = Math.round(Number(t) * 1000);
  return Math.abs(ms) <= MAX_TIME_MS ? new Date(ms) : null;
}

/** statOrNull describes a path, or null when it does not exist. */
export async function statOrNull(ctx: DavContext, path: string): Promise<Entry | null> {
  try {
    return await ctx.state.session.stat(path);
  } catch (err) {
    if (err instanceof GatewayError && err.family === 'not-found') return null;
    throw err;
  }
}
