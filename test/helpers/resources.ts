/**
 * What the test process holds open, counted the way an operator would see a leak: its open
 * descriptors (/proc/self/fd, each named by kind — a socket by the gateway port or peer it belongs
 * to) and Node's active resources (`process.getActiveResourcesInfo()`, by kind). The resource tests
 * take a snapshot before a batch of operations and wait, bounded, for the counts to come back.
 */
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';

/** Snapshot is the process's open descriptors and active resources, counted by kind. */
export interface Snapshot {
  descriptors: number;
  /** descriptor kinds: `socket <role>`, `pipe`, `file`, `anon_inode:…` */
  descriptorKinds: Record<string, number>;
  resources: number;
  /** active resource kinds: TCPSocketWrap, TCPServerWrap, Timeout, FSReqPromise, … */
  resourceKinds: Record<string, number>;
}

/** SocketRoles names a socket by a local port (a listener's, or a range) or a remote port. */
export interface SocketRoles {
  /** local port → role, e.g. 2121 → 'ftp control' */
  local: Map<number, string>;
  /** a local port range and its role, e.g. the passive range → 'ftp data' */
  localRanges: { first: number; last: number; role: string }[];
  /** remote port → role, e.g. 5432 → 'database' */
  remote: Map<number, string>;
}

/** tcpSockets reads /proc/self/net/tcp{,6}: socket inode → local and remote port. */
function tcpSockets(): Map<string, { local: number; remote: number }> {
  const out = new Map<string, { local: number; remote: number }>();
  for (const file of ['/proc/self/net/tcp', '/proc/self/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10) continue;
      const port = (address: string) => parseInt(address.split(':')[1] ?? '0', 16);
      out.set(f[9]!, { local: port(f[1]!), remote: port(f[2]!) });
    }
  }
  return out;
}

function roleOf(socket: { local: number; remote: number } | undefined, roles: SocketRoles): string {
  // A TCP socket both ends have shut down leaves the kernel's table while its descriptor stays
  // open, until the process reads the end of the stream or closes it: the FTP data leak of issue 19.
  if (!socket) return 'socket (disconnected, or not TCP)';
  const local = roles.local.get(socket.local);
  if (local) return `socket ${local}`;
  const range = roles.localRanges.find((r) => socket.local >= r.first && socket.local <= r.last);
  if (range) return `socket ${range.role}`;
  const remote = roles.remote.get(socket.remote);
  if (remote) return `socket ${remote}`;
  if (roles.local.has(socket.remote)) return `socket client of ${roles.local.get(socket.remote)}`;
  return 'socket (other)';
}

/** snapshot counts what the process holds open now. */
export function snapshot(roles: SocketRoles): Snapshot {
  const descriptorKinds: Record<string, number> = {};
  let descriptors = 0;
  let sockets: Map<string, { local: number; remote: number }> | null = null;
  for (const fd of readdirSync('/proc/self/fd')) {
    let target = '';
    try {
      target = readlinkSync(`/proc/self/fd/${fd}`);
    } catch {
      continue; // the descriptor readdir itself used, already closed
    }
    descriptors++;
    let kind: string;
    const socket = /^socket:\[(\d+)\]$/.exec(target);
    if (socket) {
      sockets ??= tcpSockets();
      kind = roleOf(sockets.get(socket[1]!), roles);
    } else if (target.startsWith('pipe:')) kind = 'pipe';
    else if (target.startsWith('anon_inode:')) kind = target;
    else kind = 'file';
    descriptorKinds[kind] = (descriptorKinds[kind] ?? 0) + 1;
  }
  const resourceKinds: Record<string, number> = {};
  const info = process.getActiveResourcesInfo();
  for (const kind of info) resourceKinds[kind] = (resourceKinds[kind] ?? 0) + 1;
  return { descriptors, descriptorKinds, resources: info.length, resourceKinds };
}

/** Growth is what a snapshot holds beyond a baseline, by kind (only the kinds that grew). */
export interface Growth {
  descriptors: number;
  resources: number;
  descriptorKinds: Record<string, number>;
  resourceKinds: Record<string, number>;
}

function grown(now: Record<string, number>, base: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [kind, n] of Object.entries(now)) if (n > (base[kind] ?? 0)) out[kind] = n - (base[kind] ?? 0);
  return out;
}

/** growth compares a snapshot with a baseline. */
export function growth(now: Snapshot, base: Snapshot): Growth {
  return {
    descriptors: now.descriptors - base.descriptors,
    resources: now.resources - base.resources,
    descriptorKinds: grown(now.descriptorKinds, base.descriptorKinds),
    resourceKinds: grown(now.resourceKinds, base.resourceKinds),
  };
}

/** describeGrowth says what grew, e.g. "descriptors +50 (socket ftp data: 50); resources +50 (TCPSocketWrap: 50)". */
export function describeGrowth(g: Growth): string {
  const kinds = (k: Record<string, number>) =>
    Object.entries(k)
      .map(([kind, n]) => `${kind}: ${n}`)
      .join(', ') || 'none by kind';
  return `descriptors ${g.descriptors >= 0 ? '+' : ''}${g.descriptors} (${kinds(g.descriptorKinds)}); resources ${g.resources >= 0 ? '+' : ''}${g.resources} (${kinds(g.resourceKinds)})`;
}

/**
 * settled polls until the process holds at most `slack` more descriptors and active resources
 * (in total and of each kind) than `base`, or `timeoutMs` passed; it returns the last growth and
 * whether it came back. Kinds in `allowance` may grow by that much more (a database pool).
 */
export async function settled(
  base: Snapshot,
  roles: SocketRoles,
  opts: { slack: number; timeoutMs: number; allowance?: Record<string, number> },
): Promise<{ ok: boolean; growth: Growth; waitedMs: number }> {
  const started = Date.now();
  const allowance = opts.allowance ?? {};
  const extra = Object.values(allowance).reduce((a, b) => a + b, 0);
  for (;;) {
    const g = growth(snapshot(roles), base);
    const within = (kinds: Record<string, number>) =>
      Object.entries(kinds).every(([kind, n]) => n <= opts.slack + (allowance[kind] ?? 0));
    const ok =
      g.descriptors <= opts.slack + extra &&
      g.resources <= opts.slack + extra &&
      within(g.descriptorKinds) &&
      within(g.resourceKinds);
    const waitedMs = Date.now() - started;
    if (ok || waitedMs >= opts.timeoutMs) return { ok, growth: g, waitedMs };
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
