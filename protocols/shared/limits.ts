/**
 * Connection limits every front end shares (issue 12): per-address and total connection limits,
 * a per-user session limit and a per-user bound on FTP passive listeners, all counted in this
 * process, so that one address (or one user) cannot use up the process's file descriptors or the
 * passive port range for everyone else. A refused connection is answered in its protocol's terms
 * by the adapter, within a small budget, and logged at most once per address per minute.
 *
 * The defaults follow the process's open-file limit, read once at start from /proc/self/limits
 * (Node has no getrlimit; Node raises its soft limit to the hard one at start, so what it reports
 * is what the process can use). Where /proc is missing the common 1,024 is assumed.
 */
import { readFileSync } from 'node:fs';
import type net from 'node:net';
import type { Core, Metrics, Principal } from '../../src/core/index.ts';
import type { Logger } from '../../src/log.ts';
import { clientAddress } from './proxy.ts';

/** Lease is a counted place (a connection, a session, a passive listener); release gives it back, once. */
export interface Lease {
  release(): void;
}

/** LimitName is which limit refused something, as logged. */
export type LimitName =
  'max_connections' | 'max_connections_per_address' | 'max_sessions_per_user' | 'passive_listeners_per_user';

/** Refusal is a limit's answer: which limit, and a sentence the adapter may show the client. */
export interface Refusal {
  refused: LimitName;
  message: string;
}

/** OpenFileLimit is the process's RLIMIT_NOFILE, and where it was read. */
export interface OpenFileLimit {
  soft: number;
  hard: number;
  source: '/proc/self/limits' | 'assumed';
}

/** LimitValues are the limits in force, after the settings' 0 (automatic) was resolved. */
export interface LimitValues {
  maxConnections: number;
  maxConnectionsPerAddress: number;
  /** 0: unlimited */
  maxSessionsPerUser: number;
  passiveListenersPerUser: number;
}

/** FD_RESERVE is what the process keeps for itself: database, log, listeners, blob files of admin work, refusals. */
const FD_RESERVE = 100;
/**
 * FDS_PER_CONNECTION is what one busy connection may hold: its socket, an FTP passive listener and
 * data socket, and the file being sent. Idle connections hold one.
 */
const FDS_PER_CONNECTION = 4;
/** AUTO_MAX_CONNECTIONS caps the automatic total: memory, not descriptors, bounds a process past it. */
const AUTO_MAX_CONNECTIONS = 4096;
/** AUTO_MAX_PER_ADDRESS caps the automatic per-address limit (a whole office behind one NAT fits). */
const AUTO_MAX_PER_ADDRESS = 256;
/** REFUSAL_LOG_MS is how often one address's refusals are logged: once a minute, with the count. */
const REFUSAL_LOG_MS = 60_000;
/** REFUSAL_GRACE_MS is how long a refused connection may take to read its answer before it is cut. */
const REFUSAL_GRACE_MS = 5_000;

/** readOpenFileLimit reads the process's open-file limit from /proc/self/limits (Linux). */
export function readOpenFileLimit(file = '/proc/self/limits'): OpenFileLimit {
  try {
    const line = readFileSync(file, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    const m = line && /^Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)/.exec(line);
    if (m) {
      const value = (v: string) => (v === 'unlimited' ? Number.POSITIVE_INFINITY : Number(v));
      return { soft: value(m[1]!), hard: value(m[2]!), source: '/proc/self/limits' };
    }
  } catch {
    // not Linux: fall through to the common default
  }
  return { soft: 1024, hard: 1024, source: 'assumed' };
}

/** LimitSettings are the settings the limits come from (0 picks the automatic value). */
export interface LimitSettings {
  max_connections: number;
  max_connections_per_address: number;
  max_sessions_per_user: number;
  passive_listeners_per_user: number;
  /** how many ports the passive range has, for the automatic passive bound */
  passive_range_size: number;
}

/**
 * resolveLimits turns the settings into the limits in force: max_connections 0 keeps every
 * connection's descriptors under the open-file limit (a reserve kept, at most 4096);
 * max_connections_per_address 0 is a quarter of that (at least 2, at most 256); passive listeners
 * per user 0 is a quarter of the passive range (at least 4, so parallel transfers fit a small
 * range; at most the range).
 */
export function resolveLimits(settings: LimitSettings, fds: OpenFileLimit): LimitValues {
  const usable = Math.max(0, Math.min(fds.soft, 1e9) - FD_RESERVE);
  const maxConnections =
    settings.max_connections ||
    Math.max(8, Math.min(AUTO_MAX_CONNECTIONS, Math.floor(usable / FDS_PER_CONNECTION)));
  const maxConnectionsPerAddress =
    settings.max_connections_per_address ||
    Math.max(2, Math.min(AUTO_MAX_PER_ADDRESS, Math.floor(maxConnections / 4)));
  return {
    maxConnections,
    maxConnectionsPerAddress: Math.min(maxConnectionsPerAddress, maxConnections),
    maxSessionsPerUser: settings.max_sessions_per_user,
    passiveListenersPerUser:
      settings.passive_listeners_per_user ||
      Math.min(settings.passive_range_size, Math.max(4, Math.floor(settings.passive_range_size / 4))),
  };
}

/** Counter counts places per key, dropping a key at zero so the map holds only live keys. */
class Counter {
  private readonly counts = new Map<string, number>();
  get(key: string): number {
    return this.counts.get(key) ?? 0;
  }
  /** take counts one place for `key` and returns the lease that gives it back. */
  take(key: string): Lease {
    this.counts.set(key, this.get(key) + 1);
    let held = true;
    return {
      release: () => {
        if (!held) return;
        held = false;
        const n = this.get(key) - 1;
        if (n > 0) this.counts.set(key, n);
        else this.counts.delete(key);
      },
    };
  }
}

/**
 * ConnectionLimits are one gateway's counters, shared by all its listeners (the open-file limit is
 * the process's). Accounting per address goes through `admit(address)` alone, so a front end that
 * learns the client's real address later (a PROXY protocol header) counts that one.
 */
export class ConnectionLimits {
  private total = 0;
  private readonly addresses = new Counter();
  private readonly sessions = new Counter();
  private readonly passive = new Counter();
  /** per address: when its refusals were last logged, and how many since */
  private readonly refusalLog = new Map<string, { at: number; since: number }>();
  /** refused connections still being answered; past the budget a refusal is a plain close */
  private answering = 0;
  private readonly answerBudget: number;

  constructor(
    readonly values: LimitValues,
    private readonly log: Logger,
    /** where connections are counted (accepted, refused, open), per interface */
    private readonly metrics: Metrics | null = null,
  ) {
    this.answerBudget = Math.max(2, Math.floor(values.maxConnections / 8));
  }

  /** connections is how many connections are admitted now. */
  get connections(): number {
    return this.total;
  }

  /** admit counts a new connection from `address`, or refuses it when a connection limit is reached. */
  admit(address: string): Lease | Refusal {
    if (this.addresses.get(address) >= this.values.maxConnectionsPerAddress)
      return {
        refused: 'max_connections_per_address',
        message: 'Too many connections from your address; try again later',
      };
    if (this.total >= this.values.maxConnections)
      return { refused: 'max_connections', message: 'The server has too many connections; try again later' };
    const lease = this.addresses.take(address);
    this.total += 1;
    let held = true;
    return {
      release: () => {
        if (!held) return;
        held = false;
        lease.release();
        this.total -= 1;
      },
    };
  }

  /**
   * openSession counts a session of `user` (an FTP, FTPS or SFTP login, a REST or WebDAV request in
   * progress), or refuses it past the limit. The message avoids what lftp's ftp:retry-530 rule
   * retries ("too many", "try again later", "already connected"): lftp would log in again for ever.
   */
  openSession(user: string): Lease | Refusal {
    const max = this.values.maxSessionsPerUser;
    if (max > 0 && this.sessions.get(user) >= max)
      return {
        refused: 'max_sessions_per_user',
        message: `This user has ${max} sessions open, the most allowed; close one and log in again`,
      };
    return this.sessions.take(user);
  }

  /** holdPassive counts an open FTP passive listener of `user`, or refuses it past the bound. */
  holdPassive(user: string): Lease | Refusal {
    const max = this.values.passiveListenersPerUser;
    if (this.passive.get(user) >= max)
      return {
        refused: 'passive_listeners_per_user',
        message: `Too many passive listeners for this user (at most ${max}); try again later`,
      };
    return this.passive.take(user);
  }

  /**
   * refused logs a refusal: the first one from an address, then at most one line a minute with the
   * number refused since, so a flood writes a line a minute and not one per connection.
   */
  refused(iface: string, address: string, refusal: Refusal, detail: Record<string, unknown> = {}): void {
    const now = Date.now();
    const entry = this.refusalLog.get(address);
    if (entry && now - entry.at < REFUSAL_LOG_MS) {
      entry.since += 1;
      return;
    }
    if (this.refusalLog.size >= 10_000) {
      for (const [key, e] of this.refusalLog) if (now - e.at >= REFUSAL_LOG_MS) this.refusalLog.delete(key);
    }
    this.refusalLog.set(address, { at: now, since: 0 });
    this.log.warn('connection refused', {
      interface: iface,
      ip: address,
      limit: refusal.refused,
      ...detail,
      ...(entry ? { refused_in_last_minute: entry.since + 1 } : {}),
    });
  }

  /**
   * answer gives a refused socket its protocol's answer (`reply` writes it and ends the socket),
   * then cuts it after a short grace. Past a budget of refusals in progress the socket is cut at
   * once: answering a flood must not itself hold the descriptors the limits protect.
   */
  answer(socket: net.Socket, reply: (socket: net.Socket) => void): void {
    socket.on('error', () => undefined);
    if (this.answering >= this.answerBudget) {
      socket.destroy();
      return;
    }
    this.answering += 1;
    const cut = setTimeout(() => socket.destroy(), REFUSAL_GRACE_MS);
    socket.once('close', () => {
      clearTimeout(cut);
      this.answering -= 1;
    });
    reply(socket);
  }

  /**
   * admitOrRefuse is the connection listener's first step: it admits `socket` (released when it
   * closes) and returns true, or logs the refusal, has it answered by `reply` and returns false.
   */
  admitOrRefuse(
    iface: string,
    socket: net.Socket,
    reply: (socket: net.Socket, refusal: Refusal) => void,
    // The client's: behind a trusted balancer, the address its PROXY header carried (proxy.ts runs
    // the connection listeners once the header is read).
    address = clientAddress(socket),
  ): boolean {
    const verdict = this.admit(address);
    // The FTPS listener's connections are FTP's (SPEC's interfaces).
    const label = { interface: iface === 'ftps' ? 'ftp' : iface };
    if (isRefusal(verdict)) {
      this.metrics?.connections.inc({ ...label, result: 'refused' });
      this.refused(iface, address, verdict);
      this.answer(socket, (s) => reply(s, verdict));
      return false;
    }
    this.metrics?.connections.inc({ ...label, result: 'accepted' });
    this.metrics?.openConnections.inc(label);
    socket.once('close', () => {
      verdict.release();
      this.metrics?.openConnections.dec(label);
    });
    return true;
  }
}

/** isRefusal tells a refusal from a lease. */
export function isRefusal(v: Lease | Refusal): v is Refusal {
  return 'refused' in v;
}

/** userKey names whose sessions and passive listeners a principal's count among. */
export function userKey(principal: Principal): string {
  return principal.user ? `user:${principal.user.id}` : 'site';
}

/** plainAddress drops the IPv4-mapped prefix, so ::ffff:127.0.0.1 and 127.0.0.1 count as one address. */
export function plainAddress(address: string | undefined): string {
  return (address ?? '').replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, '');
}

const finite = (n: number): number | 'unlimited' => (Number.isFinite(n) ? n : 'unlimited');

const byCore = new WeakMap<Core, ConnectionLimits>();

/**
 * connectionLimits returns the limits every listener of `core`'s gateway shares, made (and the
 * open-file limit read and logged) when the first listener starts.
 */
export function connectionLimits(core: Core): ConnectionLimits {
  let limits = byCore.get(core);
  if (!limits) {
    const fds = readOpenFileLimit();
    const { first, last } = core.config.ports.ftp_pasv;
    const values = resolveLimits(
      { ...core.config.limits, ...core.config.ftp, passive_range_size: last - first + 1 },
      fds,
    );
    limits = new ConnectionLimits(values, core.log.child({ component: 'limits' }), core.metrics);
    core.log.info('connection limits', {
      open_files: { soft: finite(fds.soft), hard: finite(fds.hard), source: fds.source },
      max_connections: values.maxConnections,
      max_connections_per_address: values.maxConnectionsPerAddress,
      max_sessions_per_user: values.maxSessionsPerUser,
      passive_listeners_per_user: values.passiveListenersPerUser,
    });
    byCore.set(core, limits);
  }
  return limits;
}
