/**
 * Live connections across every instance (issue 15, item 4), kept in the database because several
 * instances share one behind a load balancer (DESIGN.md "Scale-out").
 *
 * An adapter opens a LiveConnection when a session starts (an FTP login, an SFTP login, a WebDAV
 * client's first request) with a callback that closes it, tells it of each transfer (path,
 * direction and a counter of its bytes, which the adapter keeps in memory anyway) and closes it
 * when the session ends. Nothing is written then: every RENEW_MS the instance writes all its live
 * connections in one unit of work (one upsert of every row, one delete of the rows of connections
 * that ended), so the cost is one small write per instance every few seconds, whatever the number
 * of connections and chunks. A row not renewed for EXPIRE_MS belongs to an instance that died (or
 * cannot reach the database): lists leave it out, and any instance deletes it after FORGET_MS.
 *
 * Ending a connection (a site admin, on any instance) marks its row; the owning instance reads its
 * marked rows at each renewal and calls their close callbacks, so the connection ends within
 * RENEW_MS on whatever instance serves it (at once when it is the instance that was asked).
 */
import { randomBytes, randomInt } from 'node:crypto';
import os from 'node:os';
import { In, IsNull, LessThan, MoreThanOrEqual, Not, type EntityManager } from 'typeorm';
import {
  ConnectionEntity,
  InstanceEntity,
  type ConnectionRow,
  type InstanceRow,
  type TransferDirection,
} from '../../db/entities.ts';
import { VERSION } from '../site/site.ts';
import { requireSiteAdmin } from '../access/guards.ts';
import { LogThrottle } from '../../log.ts';
import type { CoreContext } from '../context.ts';
import { GatewayError } from '../errors.ts';
import type { Page, PageRequest } from '../pagination.ts';
import type { Interface, Principal } from '../principal.ts';

/** RENEW_MS is how often an instance writes its connections (and reads which ones to end). */
export const RENEW_MS = 3000;
/** EXPIRE_MS is how long a row lives without renewal: then its instance is taken for dead. */
export const EXPIRE_MS = 15_000;
/** FORGET_MS is when an expired row is deleted (by any instance). */
export const FORGET_MS = 5 * 60_000;
// Rows per statement when an instance writes many connections (13 values each).
const BATCH = 500;

export type { TransferDirection };

/**
 * Connection is a live connection as the API shows it: its row (instance, interface, user, client
 * address, the transfer in progress with its bytes as of the last renewal) with times in ISO 8601.
 */
export type Connection = Omit<
  ConnectionRow,
  'connected_at' | 'last_seen_at' | 'transfer_started_at' | 'end_requested_at'
> & {
  connected_at: string;
  /** when its instance last renewed it (every few seconds while the instance lives) */
  last_seen_at: string;
  transfer_started_at: string | null;
  /** someone asked to end it; its instance closes it within seconds */
  ending: boolean;
};

/** ConnectionOpening is what an adapter says of a session as it starts. */
export interface ConnectionOpening {
  principal: Principal;
  /** the interface, when it is not the principal's own */
  interface?: Interface;
  ip: string;
  /** close ends the session (called once, when someone ends the connection) */
  close: () => void;
}

/** TransferStart is a transfer as it starts: its path, its way, and a counter of its bytes. */
export interface TransferStart {
  path: string;
  direction: TransferDirection;
  /** bytes moved so far, read at each renewal (the adapter counts them) */
  bytes: () => number;
}

/** LiveTransfer is a transfer in progress; end it once. */
export interface LiveTransfer {
  end(): void;
}

/** LiveConnection is an adapter's handle on its session's row. */
export interface LiveConnection {
  readonly id: number;
  /** transfer records a transfer in progress; the latest one still running is shown */
  transfer(t: TransferStart): LiveTransfer;
  /** close says the session ended (idempotent): its row goes at the next renewal */
  close(): void;
}

interface Local {
  row: Omit<ConnectionRow, 'last_seen_at' | 'transfer_path' | 'transfer_direction' | 'transfer_bytes'>;
  transfers: Set<TransferStart & { started: Date }>;
  close: () => void;
  /** close was called (by the end request) */
  ending: boolean;
  /** its row was written at least once */
  written: boolean;
}

/** Timing is how often an instance renews and when rows expire (tests shorten them). */
export interface ConnectionTiming {
  renewMs: number;
  expireMs: number;
  forgetMs: number;
}

/** Connections keeps this instance's live connections in the database and lists everyone's. */
export class Connections {
  /** instance names this core in the rows it writes: host, process, a tag (tests run several cores). */
  readonly instance = `${os.hostname().slice(0, 40)}:${process.pid}:${randomBytes(3).toString('hex')}`;
  private readonly live = new Map<number, Local>();
  /** rows written for connections that have ended since, to delete at the next renewal */
  private readonly gone = new Set<number>();
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private lastForget = 0;
  /** when this instance's own row was last written (it is renewed every expireMs / 3) */
  private lastBeat = 0;
  private readonly startedAt = new Date();
  private readonly throttle = new LogThrottle(60_000);
  readonly timing: ConnectionTiming;

  constructor(
    private readonly ctx: CoreContext,
    timing: Partial<ConnectionTiming> = {},
  ) {
    this.timing = { renewMs: RENEW_MS, expireMs: EXPIRE_MS, forgetMs: FORGET_MS, ...timing };
  }

  /** count is how many connections this instance serves now. */
  get count(): number {
    return this.live.size;
  }

  /** open registers a session of this instance; its row appears at the next renewal. */
  open(o: ConnectionOpening): LiveConnection {
    let id = randomInt(1, 2 ** 47) * 2;
    while (this.live.has(id)) id += 1;
    const local: Local = {
      row: {
        id,
        instance: this.instance,
        interface: o.interface ?? o.principal.interface,
        user_id: o.principal.user?.id ?? null,
        username: o.principal.user?.username ?? '',
        ip: o.ip.slice(0, 64),
        connected_at: new Date(),
        transfer_started_at: null,
        end_requested_at: null,
      },
      transfers: new Set(),
      close: o.close,
      ending: false,
      written: false,
    };
    this.live.set(id, local);
    return {
      id,
      transfer: (t) => {
        const entry = { ...t, started: new Date() };
        local.transfers.add(entry);
        return { end: () => local.transfers.delete(entry) };
      },
      close: () => {
        if (this.live.get(id) !== local) return;
        this.live.delete(id);
        if (local.written) this.gone.add(id);
      },
    };
  }

  /** start renews this instance's rows every RENEW_MS until stop. */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.renew(), this.timing.renewMs);
    this.timer.unref();
  }

  /** stop ends the renewals and deletes this instance's rows (its connections are closing). */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
    await this.ctx.db
      .work(async (em) => {
        await em.delete(ConnectionEntity, { instance: this.instance });
        await em.delete(InstanceEntity, { id: this.instance });
      })
      .catch((err: unknown) => this.ctx.log.debug('connections: not deleted', { error: String(err) }));
  }

  /**
   * renew writes every live connection of this instance (one unit of work), deletes the rows of
   * those that ended, closes those someone asked to end, and now and then deletes long-expired
   * rows of dead instances. Runs one at a time; a failure is logged and retried at the next tick.
   */
  renew(): Promise<void> {
    this.running ??= this.renewOnce()
      .catch((err: unknown) => {
        // A database outage fails every renewal: a line a minute, with how many were held back.
        const take = this.throttle.take('renewal');
        if (take) this.ctx.log.warn('connections: renewal failed', { error: String(err), held: take.held });
      })
      .finally(() => {
        this.running = null;
      });
    return this.running;
  }

  private async renewOnce(): Promise<void> {
    const now = new Date();
    const locals = [...this.live.values()];
    const gone = [...this.gone];
    const forget = now.getTime() - this.lastForget >= this.timing.forgetMs / 5;
    // The instance's own row, so an instance without connections is seen too (the Site page).
    const beat = now.getTime() - this.lastBeat >= this.timing.expireMs / 3;
    if (!locals.length && !gone.length && !forget && !beat) return;
    const rows: ConnectionRow[] = locals.map((l) => {
      let current: (TransferStart & { started: Date }) | undefined;
      for (const t of l.transfers) current = t;
      return {
        ...l.row,
        last_seen_at: now,
        transfer_path: current?.path ?? null,
        transfer_direction: current?.direction ?? null,
        transfer_bytes: current?.bytes() ?? 0,
        transfer_started_at: current?.started ?? null,
      };
    });
    const ending = await this.ctx.db.work(async (em) => {
      if (beat) {
        const row: InstanceRow = {
          id: this.instance,
          host: os.hostname().slice(0, 100),
          pid: process.pid,
          version: VERSION,
          started_at: this.startedAt,
          last_seen_at: now,
        };
        await em
          .createQueryBuilder()
          .insert()
          .into(InstanceEntity)
          .values(row)
          .orUpdate(['last_seen_at'], ['id'])
          .execute();
      }
      if (gone.length) await em.delete(ConnectionEntity, { id: In(gone) });
      for (let i = 0; i < rows.length; i += BATCH) {
        await em
          .createQueryBuilder()
          .insert()
          .into(ConnectionEntity)
          .values(rows.slice(i, i + BATCH))
          .orUpdate(
            ['last_seen_at', 'transfer_path', 'transfer_direction', 'transfer_bytes', 'transfer_started_at'],
            ['id'],
          )
          .execute();
      }
      if (forget) await this.forgetExpired(em, now);
      if (!rows.length) return [];
      return em.find(ConnectionEntity, {
        select: { id: true },
        where: { instance: this.instance, end_requested_at: Not(IsNull()) },
      });
    });
    if (forget) this.lastForget = now.getTime();
    if (beat) this.lastBeat = now.getTime();
    for (const l of locals) l.written = true;
    for (const id of gone) this.gone.delete(id);
    for (const { id } of ending) this.closeLocal(id);
  }

  /** forget deletes the rows of dead instances, expired for FORGET_MS; returns how many. */
  async forget(): Promise<number> {
    return this.ctx.db.work((em) => this.forgetExpired(em, new Date()));
  }

  private async forgetExpired(em: EntityManager, now: Date): Promise<number> {
    const before = LessThan(new Date(now.getTime() - this.timing.forgetMs));
    await em.delete(InstanceEntity, { last_seen_at: before });
    const r = await em.delete(ConnectionEntity, { last_seen_at: before });
    return r.affected ?? 0;
  }

  /** instances lists the instances that renewed their row lately, oldest first (the Site page). */
  async instances(): Promise<(InstanceRow & { current: boolean })[]> {
    const since = new Date(Date.now() - this.timing.expireMs);
    const rows = await this.ctx.db.read((em) =>
      em.find(InstanceEntity, {
        where: { last_seen_at: MoreThanOrEqual(since) },
        order: { started_at: 'ASC' },
      }),
    );
    return rows.map((r) => ({ ...r, current: r.id === this.instance }));
  }

  /** closeLocal calls the close callback of a connection of this instance, once. */
  private closeLocal(id: number): boolean {
    const local = this.live.get(id);
    if (!local) return false;
    if (!local.ending) {
      local.ending = true;
      try {
        local.close();
      } catch (err) {
        this.ctx.log.error('connections: closing failed', { error: String(err) });
      }
    }
    return true;
  }

  /** list pages through the live connections of every instance, oldest first (site admins). */
  async list(p: Principal, req: PageRequest): Promise<Page<Connection>> {
    requireSiteAdmin(p);
    const w = this.ctx.paginator.window('connections', req);
    const rows = await this.ctx.db.read((em) =>
      em.find(ConnectionEntity, {
        where: { last_seen_at: MoreThanOrEqual(this.freshSince()) },
        order: { connected_at: 'ASC', id: 'ASC' },
        skip: w.offset,
        take: w.perPage + 1,
      }),
    );
    return this.ctx.paginator.page(
      w,
      rows.map((r) => view(r)),
    );
  }

  /**
   * end asks the instance serving connection `id` to close it (at once when it is this one, else
   * at that instance's next renewal). A connection not listed (ended, or its instance dead) is
   * not-found.
   */
  async end(p: Principal, id: number): Promise<void> {
    requireSiteAdmin(p);
    const marked = await this.ctx.db.work(async (em) => {
      const found = await em.findOneBy(ConnectionEntity, {
        id,
        last_seen_at: MoreThanOrEqual(this.freshSince()),
      });
      if (!found) return false;
      if (!found.end_requested_at)
        await em.update(ConnectionEntity, { id }, { end_requested_at: new Date() });
      return true;
    });
    if (!marked && !this.live.has(id))
      throw new GatewayError('not-found/connection-not-found', 'No such connection (it may have ended)');
    this.closeLocal(id);
  }

  private freshSince(): Date {
    return new Date(Date.now() - this.timing.expireMs);
  }
}

function view(r: ConnectionRow): Connection {
  return {
    id: r.id,
    instance: r.instance,
    interface: r.interface,
    user_id: r.user_id,
    username: r.username,
    ip: r.ip,
    connected_at: r.connected_at.toISOString(),
    last_seen_at: r.last_seen_at.toISOString(),
    transfer_path: r.transfer_path,
    transfer_direction: r.transfer_direction,
    transfer_bytes: r.transfer_bytes,
    transfer_started_at: r.transfer_started_at?.toISOString() ?? null,
    ending: r.end_requested_at !== null,
  };
}
