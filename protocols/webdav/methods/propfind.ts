/**
 * PROPFIND (RFC 4918 §9.1): Depth 0 and 1, streamed one page of the folder at a time; Depth
 * infinity (and a missing Depth, which means infinity) is refused with `propfind-finite-depth`.
 */
import { Readable } from 'node:stream';
import type { Core, DeadProperty, Entry } from '../../../src/core/index.ts';
import { DavCondition } from '../errors.ts';
import { depthOf, hrefOf, type Method } from '../http.ts';
import { Multistatus, PIECE } from '../multistatus.ts';
import { locksOn, response, writeResponse, type PropRequest, type QName, type Resource } from '../props.ts';
import { child, DAV, elements, readXml, XML_HEAD } from '../xml.ts';
import { GatewayError } from '../../../src/core/index.ts';

const PAGE = 500;

type DeadOf = Map<string, DeadProperty[]> | null;

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
  // A folder's children are looked up page by page only if something inside it has dead
  // properties at all (most folders: none; 5 ms of a 10,000-entry listing), asked at the first page.
  let childrenDead: boolean | undefined;
  /** deadOf reads the dead properties of a page of entries at once, when they are wanted. */
  const deadOf = async (entries: Entry[], wanted = wantsDead) =>
    wanted
      ? await core.dav.properties.getMany(
          session,
          entries.map((e) => e.path),
        )
      : null;
  /** resourceOf is what one entry's `<D:response>` is made of; a folder's children are named by href under the folder's. */
  const resourceOf = (entry: Entry, dead: DeadOf, children: boolean): Resource => ({
    entry,
    dead: dead?.get(entry.path) ?? [],
    locks: locks.length ? locksOn(locks, entry.path) : locks,
    ...(quota === undefined ? {} : { quota }),
    ...(children
      ? {
          href: `${prefix}${encodeURIComponent(entry.path.slice(entry.path.lastIndexOf('/') + 1))}${entry.type === 'directory' ? '/' : ''}`,
        }
      : {}),
  });
  // The first response is built before the status is sent, so its errors still get a proper reply.
  const first = response(resourceOf(self, await deadOf([self]), false), req);
  // The body is written as bytes (multistatus.ts) and goes out in pieces of PIECE bytes, each
  // handed over as soon as it is full: a listing is never held whole.
  async function* stream(): AsyncGenerator<Buffer> {
    const out = new Multistatus();
    out.text(`${XML_HEAD}<D:multistatus xmlns:D="DAV:">${first}`);
    if (folder)
      for await (const entries of session.listAll(path, PAGE)) {
        childrenDead ??= wantsDead && (await core.dav.properties.anyInside(session, path));
        const dead = await deadOf(entries, childrenDead);
        for (const entry of entries) {
          writeResponse(out, resourceOf(entry, dead, true), req);
          if (out.ready) yield* out.take();
        }
      }
    out.text('</D:multistatus>');
    yield* out.end();
  }
  // A multistatus that is one piece (a Depth 0 PROPFIND, a small folder: most of what clients ask)
  // is sent whole, which Node writes with the headers at once; a stream costs another write and a
  // pipeline (whose end makes an AbortError with its stack): a tenth of such a request.
  const pieces = stream();
  const head = await pieces.next();
  const next = head.done ? head : await pieces.next();
  ctx.status = 207;
  ctx.type = 'application/xml; charset=utf-8';
  if (head.done || next.done) {
    ctx.body = head.value ?? Buffer.alloc(0);
    return;
  }
  // Not object mode: the stream holds about one piece, not 16 of them, while the client reads.
  ctx.body = Readable.from(resumed([head.value, next.value], pieces), {
    objectMode: false,
    highWaterMark: PIECE,
  });
};

/** resumed yields the pieces already taken from a stream, then the rest of it. */
async function* resumed(taken: Buffer[], rest: AsyncGenerator<Buffer>): AsyncGenerator<Buffer> {
  yield* taken;
  yield* rest;
}
