/**
 * The protocol side of locking: the `If` header (RFC 4918 §10.4) parsed and evaluated against
 * the resources' ETags and the locks the core holds, the tokens it submits handed to the core,
 * the 423 of a write a lock refused (lock-token-submitted), and the lockdiscovery XML. Locks, and
 * the rule of which write a lock binds, are the core's (core.dav.locks, in the database).
 */
import {
  GatewayError,
  type Core,
  type DavLock,
  type FileSession,
  type LockedError,
} from '../../src/core/index.ts';
import { DavCondition } from './errors.ts';
import { decodePath, etagOf, hrefOf, type DavContext } from './http.ts';
import { contentNodes, dav, text, type Node } from './xml.ts';

/** Condition is one condition of an If list: a state token or an entity tag, maybe negated. */
export interface Condition {
  not: boolean;
  kind: 'token' | 'etag';
  value: string;
}

/** IfList is one list of the If header, with the resource its tag names (null: the request URL). */
export interface IfList {
  resource: string | null;
  conditions: Condition[];
}

const badIf = (why: string) =>
  new GatewayError('bad-request/request-params-invalid', `Invalid If header: ${why}`);

/** parseIf parses an If header; a syntax error is 400. */
export function parseIf(header: string): IfList[] {
  const lists: IfList[] = [];
  let i = 0;
  let tag: string | null = null;
  let tagged = false;
  const skip = () => {
    while (i < header.length && /\s/.test(header[i]!)) i++;
  };
  const until = (close: string) => {
    const end = header.indexOf(close, i + 1);
    if (end < 0) throw badIf(`missing ${close}`);
    const v = header.slice(i + 1, end);
    i = end + 1;
    return v;
  };
  skip();
  if (i >= header.length) throw badIf('empty');
  while (i < header.length) {
    const c = header[i];
    if (c === '<') {
      if (lists.length > 0 && !tagged) throw badIf('a resource tag after an untagged list');
      const url = until('>');
      const m = /^(?:https?:\/\/[^/?#]*)?(\/[^?#]*)$/i.exec(url.trim());
      if (!m) throw badIf('the resource tag is not a URL');
      tag = decodePath(m[1]!);
      tagged = true;
      skip();
      if (header[i] !== '(') throw badIf('a resource tag without a list');
    } else if (c === '(') {
      if (lists.length > 0 && tagged !== (tag !== null)) throw badIf('tagged and untagged lists mixed');
      i++;
      const conditions: Condition[] = [];
      for (;;) {
        skip();
        if (header[i] === ')') {
          i++;
          break;
        }
        let not = false;
        if (/^not\b/i.test(header.slice(i, i + 4)) && /[\s<[]/.test(header[i + 3] ?? '')) {
          not = true;
          i += 3;
          skip();
        }
        if (header[i] === '<') conditions.push({ not, kind: 'token', value: until('>').trim() });
        else if (header[i] === '[') conditions.push({ not, kind: 'etag', value: until(']').trim() });
        else throw badIf('expected a state token or an entity tag');
      }
      if (!conditions.length) throw badIf('an empty list');
      lists.push({ resource: tagged ? tag : null, conditions });
    } else throw badIf(`unexpected "${c}"`);
    skip();
  }
  return lists;
}

/** covers tells whether a lock applies to a path (its root, or below a depth-infinity root). */
export function covers(lock: DavLock, path: string): boolean {
  return (
    lock.path === path ||
    (lock.depth === 'infinity' && (lock.path === '' || path.startsWith(`${lock.path}/`)))
  );
}

/** submittedTokens lists the lock tokens the If header submits (RFC 4918 §10.4.1). */
export function submittedTokens(lists: IfList[]): Set<string> {
  return new Set(
    lists.flatMap((l) => l.conditions.filter((c) => c.kind === 'token' && !c.not).map((c) => c.value)),
  );
}

async function etagAt(ctx: DavContext, path: string): Promise<string | null> {
  try {
    return etagOf(await ctx.state.session.stat(path));
  } catch (err) {
    if (err instanceof GatewayError && err.family === 'not-found') return null;
    throw err;
  }
}

/** evaluateIf checks the If header's lists (412 when none holds) and returns the tokens it submits. */
export async function evaluateIf(ctx: DavContext, core: Core): Promise<Set<string>> {
  const header = ctx.get('If');
  if (!header) return new Set();
  const lists = parseIf(header);
  const states = new Map<string, { etag: string | null; tokens: Set<string> }>();
  const state = async (path: string) => {
    let s = states.get(path);
    if (!s) {
      const locks = await core.dav.locks.affecting(ctx.state.session, path);
      s = { etag: await etagAt(ctx, path), tokens: new Set(locks.map((l) => l.token)) };
      states.set(path, s);
    }
    return s;
  };
  let holds = false;
  for (const list of lists) {
    const s = await state(list.resource ?? ctx.state.path);
    // Strong comparison (RFC 4918 §10.4.4): a weak tag never matches.
    const ok = list.conditions.every(
      (c) =>
        c.not !==
        (c.kind === 'token' ? s.tokens.has(c.value) : !c.value.startsWith('W/') && c.value === s.etag),
    );
    if (ok) {
      holds = true;
      break;
    }
  }
  if (!holds) throw new DavCondition(412, null, [], 'The If header does not hold');
  return submittedTokens(lists);
}

/**
 * checkWrite enforces the If header of a write (RFC 4918 §10.4: it must hold, else 412) and returns
 * the session to make the change with, carrying the lock tokens the header submitted. Whether a
 * lock binds the change is the core's rule, applied in the change itself on every front end: its
 * LockedError becomes 423 with the `lock-token-submitted` condition (lockTokenSubmitted).
 */
export async function checkWrite(ctx: DavContext, core: Core): Promise<FileSession> {
  return ctx.state.session.withLockTokens(await evaluateIf(ctx, core));
}

/** lockTokenSubmitted is RFC 4918's 423 for a change refused by a lock, naming the locked root. */
export function lockTokenSubmitted(err: LockedError): DavCondition {
  return new DavCondition(
    423,
    'lock-token-submitted',
    [dav('href', [text(hrefOf(err.lockRoot, false))])],
    err.message,
  );
}

/** activeLock is the DAV:activelock element of a lock. */
export function activeLock(lock: DavLock): Node {
  const remaining = Math.max(0, Math.round((lock.expiresAt.getTime() - Date.now()) / 1000));
  return dav('activelock', [
    dav('locktype', [dav('write')]),
    dav('lockscope', [dav(lock.scope)]),
    dav('depth', [text(lock.depth === 'infinity' ? 'infinity' : '0')]),
    ...(lock.owner ? [dav('owner', contentNodes(lock.owner))] : []),
    dav('timeout', [text(`Second-${remaining}`)]),
    dav('locktoken', [dav('href', [text(lock.token)])]),
    dav('lockroot', [dav('href', [text(hrefOf(lock.path, false))])]),
  ]);
}

/** lockDiscovery is the DAV:lockdiscovery property of a resource with these locks. */
export function lockDiscovery(locks: DavLock[]): Node {
  return dav('lockdiscovery', locks.map(activeLock));
}

/** supportedLock is the DAV:supportedlock property: exclusive and shared write locks. */
export function supportedLock(): Node {
  const entry = (scope: string) =>
    dav('lockentry', [dav('lockscope', [dav(scope)]), dav('locktype', [dav('write')])]);
  return dav('supportedlock', [entry('exclusive'), entry('shared')]);
}
