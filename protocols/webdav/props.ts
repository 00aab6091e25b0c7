/**
 * Properties as PROPFIND shows them: the live ones computed from the core's entries (RFC 4918 §15,
 * RFC 4331 quota), the dead ones stored by the core, and the `<D:response>` of one resource.
 * Responses stay compact (Windows refuses more than about 1 MB of properties per folder): short
 * prefixes, and under allprop only what a client uses.
 */
import path from 'node:path';
import type { DavLock, DeadProperty, Entry } from '../../src/core/index.ts';
import { etagOf, hrefOf, httpDate, isoDate } from './http.ts';
import { Multistatus } from './multistatus.ts';
import { covers, lockDiscovery, supportedLock } from './locks.ts';
import { build, contentNodes, DAV, dav, escapeXml, node, qualified, text, type Node } from './xml.ts';

/** QName is a property name. */
export interface QName {
  ns: string;
  name: string;
}

/** LIVE lists the live properties we can compute. */
export const LIVE = [
  'resourcetype',
  'getcontentlength',
  'getlastmodified',
  'creationdate',
  'getetag',
  'getcontenttype',
  'displayname',
  'supportedlock',
  'lockdiscovery',
  'quota-available-bytes',
  'quota-used-bytes',
] as const;

// allprop (RFC 4918 §9.1) returns these, plus lockdiscovery when the resource is locked; the
// rest only by name: RFC 4331 forbids quota under allprop, and supportedlock would add ~200
// bytes per entry to every folder listing.
const ALLPROP = [
  'resourcetype',
  'getcontentlength',
  'getlastmodified',
  'creationdate',
  'getetag',
  'getcontenttype',
];

const types: Record<string, string> = {
  '.txt': 'text/plain',
  '.html': 'text/html',
  '.htm': 'text/html',
  '.css': 'text/css',
  '.js': 'text/javascript',
  '.json': 'application/json',
  '.xml': 'application/xml',
  '.pdf': 'application/pdf',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.svg': 'image/svg+xml',
  '.zip': 'application/zip',
  '.mp4': 'video/mp4',
  '.mp3': 'audio/mpeg',
};

/** contentTypeOf guesses a file's type from its extension. */
export function contentTypeOf(name: string): string {
  return types[path.extname(name).toLowerCase()] ?? 'application/octet-stream';
}

/** Resource is what a response is built from. */
export interface Resource {
  entry: Entry;
  dead: DeadProperty[];
  locks: DavLock[];
  /** RFC 4331's figures, when the request asked for them; an unknown one is a 404 propstat */
  quota?: { used: number; available: number | null };
  /** the href, when the caller made it already (a listing: the folder's, then each name) */
  href?: string;
}

/** liveProperty computes one DAV: property, or undefined when the resource has none of that name. */
export function liveProperty(name: string, r: Resource): Node | undefined {
  const e = r.entry;
  const file = e.type === 'file';
  switch (name) {
    case 'resourcetype':
      return dav('resourcetype', file ? [] : [dav('collection')]);
    case 'getcontentlength':
      return file ? dav('getcontentlength', [text(String(e.size ?? 0))]) : undefined;
    case 'getlastmodified':
      return dav('getlastmodified', [text(httpDate(e.mtime))]);
    case 'creationdate':
      return dav('creationdate', [text(isoDate(e.mtime))]);
    case 'getetag': {
      const etag = etagOf(e);
      return etag ? dav('getetag', [text(etag)]) : undefined;
    }
    case 'getcontenttype':
      return file ? dav('getcontenttype', [text(contentTypeOf(e.path))]) : undefined;
    case 'displayname':
      return dav('displayname', [text(e.path === '' ? '/' : e.path.slice(e.path.lastIndexOf('/') + 1))]);
    case 'supportedlock':
      return supportedLock();
    case 'lockdiscovery':
      return lockDiscovery(r.locks);
    case 'quota-available-bytes':
      return r.quota?.available == null
        ? undefined
        : dav('quota-available-bytes', [text(String(r.quota.available))]);
    case 'quota-used-bytes':
      return r.quota ? dav('quota-used-bytes', [text(String(r.quota.used))]) : undefined;
    default:
      return undefined;
  }
}

/** OC is ownCloud's namespace, where rclone's owncloud vendor mode reads `checksums`. */
export const OC = 'http://owncloud.org/ns';

/**
 * checksums is ownCloud's `oc:checksums` of a file: the stored MD5 as `MD5:<hex>` inside one
 * `oc:checksum`, the form rclone's webdav backend parses (vendor owncloud), so `rclone check` and
 * a second `rclone sync` compare hashes instead of sending everything again. Folders have none.
 */
export function checksums(e: Entry): Node | undefined {
  if (e.type !== 'file' || !e.md5) return undefined;
  // The inner element inherits the default namespace its parent declares.
  return qualified(OC, 'checksums', [node('checksum', [text(`MD5:${e.md5}`)])]);
}

/** computedProperty is a live property of any namespace, or undefined when the resource has none. */
export function computedProperty(q: QName, r: Resource): Node | undefined {
  if (q.ns === DAV) return liveProperty(q.name, r);
  return q.ns === OC && q.name === 'checksums' ? checksums(r.entry) : undefined;
}

/** PropRequest is what a PROPFIND asks for. */
export type PropRequest =
  { kind: 'allprop'; include: QName[] } | { kind: 'propname' } | { kind: 'prop'; props: QName[] };

const reason: Record<number, string> = {
  200: 'OK',
  403: 'Forbidden',
  404: 'Not Found',
  409: 'Conflict',
  424: 'Failed Dependency',
};

/** statusLine is a propstat's or response's status. */
export function statusLine(status: number): string {
  return `HTTP/1.1 ${status} ${reason[status] ?? ''}`.trimEnd();
}

/** propstat groups properties under one status. */
export function propstat(status: number, props: Node[]): Node {
  return dav('propstat', [dav('prop', props), dav('status', [text(statusLine(status))])]);
}

const deadNode = (d: DeadProperty, withValue = true) =>
  qualified(d.namespace, d.name, withValue ? contentNodes(d.value) : []);

/** locksOn narrows a folder's locks to those covering one entry. */
export function locksOn(locks: DavLock[], path: string): DavLock[] {
  return locks.filter((l) => covers(l, path));
}

/**
 * liveXml is one DAV: live property as XML text, or undefined when the resource has none of that
 * name: writeLive's text for LIVE_BYTES (in a response that also holds a lock or a dead property),
 * liveProperty's nodes for the rest.
 */
function liveXml(name: string, r: Resource): string | undefined {
  if (!LIVE_BYTES.has(name)) {
    const n = liveProperty(name, r);
    return n && build([n]);
  }
  if (r.entry.type !== 'file' && FILE_ONLY.has(name)) return undefined;
  const w = new Multistatus(256);
  writeLive(w, name, r.entry);
  return w.toString();
}

/** propXml is one wanted property as XML text, or undefined when the resource has none. */
function propXml(q: QName, r: Resource): string | undefined {
  const live = q.ns === DAV ? liveXml(q.name, r) : undefined;
  if (live !== undefined) return live;
  const computed = q.ns === DAV ? undefined : computedProperty(q, r);
  if (computed) return build([computed]);
  const dead = r.dead.find((d) => d.namespace === q.ns && d.name === q.name);
  return dead && build([deadNode(dead)]);
}

const propstatXml = (status: number, props: string) =>
  `<D:propstat><D:prop>${props}</D:prop><D:status>${statusLine(status)}</D:status></D:propstat>`;

const fixed = (s: string) => Buffer.from(s, 'latin1');
const TEXT = {
  open: fixed('<D:response><D:href>'),
  href: fixed('</D:href>'),
  props: fixed('<D:propstat><D:prop>'),
  found: fixed(`</D:prop><D:status>${statusLine(200)}</D:status></D:propstat>`),
  missing: fixed(`</D:prop><D:status>${statusLine(404)}</D:status></D:propstat>`),
  close: fixed('</D:response>'),
};
const tag = (name: string) => [fixed(`<D:${name}>`), fixed(`</D:${name}>`)] as const;
const [LENGTH, LENGTH_END] = tag('getcontentlength');
const [MODIFIED, MODIFIED_END] = tag('getlastmodified');
const [CREATED, CREATED_END] = tag('creationdate');
const [ETAG, ETAG_END] = [fixed('<D:getetag>&quot;'), fixed('&quot;</D:getetag>')];
const [TYPE, TYPE_END] = tag('getcontenttype');
const [NAME, NAME_END] = tag('displayname');
const FILE_TYPE = fixed('<D:resourcetype/>');
const FOLDER_TYPE = fixed('<D:resourcetype><D:collection/></D:resourcetype>');

/**
 * writeLive writes one of LIVE_BYTES as bytes: etagOf's ETag (its quotes are its only characters
 * XML escapes), httpDate's and isoDate's dates. One function with a switch, not a table of
 * functions: V8 then inlines the writes, and boxes no number on the way.
 */
function writeLive(w: Multistatus, name: string, e: Entry): void {
  switch (name) {
    case 'resourcetype':
      return w.fixed(e.type === 'file' ? FILE_TYPE : FOLDER_TYPE);
    case 'getcontentlength':
      w.fixed(LENGTH);
      w.int(e.size ?? 0);
      return w.fixed(LENGTH_END);
    case 'getlastmodified':
      w.fixed(MODIFIED);
      w.httpDate(e.mtime);
      return w.fixed(MODIFIED_END);
    case 'creationdate':
      w.fixed(CREATED);
      w.isoDate(e.mtime);
      return w.fixed(CREATED_END);
    case 'getetag':
      w.fixed(ETAG);
      w.ascii(e.md5 ?? 'x');
      w.ascii('-');
      w.int(e.size ?? 0, 36);
      w.ascii('-');
      w.int(e.mtime.getTime(), 36);
      return w.fixed(ETAG_END);
    case 'getcontenttype':
      w.fixed(TYPE);
      w.ascii(contentTypeOf(e.path));
      return w.fixed(TYPE_END);
    case 'displayname':
      w.fixed(NAME);
      w.text(escapeXml(e.path === '' ? '/' : e.path.slice(e.path.lastIndexOf('/') + 1)));
      return w.fixed(NAME_END);
  }
}
/** LIVE_BYTES are the live properties writeLive writes; the file only ones (FILE_ONLY) a folder does not have. */
const LIVE_BYTES = new Set([...ALLPROP, 'displayname']);
const FILE_ONLY = new Set(['getcontentlength', 'getetag', 'getcontenttype']);

/** Plan is what a request's responses hold for a file and for a folder, when written as bytes. */
interface Plan {
  /** allprop: answered only for a resource without locks and dead properties */
  allprop: boolean;
  file: { found: string[]; missing: Buffer | null };
  folder: { found: string[]; missing: Buffer | null };
}

const plans = new WeakMap<PropRequest, Plan | null>();

/**
 * planOf is how a request's responses are written as bytes, or null when they are not: a plain
 * allprop (what Explorer, Finder and davfs2 ask of every entry of a folder) and a `prop` naming
 * only LIVE_BYTES (rclone asks for four). Made once per request.
 */
function planOf(req: PropRequest): Plan | null {
  let plan = plans.get(req);
  if (plan !== undefined) return plan;
  plan = null;
  const names =
    req.kind === 'allprop' && !req.include.length
      ? ALLPROP
      : req.kind === 'prop' && req.props.every((q) => q.ns === DAV && LIVE_BYTES.has(q.name))
        ? [...new Set(req.props.map((q) => q.name))]
        : null;
  if (names) {
    const side = (file: boolean) => {
      const missing = names.filter((n) => !file && FILE_ONLY.has(n));
      return {
        found: names.filter((n) => file || !FILE_ONLY.has(n)),
        // allprop lists only what a resource has; a `prop` names the rest under 404 (RFC 4918 §9.1).
        missing:
          req.kind === 'prop' && missing.length ? fixed(build(missing.map((n) => qualified(DAV, n)))) : null,
      };
    };
    plan = { allprop: req.kind === 'allprop', file: side(true), folder: side(false) };
  }
  plans.set(req, plan);
  return plan;
}

/** planFor is the plan that writes this resource's response as bytes, or null. */
function planFor(r: Resource, req: PropRequest): Plan | null {
  const plan = planOf(req);
  return plan && (!plan.allprop || (!r.locks.length && !r.dead.length)) ? plan : null;
}

/** writePlanned writes a resource's response by its plan (planFor). */
function writePlanned(w: Multistatus, r: Resource, plan: Plan): void {
  const e = r.entry;
  const { found, missing } = e.type === 'file' ? plan.file : plan.folder;
  w.fixed(TEXT.open);
  w.text(escapeXml(r.href ?? hrefOf(e.path, e.type === 'directory')));
  w.fixed(TEXT.href);
  if (found.length) {
    w.fixed(TEXT.props);
    for (let i = 0; i < found.length; i++) writeLive(w, found[i]!, e);
    w.fixed(TEXT.found);
  }
  if (missing) {
    w.fixed(TEXT.props);
    w.fixed(missing);
    w.fixed(TEXT.missing);
  }
  w.fixed(TEXT.close);
}

/**
 * writeResponse writes the `<D:response>` of one resource into a multistatus: as bytes directly
 * when its properties are all LIVE_BYTES (a folder's listing writes one per entry), else as
 * response() builds it.
 */
export function writeResponse(w: Multistatus, r: Resource, req: PropRequest): void {
  const plan = planFor(r, req);
  if (plan) writePlanned(w, r, plan);
  else w.text(response(r, req));
}

/** response builds the `<D:response>` XML of one resource. */
export function response(r: Resource, req: PropRequest): string {
  const plan = planFor(r, req);
  if (plan) {
    const w = new Multistatus(1024);
    writePlanned(w, r, plan);
    return w.toString();
  }
  let found = '';
  let missing = '';
  if (req.kind === 'propname') {
    const names: Node[] = [];
    for (const name of LIVE) {
      if (liveProperty(name, r)) names.push(dav(name));
    }
    if (checksums(r.entry)) names.push(qualified(OC, 'checksums'));
    for (const d of r.dead) names.push(deadNode(d, false));
    found = build(names);
  } else {
    const wanted: QName[] =
      req.kind === 'prop'
        ? req.props
        : [
            ...ALLPROP.map((name) => ({ ns: DAV, name })),
            ...(r.locks.length ? [{ ns: DAV, name: 'lockdiscovery' }] : []),
            ...r.dead.map((d) => ({ ns: d.namespace, name: d.name })),
            ...req.include,
          ];
    const seen = new Set<string>();
    for (const q of wanted) {
      const key = `${q.ns}\0${q.name}`;
      if (seen.has(key)) continue;
      seen.add(key);
      const xml = propXml(q, r);
      if (xml !== undefined) found += xml;
      else if (req.kind === 'prop') missing += build([qualified(q.ns, q.name)]);
    }
  }
  const href = r.href ?? hrefOf(r.entry.path, r.entry.type === 'directory');
  let out = `<D:response><D:href>${escapeXml(href)}</D:href>`;
  if (found) out += propstatXml(200, found);
  if (missing) out += propstatXml(404, missing);
  return `${out}</D:response>`;
}
