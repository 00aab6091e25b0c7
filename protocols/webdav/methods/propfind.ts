/**
 * PROPFIND (RFC 4918 §9.1): Depth 0 and 1, streamed one page of the folder at a time; Depth
 * infinity (and a missing Depth, which means infinity) is refused with `propfind-finite-depth`.
 */
import { Readable } from 'node:stream';
import type { Core, Entry } from '../../../src/core/index.ts';
import { DavCondition } from '../errors.ts';
import { depthOf, hrefOf, type Method } from '../http.ts';
import { locksOn, response, type PropRequest, type QName } from '../props.ts';
import { child, DAV, elements, readXml, XML_HEAD } from '../xml.ts';
import { GatewayError } from '../../../src/core/index.ts';

const PAGE = 500;

function request(body: Awaited<ReturnType<typeof readXml>>): PropRequest {
  if (!body) return { kind: 'allprop', include: [] };
  if (body.ns !== DAV || body.name !== 'propfind')
    throw new GatewayError('bad-request/invalid-body', 'The body of a PROPFIND must be a DAV:propfind');
  const names = (el: ReturnType<typeof child>): QName[] =>
    el ? elements(el).map((e) => ({ ns: e.ns, name: e.name })) : [];
  const prop = child(body, 'prop');
  if (prop) return { kind: 'prop', props: names(prop) };
  if (child(body, 'propname')) return { kind: 'propname' };
  if (child(body, 'allprop')) return { kind: 'allprop', include: names(child(body, 'include')) };
  throw new GatewayError('bad-request/invalid-body', 'A DAV:propfind needs prop, propname or allprop');
}

/** propfind answers PROPFIND with a streamed multistatus. */
export const propfind: Method = async (ctx, core: Core) => {
  const depth = depthOf(ctx, 'infinity');
  if (depth === 'infinity')
    throw new DavCondition(403, 'propfind-finite-depth', [], 'Depth infinity is not supported');
  const req = request(await readXml(ctx.req));
  const { session, path } = ctx.state;
  const self = await session.stat(path);
  const wants = (name: string, ns = DAV) =>
    req.kind !== 'prop' || req.props.some((p) => p.ns === ns && p.name === name);
  const wantsDead = req.kind !== 'prop' || req.props.some((p) => p.ns !== DAV);
  const wantsLocks = req.kind !== 'prop' || wants('lockdiscovery');
  const quota =
    req.kind === 'prop' && (wants('quota-used-bytes') || wants('quota-available-bytes'))
      ? await core.dav.properties.quota(session)
      : undefined;
  const folder = self.type === 'directory' && depth === '1';
  const locks = wantsLocks ? await core.dav.locks.affecting(session, path, { descendants: folder }) : [];
  // A child's href is the folder's, then its encoded name (hrefOf would encode the folder again).
  const prefix = path === '' ? '/' : hrefOf(path, true);
  const page = async (entries: Entry[], children: boolean) => {
    const dead = wantsDead
      ? await core.dav.properties.getMany(
          session,
          entries.map((e) => e.path),
        )
      : null;
    return entries
      .map((entry) =>
        response(
          {
            entry,
            dead: dead?.get(entry.path) ?? [],
            locks: locksOn(locks, entry.path),
            ...(quota === undefined ? {} : { quota }),
            ...(children
              ? {
                  href: `${prefix}${encodeURIComponent(entry.path.slice(entry.path.lastIndexOf('/') + 1))}${entry.type === 'directory' ? '/' : ''}`,
                }
              : {}),
          },
          req,
        ),
      )
      .join('');
  };
  // The first page is built before the status is sent, so its errors still get a proper reply.
  const first = await page([self], false);
  async function* stream(): AsyncGenerator<string> {
    yield `${XML_HEAD}<D:multistatus xmlns:D="DAV:">${first}`;
    if (folder) for await (const entries of session.listAll(path, PAGE)) yield await page(entries, true);
    yield '</D:multistatus>';
  }
  ctx.status = 207;
  ctx.type = 'application/xml; charset=utf-8';
  ctx.body = Readable.from(stream());
};
