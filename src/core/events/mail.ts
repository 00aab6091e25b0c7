/**
 * E-mail notifications (SPEC "Notification", issue 7 item 4). A file created or updated in a
 * Notification's path or below queues a `mail_changes` row for its user in the Action's own unit
 * of work. The user's first pending change opens a window of `notification_batch_seconds`; every
 * change in it shares its `due_at`, and one message at its end lists them all. A background loop
 * on any instance leases a user's due changes (so two instances never mail the same ones), sends
 * the message over SMTP (nodemailer, SVC_SMTP_URL) or, without SMTP, writes it as an .eml file
 * under <data_dir>/mail, then deletes the changes. A user is told only of files they may list.
 *
 * Faults: every SMTP send is bounded (SMTP_TIMEOUTS) well inside the lease, so a hanging server
 * cannot hold a batch past it. A failed send deletes nothing: the batch's rows count the attempt,
 * keep the error (last_error) and are due again after a doubling backoff (1 min … 1 h), on any
 * instance. Permanent rejections (5xx) are retried the same way; last_error says which it was.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { In, type EntityManager } from 'typeorm';
import { MailChangeEntity, UserEntity, type MailChangeRow, type UserRow } from '../../db/entities.ts';
import { marks, sql } from '../../db/sql.ts';
import { rightsOn, rightsOnEach } from '../access/rights.ts';
import type { CoreContext } from '../context.ts';
import { ancestorsOf, parentOf } from '../paths.ts';
import type { Principal } from '../principal.ts';
import type { RecordedAction } from './hooks.ts';

/** SmtpTimeouts bound one SMTP send, phase by phase and as a whole. */
export interface SmtpTimeouts {
  /** connecting: TCP, and TLS for smtps:// */
  connectionMs: number;
  /** waiting for the server's 220 greeting once connected */
  greetingMs: number;
  /** silence on an open connection, at any later step */
  socketMs: number;
  /** the whole send: a server that answers a byte at a time never trips socketMs */
  sendMs: number;
}

/** SMTP_TIMEOUTS are the production bounds of a send (nodemailer's own defaults run to 10 minutes). */
export const SMTP_TIMEOUTS: Readonly<SmtpTimeouts> = {
  connectionMs: 10_000,
  greetingMs: 10_000,
  socketMs: 30_000,
  sendMs: 60_000,
};

// The lease outlives the longest send by this much: it also covers looking the user up before the
// send and deleting the changes after it. A lease that ran out mid-send would let another
// instance mail the same batch again.
const LEASE_MARGIN_MS = 30_000;
// A failed batch waits 1 min, then 2, 4, … up to an hour, so a long SMTP outage costs one attempt
// an hour per user, and a repaired server is used again within the hour.
const BACKOFF_FIRST_MS = 60_000;
const BACKOFF_MAX_MS = 3_600_000;
// last_error keeps the start of a long SMTP reply.
const MAX_ERROR_CHARS = 1000;

/** backoffMs is how long a batch waits after its `attempt`-th failed send (1, 2, …). */
function backoffMs(attempt: number): number {
  return Math.min(BACKOFF_FIRST_MS * 2 ** Math.max(attempt - 1, 0), BACKOFF_MAX_MS);
}

/** asUser is the user as a principal, to ask what they may list (not to act for them). */
const asUser = (user: UserRow): Principal => ({
  user,
  apiKey: null,
  sessionDigest: null,
  interface: 'restapi',
  ip: '',
});

/** Mailer queues file changes for subscribed users and mails each user's batch. */
export class Mailer {
  /** timeouts bound every SMTP send; tests shorten them, and the lease follows (leaseMs). */
  timeouts: SmtpTimeouts = { ...SMTP_TIMEOUTS };
  // Aborted when the core closes, so a hanging SMTP server never holds up a shutdown.
  private readonly stopping = new AbortController();

  constructor(private readonly ctx: CoreContext) {}

  /** interrupt ends the send in progress, if any; its batch is released, not counted as failed. */
  interrupt(): void {
    this.stopping.abort();
  }

  /** leaseMs is how long a claimed batch stays with its instance: longer than any send may take. */
  get leaseMs(): number {
    return this.timeouts.sendMs + LEASE_MARGIN_MS;
  }

  /** enqueue queues the change for every user watching the file's folder; returns how many. */
  async enqueue(em: EntityManager, a: RecordedAction): Promise<number> {
    // File writes only: they carry the file's size (folder creation and account actions do not).
    if ((a.action !== 'create' && a.action !== 'update') || a.size === undefined || a.path === '') return 0;
    // Hand-written (db/sql.ts): every upload asks, and almost always hears nobody.
    const folders = ancestorsOf(parentOf(a.path));
    const subs = await sql<{ user_id: number | string }>(
      em,
      `SELECT user_id FROM notifications WHERE path IN (${marks(folders.length)})`,
      folders,
    );
    const userIds = [...new Set(subs.map((s) => Number(s.user_id)))];
    if (userIds.length === 0) return 0;
    const users = await em.findBy(UserEntity, { id: In(userIds) });
    const now = new Date();
    let queued = 0;
    for (const user of users) {
      if (!(await rightsOn(em, asUser(user), a.path)).has('list')) continue;
      // The user's open window, if any, else a new one from now. A batch waiting out a failed
      // send is such a window too: the change goes out with it.
      const open = await em.findOne(MailChangeEntity, {
        where: { user_id: user.id },
        order: { due_at: 'ASC' },
      });
      const due =
        open?.due_at ?? new Date(now.getTime() + this.ctx.config.events.notification_batch_seconds * 1000);
      await em.insert(MailChangeEntity, {
        user_id: user.id,
        action_id: a.id,
        action: a.action,
        path: a.path,
        when: a.when,
        due_at: due,
        locked_until: null,
        lease: null,
        attempts: 0,
        last_error: '',
      });
      queued++;
    }
    return queued;
  }

  /**
   * tick mails one user's due batch; true when one was handled, sent or not (more may wait).
   * A batch that could not be sent keeps its rows, with the attempt counted and the error
   * recorded, and is due again after a backoff, on any instance.
   */
  async tick(): Promise<boolean> {
    const token = randomUUID();
    const rows = await this.claim(token);
    if (rows.length === 0) return false;
    const userId = rows[0]!.user_id;
    const user = await this.ctx.db.read((em) => em.findOneBy(UserEntity, { id: userId }));
    // Rights checked again at send time: one revoked during the window hides those files too.
    const told = user ? await this.stillVisible(user, rows) : rows;
    if (told.length === 0) {
      await this.ctx.db.work((em) => em.delete(MailChangeEntity, { lease: token }));
      return true;
    }
    try {
      await this.send(userId, user, told);
    } catch (err) {
      if (this.stopping.signal.aborted) await this.release(token);
      else await this.recordFailure(token, userId, user, rows, err);
      return true;
    }
    await this.ctx.db.work((em) => em.delete(MailChangeEntity, { lease: token }));
    return true;
  }

  /** stillVisible keeps the changes to files the user may still list. */
  private async stillVisible(user: UserRow, rows: MailChangeRow[]): Promise<MailChangeRow[]> {
    const rights = await this.ctx.db.read((em) =>
      rightsOnEach(
        em,
        asUser(user),
        rows.map((r) => r.path),
      ),
    );
    return rows.filter((r) => rights.get(r.path)!.has('list'));
  }

  /** claim leases the due changes of one user to `token` and returns them, oldest first. */
  private claim(token: string): Promise<MailChangeRow[]> {
    const now = Date.now();
    return this.ctx.db.work(async (em) => {
      const next = await em
        .createQueryBuilder(MailChangeEntity, 'm')
        .where('m.due_at <= :now', { now })
        .andWhere('(m.locked_until IS NULL OR m.locked_until < :now)', { now })
        .orderBy('m.due_at', 'ASC')
        .getOne();
      if (!next) return [];
      // Conditional, so changes another instance claimed meanwhile are not taken over.
      await em
        .createQueryBuilder()
        .update(MailChangeEntity)
        .set({ lease: token, locked_until: new Date(now + this.leaseMs) })
        .where('user_id = :user', { user: next.user_id })
        .andWhere('due_at <= :now', { now })
        .andWhere('(locked_until IS NULL OR locked_until < :now)', { now })
        .execute();
      return em.find(MailChangeEntity, { where: { lease: token }, order: { id: 'ASC' } });
    });
  }

  /** release hands a batch back unsent and uncounted (the gateway is stopping). */
  private async release(token: string): Promise<void> {
    await this.ctx.db.work((em) =>
      em.update(MailChangeEntity, { lease: token }, { lease: null, locked_until: null }),
    );
  }

  /** recordFailure counts the attempt on the batch's rows, keeps the error and releases the lease. */
  private async recordFailure(
    token: string,
    userId: number,
    user: UserRow | null,
    rows: MailChangeRow[],
    err: unknown,
  ): Promise<void> {
    // Changes that joined the batch later have fewer attempts; the batch's count is the highest.
    const attempt = rows.reduce((n, r) => Math.max(n, r.attempts), 0) + 1;
    const error = explain(err, this.timeouts).slice(0, MAX_ERROR_CHARS);
    const retryAt = new Date(Date.now() + backoffMs(attempt));
    // Pushing due_at (not only locked_until) keeps the batch one window: changes made meanwhile
    // join it and go out in the same message once the server is back.
    await this.ctx.db.work((em) =>
      em
        .createQueryBuilder()
        .update(MailChangeEntity)
        .set({
          attempts: () => 'attempts + 1',
          last_error: error,
          due_at: retryAt,
          locked_until: null,
          lease: null,
        })
        .where('lease = :token', { token })
        .execute(),
    );
    this.ctx.log.warn('notification e-mail not sent; will try again', {
      user_id: userId,
      username: user?.username ?? '',
      changes: rows.length,
      attempt,
      error,
      retry_at: retryAt.toISOString(),
    });
  }

  /** send builds the one message listing a user's changes and hands it to SMTP or an .eml file. */
  private async send(userId: number, user: UserRow | null, rows: MailChangeRow[]): Promise<void> {
    if (!user || user.email === '') {
      this.ctx.log.info('notification e-mail dropped: the user has no e-mail address', {
        user_id: userId,
        changes: rows.length,
      });
      return;
    }
    const lines = rows.map(
      (r) => `${r.action === 'create' ? 'created' : 'updated'}  /${r.path}  (${r.when.toISOString()})`,
    );
    const message = {
      from: this.ctx.config.smtp.from,
      to: user.email,
      subject: `${rows.length} file${rows.length === 1 ? '' : 's'} changed in your watched folders`,
      text: `Hello ${user.name || user.username},\n\nThese files were created or updated:\n\n${lines.join('\n')}\n`,
    };
    // Loaded on the first message, not at start: most sites send none, and it is 3 MiB of heap.
    const { default: nodemailer } = await import('nodemailer');
    const url = this.ctx.config.smtp.url;
    if (url !== '') {
      const t = this.timeouts;
      const transport = nodemailer.createTransport({
        url,
        connectionTimeout: t.connectionMs,
        greetingTimeout: t.greetingMs,
        socketTimeout: t.socketMs,
      });
      // The signal ends the send (and closes its connection) at sendMs, inside the lease, or when
      // the core closes. A plain timer, not AbortSignal.timeout inside AbortSignal.any: Node 20
      // holds those weakly, and a garbage collection during the send can lose the timeout.
      const abort = new AbortController();
      const timer = setTimeout(() => abort.abort(), t.sendMs);
      const stop = () => abort.abort();
      this.stopping.signal.addEventListener('abort', stop, { once: true });
      try {
        await transport.sendMail({ ...message, signal: abort.signal });
      } finally {
        clearTimeout(timer);
        this.stopping.signal.removeEventListener('abort', stop);
        transport.close();
      }
      this.ctx.log.info('notification e-mail sent', { user_id: userId, changes: rows.length });
      return;
    }
    const built = await nodemailer.createTransport({ streamTransport: true, buffer: true }).sendMail(message);
    const dir = path.join(this.ctx.config.data_dir, 'mail');
    await mkdir(dir, { recursive: true });
    const file = path.join(
      dir,
      `${new Date().toISOString().replace(/[:.]/g, '-')}-user${userId}-${rows[0]!.id}.eml`,
    );
    // Written aside and renamed: whoever watches the folder never reads half a message.
    await writeFile(`${file}.tmp`, built.message as Buffer);
    await rename(`${file}.tmp`, file);
    this.ctx.log.info('SMTP is not configured (SVC_SMTP_URL): notification e-mail written as a file', {
      file,
      user_id: userId,
      changes: rows.length,
    });
  }
}

/**
 * explain turns a failed send into the text kept in last_error: nodemailer's code (ESOCKET,
 * ETIMEDOUT, EENVELOPE, …) and message, which carries the server's reply ("550 …") when there
 * was one, so an operator can tell a down server from a rejected recipient.
 */
function explain(err: unknown, timeouts: SmtpTimeouts): string {
  if (!(err instanceof Error)) return String(err);
  const { code, response } = err as Error & { code?: unknown; response?: unknown };
  if (code === 'EABORT') return `ETIMEDOUT: the send took longer than ${timeouts.sendMs} ms and was cut off`;
  let text = typeof code === 'string' && code !== '' ? `${code}: ${err.message}` : err.message;
  if (typeof response === 'string' && response !== '' && !text.includes(response)) text += ` (${response})`;
  return text;
}
