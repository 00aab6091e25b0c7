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
 * liveXml writes one DAV: live property as XML text, or undefined when the resource has none of
 * that name: the same text liveProperty's nodes build to, written directly, since a folder's
 * PROPFIND writes these for every entry (issue 13: a 10,000-entry listing).
 */
function liveXml(name: string, r: Resource): string | undefined {
  const e = r.entry;
  const file = e.type === 'file';
  switch (name) {
    case 'resourcetype':
      return file ? '<D:resourcetype/>' : '<D:resourcetype><D:collection/></D:resourcetype>';
    case 'getcontentlength':
      return file ? `<D:getcontentlength>${e.size ?? 0}</D:getcontentlength>` : undefined;
    case 'getlastmodified':
      return `<D:getlastmodified>${httpDate(e.mtime)}</D:getlastmodified>`;
    case 'creationdate':
      return `<D:creationdate>${isoDate(e.mtime)}</D:creationdate>`;
    case 'getetag': {
      const etag = etagOf(e);
      return etag ? `<D:getetag>${escapeXml(etag)}</D:getetag>` : undefined;
    }
    case 'getcontenttype':
      return file ? `<D:getcontenttype>${contentTypeOf(e.path)}</D:getcontenttype>` : undefined;
    case 'displayname':
      return `<D:displayname>${escapeXml(e.path === '' ? '/' : e.path.slice(e.path.lastIndexOf('/') + 1))}</D:displayname>`;
    default: {
      const n = liveProperty(name, r);
      return n && build([n]);
    }
  }
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

/**
 * isPlain tells whether a resource's response is a plain allprop one (what Explorer, Finder and
 * davfs2 ask of every entry of a folder): ALLPROP's properties, no lock, no dead property.
 */
const isPlain = (r: Resource, req: PropRequest) =>
  req.kind === 'allprop' && !r.locks.length && !r.dead.length && !req.include.length;

const fixed = (s: string) => Buffer.from(s, 'latin1');
// The fixed text of a plain response, around its href, size, dates, ETag and content type.
const PLAIN = {
  open: fixed('<D:response><D:href>'),
  file: fixed('</D:href><D:propstat><D:prop><D:resourcetype/><D:getcontentlength>'),
  folder: fixed('</D:href><D:propstat><D:prop><D:resourcetype><D:collection/></D:resourcetype>'),
  modified: fixed('</D:getcontentlength><D:getlastmodified>'),
  folderModified: fixed('<D:getlastmodified>'),
  created: fixed('</D:getlastmodified><D:creationdate>'),
  etag: fixed('</D:creationdate><D:getetag>&quot;'),
  type: fixed('&quot;</D:getetag><D:getcontenttype>'),
  fileEnd: fixed(
    '</D:getcontenttype></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>',
  ),
  folderEnd: fixed(
    '</D:creationdate></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>',
  ),
};
// Room for a plain response beyond its href and MD5: the fixed text, numbers and dates (the
// widest dates are those Date writes itself, years beyond 1000-9999).
const PLAIN_ROOM = Object.values(PLAIN).reduce((n, b) => n + b.length, 0) + 200;

/**
 * writePlain writes a plain response (isPlain) as bytes: etagOf's ETag (its quotes are its only
 * characters XML escapes), httpDate's and isoDate's dates, contentTypeOf's type.
 */
function writePlain(w: Multistatus, r: Resource): void {
  const e = r.entry;
  const file = e.type === 'file';
  w.room(PLAIN.open.length);
  w.fixed(PLAIN.open);
  w.text(escapeXml(r.href ?? hrefOf(e.path, !file)));
  w.room(PLAIN_ROOM + (e.md5?.length ?? 1));
  if (file) {
    w.fixed(PLAIN.file);
    w.int(e.size ?? 0);
    w.fixed(PLAIN.modified);
  } else {
    w.fixed(PLAIN.folder);
    w.fixed(PLAIN.folderModified);
  }
  w.httpDate(e.mtime);
  w.fixed(PLAIN.created);
  w.isoDate(e.mtime);
  if (!file) return w.fixed(PLAIN.folderEnd);
  w.fixed(PLAIN.etag);
  w.ascii(e.md5 ?? 'x');
  w.ascii('-');
  w.int(e.size ?? 0, 36);
  w.ascii('-');
  w.int(e.mtime.getTime(), 36);
  w.fixed(PLAIN.type);
  w.ascii(contentTypeOf(e.path));
  w.fixed(PLAIN.fileEnd);
}

/**
 * writeResponse writes the `<D:response>` of one resource into a multistatus: a plain one as
 * bytes directly (a folder's listing writes one per entry), any other as response() builds it.
 */
export function writeResponse(w: Multistatus, r: Resource, req: PropRequest): void {
  if (isPlain(r, req)) writePlain(w, r);
  else w.text(response(r, req));
}

/** response builds the `<D:response>` XML of one resource. */
export function response(r: Resource, req: PropRequest): string {
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
  } else if (isPlain(r, req)) {
    const w = new Multistatus(1024);
    writePlain(w, r);
    return w.toString();
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
