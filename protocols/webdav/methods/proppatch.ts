/**
 * PROPPATCH (RFC 4918 §9.2): dead properties set and removed in document order, all or none, in
 * the database. DAV: properties are protected (403, the rest 424), except the modification time
 * as the clients that keep one send it: ownCloud's `DAV:lastmodified` in unix seconds (rclone's
 * owncloud and nextcloud vendors) and Explorer's `Win32LastModifiedTime` (MS-XWDV §2.2.1, an HTTP
 * date). Either becomes the file's mtime, which every protocol shows. Explorer's other Win32
 * properties are kept as dead ones. ownCloud's `oc:checksums` is computed from the stored MD5:
 * rclone sets it beside `lastmodified`; a value that agrees with the content is answered 200 and
 * not stored, an MD5 that contradicts it 409.
 */
import { GatewayError, type Core, type Entry, type PropertyChange } from '../../../src/core/index.ts';
import { checkWrite } from '../locks.ts';
import { OC, propstat } from '../props.ts';
import { hrefOf, unixTimeOf, type Method } from '../http.ts';
import {
  DAV,
  dav,
  elements,
  qualified,
  readXml,
  serializeContent,
  text,
  textOf,
  XML_HEAD,
  build,
  type El,
} from '../xml.ts';

/** MS is Explorer's namespace for the Win32 properties. */
export const MS = 'urn:schemas-microsoft-com:';

const httpTime = (raw: string): Date | null => {
  const d = new Date(raw.trim());
  return Number.isNaN(d.getTime()) ? null : d;
};

/** MTIME_PROPERTIES are the properties that set the modification time, with how each writes it. */
const MTIME_PROPERTIES = new Map<string, (raw: string) => Date | null>([
  [`${DAV}\0lastmodified`, unixTimeOf],
  [`${MS}\0Win32LastModifiedTime`, httpTime],
]);

/** checksumsAgree tells whether an `oc:checksums` value names no MD5 other than the file's. */
function checksumsAgree(p: El, entry: Entry): boolean {
  return textOf(p)
    .split(/\s+/)
    .filter((c) => /^md5:/i.test(c))
    .every((c) => c.slice(4).toLowerCase() === entry.md5);
}

/** proppatch answers PROPPATCH with a multistatus. */
export const proppatch: Method = async (ctx, core: Core) => {
  const body = await readXml(ctx.req);
  if (!body || body.ns !== DAV || body.name !== 'propertyupdate')
    throw new GatewayError(
      'bad-request/invalid-body',
      'The body of a PROPPATCH must be a DAV:propertyupdate',
    );
  const { path } = ctx.state;
  const entry = await ctx.state.session.stat(path);
  const session = await checkWrite(ctx, core);
  const changes: PropertyChange[] = [];
  const names: { ns: string; name: string; failed?: number }[] = [];
  let mtime: Date | null = null;
  for (const op of elements(body)) {
    if (op.ns !== DAV || (op.name !== 'set' && op.name !== 'remove')) continue;
    for (const prop of elements(op).filter((e) => e.ns === DAV && e.name === 'prop')) {
      for (const p of elements(prop)) {
        const item: { ns: string; name: string; failed?: number } = { ns: p.ns, name: p.name };
        names.push(item);
        const setsMtime = op.name === 'set' ? MTIME_PROPERTIES.get(`${p.ns}\0${p.name}`) : undefined;
        if (setsMtime) {
          const d = setsMtime(textOf(p));
          if (d) mtime = d;
          else item.failed = 409;
        } else if (p.ns === OC && p.name === 'checksums') {
          if (op.name === 'remove' || entry.type !== 'file') item.failed = 403;
          else if (!checksumsAgree(p, entry)) item.failed = 409;
        } else if (p.ns === DAV) item.failed = 403;
        else if (op.name === 'set')
          changes.push({ op: 'set', namespace: p.ns, name: p.name, value: serializeContent(p) });
        else changes.push({ op: 'remove', namespace: p.ns, name: p.name });
      }
    }
  }
  const failed = names.some((n) => n.failed);
  if (!failed) {
    if (changes.length) await core.dav.properties.patch(session, path, changes);
    if (mtime) await session.setMtime(path, mtime);
  }
  const byStatus = new Map<number, ReturnType<typeof qualified>[]>();
  const seen = new Set<string>();
  for (const n of names) {
    const key = `${n.ns}\0${n.name}`;
    if (seen.has(key)) continue;
    seen.add(key);
    const status = failed ? (n.failed ?? 424) : 200;
    byStatus.set(status, [...(byStatus.get(status) ?? []), qualified(n.ns, n.name)]);
  }
  const response = dav('response', [
    dav('href', [text(hrefOf(path, entry.type === 'directory'))]),
    ...[...byStatus].map(([status, props]) => propstat(status, props)),
  ]);
  ctx.status = 207;
  ctx.type = 'application/xml; charset=utf-8';
  ctx.body = `${XML_HEAD}${build([{ 'D:multistatus': [response], ':@': { '@_xmlns:D': DAV } }])}`;
};
