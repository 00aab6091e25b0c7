/**
 * Outgoing webhooks (SPEC "Events", issue 7). Each Action that matches a configured webhook is
 * queued as a delivery row in the Action's own unit of work; a background loop on every instance
 * claims due deliveries with a lease (a conditional UPDATE, plus SKIP LOCKED on PostgreSQL), so
 * two instances never send the same attempt at once. A crashed instance's claims expire and are
 * sent again (at least once), after an attempt row saying no result was recorded: the receiver may
 * see an Action twice, but never without a record between, and a crash loop uses up the attempts
 * like any failure. Every attempt is a row of the delivery log, SPEC's
 * ActionNotificationExportResult.
 */
import { createHmac, randomUUID } from 'node:crypto';
import { In, type EntityManager } from 'typeorm';
import type { Config } from '../../config.ts';
import {
  WebhookAttemptEntity,
  WebhookDeliveryEntity,
  type WebhookAttemptRow,
  type WebhookDeliveryRow,
} from '../../db/entities.ts';
import { requireSiteAdmin } from '../access/guards.ts';
import type { Metrics } from '../metrics.ts';
import type { CoreContext } from '../context.ts';
import { GatewayError } from '../errors.ts';
import { parentOf } from '../paths.ts';
import type { Principal } from '../principal.ts';
import type { RecordedAction } from './hooks.ts';
import { describeNetworkError, send } from './outgoing.ts';

/** WebhookSetting is one entry of the `webhooks` setting (SVC_WEBHOOKS). */
export type WebhookSetting = Config['webhooks'][number];

/** ActionNotificationExportResult is SPEC's delivery record: one attempt of one webhook delivery. */
export interface ActionNotificationExportResult {
  id: number;
  /** epoch seconds (SPEC types it int64) */
  created_at: number;
  status: number;
  message: string;
  success: boolean;
  request_headers: string;
  request_method: string;
  request_url: string;
  path: string;
  folder: string;
}

/** SIGNATURE_HEADER carries `sha256=<hex HMAC-SHA256 of the raw body with the webhook's secret>`. */
export const SIGNATURE_HEADER = 'X-Svc-Signature';

// Without an `actions` filter a webhook gets the file actions.
const FILE_ACTIONS = ['create', 'read', 'update', 'destroy', 'move', 'copy'];
// Deliveries one instance sends at once.
const BATCH = 32;
// How long finished attempts wait for others before they are written in one unit of work.
const GATHER_MS = 10;
// The attempt row of a claim whose instance stopped before it could record the answer.
const LOST =
  'no result recorded: the instance sending this delivery stopped (the receiver may have received it)';

const trimSlashes = (p: string) => p.replace(/^\/+|\/+$/g, '');

/** webhookMatches applies a webhook's filters: actions, exact path, folder and below. */
export function webhookMatches(hook: WebhookSetting, a: RecordedAction): boolean {
  if (!(hook.actions ?? FILE_ACTIONS).includes(a.action)) return false;
  const paths = [a.path, a.source].filter((p) => p !== '');
  if (hook.path !== undefined && trimSlashes(hook.path) !== '') {
    const want = trimSlashes(hook.path);
    if (!paths.includes(want)) return false;
  }
  if (hook.folder !== undefined) {
    const folder = trimSlashes(hook.folder);
    if (paths.length === 0) return false;
    if (folder !== '' && !paths.some((p) => p === folder || p.startsWith(`${folder}/`))) return false;
  }
  return true;
}

/** actionBody is the JSON a webhook receives: SPEC's Action fields, plus size when known. */
export function actionBody(a: RecordedAction): string {
  return JSON.stringify({
    id: a.id,
    action: a.action,
    interface: a.interface,
    path: a.path,
    destination: a.destination,
    source: a.source,
    display: a.display,
    ip: a.ip,
    targets: a.targets,
    user_id: a.user_id,
    username: a.username,
    user: a.username,
    failure_type: a.failure_type,
    when: a.when.toISOString(),
    ...(a.size === undefined ? {} : { size: a.size }),
  });
}

/** sign is the value of X-Svc-Signature for a body. */
export function sign(secret: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/** resultView turns an attempt row into SPEC's ActionNotificationExportResult. */
export function resultView(r: WebhookAttemptRow): ActionNotificationExportResult {
  return {
    id: r.id,
    created_at: Math.floor(r.created_at.getTime() / 1000),
    status: r.status,
    message: r.message,
    success: r.success,
    request_headers: r.request_headers,
    request_method: r.request_method,
    request_url: r.request_url,
    path: r.path,
    folder: r.folder,
  };
}

/** Outcome is one finished attempt, waiting to be written with others in one unit of work. */
interface Outcome {
  d: WebhookDeliveryRow;
  token: string;
  at: Date;
  status: number;
  message: string;
  success: boolean;
  interrupted: boolean;
}

/**
 * Webhooks queues, sends, logs and retries webhook deliveries. Up to BATCH deliveries are in
 * flight at once; while more are due, a slot freed by an answer is filled at once (`onSlotFree`
 * wakes the loop), so a hanging target holds one slot, not the others. Answers are written
 * together, one unit of work for all that came meanwhile (group commit): on SQLite each unit of
 * work is a commit the uploads queue behind.
 */
export class Webhooks {
  private readonly inflight = new Set<AbortController>();
  private readonly sending = new Set<Promise<void>>();
  private outcomes: Outcome[] = [];
  private writing: Promise<void> | null = null;
  private backlog = false;
  private stopping = false;

  constructor(
    private readonly ctx: CoreContext,
    private readonly onSlotFree: () => void = () => undefined,
  ) {}

  /**
   * watch reports the queue in `metrics` at each scrape: deliveries waiting (pending, whether due or
   * backing off) and the age of the oldest, across every instance (the queue is in the database).
   */
  watch(metrics: Metrics): void {
    const queue = () =>
      this.ctx.db.read(
        (em) =>
          em
            .createQueryBuilder(WebhookDeliveryEntity, 'd')
            .select('COUNT(*)', 'n')
            .addSelect('MIN(d.created_at)', 'oldest')
            .where('d.status = :status', { status: 'pending' })
            .getRawOne() as Promise<{ n: string | number; oldest: string | number | null } | undefined>,
      );
    metrics.gauge(
      'svc_webhook_queue_depth',
      'Webhook deliveries waiting to be delivered (or retried)',
      [],
      async (set) => {
        set({}, Number((await queue())?.n ?? 0));
      },
    );
    metrics.gauge(
      'svc_webhook_oldest_queued_seconds',
      'Age of the oldest webhook delivery still waiting (0: none)',
      [],
      async (set) => {
        const oldest = (await queue())?.oldest;
        set({}, oldest == null ? 0 : Math.max(0, (Date.now() - Number(oldest)) / 1000));
      },
    );
  }

  /** enqueue queues one delivery per matching webhook, inside the Action's unit of work. */
  async enqueue(em: EntityManager, a: RecordedAction): Promise<number> {
    const hooks = this.ctx.config.webhooks.filter((h) => webhookMatches(h, a));
    if (hooks.length === 0) return 0;
    const body = actionBody(a);
    const now = new Date();
    // updateEntity(false): nothing is read back, so the Action's unit of work (and the upload
    // waiting on it) pays for one INSERT only.
    await em
      .createQueryBuilder()
      .insert()
      .into(WebhookDeliveryEntity)
      .updateEntity(false)
      .values(
        hooks.map((h) => {
          const headers: Record<string, string> = {
            ...(h.headers ?? {}),
            'Content-Type': 'application/json',
            'User-Agent': 'svc-gateway-webhook',
            'X-Svc-Action-Id': String(a.id),
          };
          if (h.secret) headers[SIGNATURE_HEADER] = sign(h.secret, body);
          return {
            action_id: a.id,
            created_at: now,
            url: h.url,
            method: h.method ?? 'POST',
            request_headers: JSON.stringify(headers),
            body,
            path: a.path,
            folder: a.path === '' ? '' : parentOf(a.path),
            status: 'pending' as const,
            attempts: 0,
            next_attempt_at: now,
            locked_until: null,
            lease: null,
          };
        }),
      )
      .execute();
    return hooks.length;
  }

  /**
   * tick claims as many due deliveries as there are free slots and starts sending them; true when
   * it filled every free slot (more may wait). It does not wait for the answers.
   */
  async tick(): Promise<boolean> {
    const free = BATCH - this.sending.size;
    if (this.stopping || free <= 0) return false;
    const { token, rows, claimed } = await this.claim(free);
    if (this.stopping) {
      // The core began closing during the claim: hand the deliveries back unsent.
      if (rows.length > 0)
        await this.ctx.db.work((em) =>
          em.update(
            WebhookDeliveryEntity,
            { id: In(rows.map((d) => d.id)), lease: token },
            { lease: null, locked_until: null },
          ),
        );
      return false;
    }
    // Only a full claim may have left due deliveries behind: then each freed slot is filled at
    // once. Otherwise new work waits for the loop's wake, so bursts are claimed together.
    this.backlog = claimed === free;
    for (const d of rows) {
      const sent: Promise<void> = this.attempt(d, token)
        .catch((err: unknown) => {
          // A bug, not a receiver's fault: the lease runs out and the delivery is sent again,
          // after a "no result" record.
          this.ctx.log.warn('webhook attempt failed unexpectedly', { delivery: d.id, error: String(err) });
        })
        .finally(() => {
          this.sending.delete(sent);
          if (this.backlog) this.onSlotFree();
        });
      this.sending.add(sent);
    }
    return claimed === free;
  }

  /** settle resolves once every attempt in flight is answered and written. */
  async settle(): Promise<void> {
    while (this.sending.size > 0 || this.writing) {
      await Promise.allSettled([...this.sending]);
      await this.writing;
    }
  }

  /**
   * interrupt aborts the attempts in flight (the core is closing); they are recorded as
   * interrupted and sent again later. settle() then waits for those records.
   */
  interrupt(): void {
    this.stopping = true;
    for (const c of this.inflight) c.abort(new Error('stopping'));
  }

  /**
   * retry sends a failed delivery again (SPEC `POST /action_webhook_failures/{id}/retry`, site
   * admins and site-wide keys): `id` is a delivery record. It queues one more attempt now.
   */
  async retry(p: Principal, id: number): Promise<void> {
    requireSiteAdmin(p);
    const max = this.ctx.config.events.webhook_max_attempts;
    await this.ctx.db.work(async (em) => {
      const attempt = await em.findOneBy(WebhookAttemptEntity, { id });
      const delivery = attempt
        ? await em.findOneBy(WebhookDeliveryEntity, { id: attempt.delivery_id })
        : null;
      if (!attempt || !delivery)
        throw new GatewayError('not-found/action-webhook-failure-not-found', `No webhook delivery ${id}`);
      if (attempt.success || delivery.status === 'succeeded') {
        throw new GatewayError(
          'processing-failure/already-completed',
          attempt.success
            ? `Webhook delivery ${id} succeeded; there is nothing to retry`
            : `A later attempt of webhook delivery ${id} succeeded; there is nothing to retry`,
        );
      }
      const now = new Date();
      if (delivery.lease !== null) {
        if (delivery.locked_until && delivery.locked_until > now)
          throw new GatewayError(
            'processing-failure/resource-locked',
            `Webhook delivery ${id} is being sent right now; retry once its attempt is recorded`,
          );
        // The instance that held it stopped mid-attempt: log that attempt, as a claim would.
        await em.insert(WebhookAttemptEntity, attemptRow(delivery, now, 0, `${LOST}; sending again (retry)`));
      }
      await em.update(
        WebhookDeliveryEntity,
        { id: delivery.id },
        {
          status: 'pending',
          // One more attempt, however many the delivery already used.
          attempts: Math.min(delivery.attempts, max - 1),
          next_attempt_at: now,
          lease: null,
          locked_until: null,
        },
      );
    });
  }

  /**
   * claim leases up to `n` due deliveries to this instance. `rows` are the ones to send;
   * `claimed` also counts those given up because their last attempt was lost.
   */
  private async claim(n: number): Promise<{ token: string; rows: WebhookDeliveryRow[]; claimed: number }> {
    const { webhook_timeout_seconds: timeoutS, webhook_lease_grace_seconds: graceS } = this.ctx.config.events;
    const token = randomUUID();
    const now = Date.now();
    // The lease outlives the longest attempt, so only a stopped instance's claims expire.
    const until = new Date(now + (timeoutS + graceS) * 1000);
    return this.ctx.db.work(async (em) => {
      const postgres = this.ctx.db.kind === 'postgres';
      const qb = em
        .createQueryBuilder(WebhookDeliveryEntity, 'd')
        .where("d.status = 'pending'")
        .andWhere('d.next_attempt_at <= :now', { now })
        .andWhere('(d.locked_until IS NULL OR d.locked_until < :now)', { now })
        // The order of the webhook_deliveries_pending index: read in order, no sort of the backlog.
        .orderBy('d.next_attempt_at', 'ASC')
        .addOrderBy('d.id', 'ASC')
        .limit(n);
      // PostgreSQL locks the rows it reads (others skip them), so they are read whole, once.
      if (postgres) {
        qb.setLock('pessimistic_write').setOnLocked('skip_locked');
        // Statistics lag behind a queue (10,000 rows queued a second ago look like none), and the
        // planner then reads and sorts the whole backlog: walk the pending index in order instead.
        await em.query('SET LOCAL enable_bitmapscan = off; SET LOCAL enable_sort = off');
      } else qb.select(['d.id', 'd.lease']);
      const due = await qb.getMany();
      if (due.length === 0) return { token, rows: [], claimed: 0 };
      // A due row that still has a lease: its instance stopped before recording a result.
      const orphaned = new Set(due.filter((r) => r.lease !== null).map((r) => r.id));
      let rows: WebhookDeliveryRow[];
      if (postgres) {
        await em
          .createQueryBuilder()
          .update(WebhookDeliveryEntity)
          .set({ lease: token, locked_until: until })
          .where('id IN (:...ids)', { ids: due.map((r) => r.id) })
          .execute();
        rows = due.map((r) => ({ ...r, lease: token, locked_until: until }));
      } else {
        // Another connection may write between this read and the update (SQLite locks the file
        // only once a transaction writes): conditional, so a row another instance claimed (or
        // sent and released) meanwhile is not taken over; split on the old lease, so `orphaned`
        // rows are exactly those taken over.
        for (const [ids, lease] of [
          [due.filter((r) => !orphaned.has(r.id)).map((r) => r.id), 'lease IS NULL'],
          [[...orphaned], 'lease IS NOT NULL'],
        ] as const) {
          if (ids.length === 0) continue;
          await em
            .createQueryBuilder()
            .update(WebhookDeliveryEntity)
            .set({ lease: token, locked_until: until })
            .where('id IN (:...ids)', { ids })
            .andWhere(lease)
            .andWhere("status = 'pending'")
            .andWhere('next_attempt_at <= :now', { now })
            .andWhere('(locked_until IS NULL OR locked_until < :now)', { now })
            .execute();
        }
        rows = await em.find(WebhookDeliveryEntity, {
          where: { id: In(due.map((r) => r.id)), lease: token },
          order: { id: 'ASC' },
        });
      }
      const lost = rows.filter((d) => orphaned.has(d.id));
      // Only a crash recovery writes more here; the normal path stays one UPDATE.
      const givenUp = lost.length > 0 ? await this.recordLost(em, lost, new Date(now)) : new Set<number>();
      return { token, rows: rows.filter((d) => !givenUp.has(d.id)), claimed: rows.length };
    });
  }

  /**
   * recordLost writes the attempt an instance stopped before recording, so a receiver that sees
   * the Action again also sees a row between, and counts it, so a crash loop cannot resend
   * forever. Deliveries with no attempts left are marked failed; it returns their ids.
   */
  private async recordLost(em: EntityManager, lost: WebhookDeliveryRow[], at: Date): Promise<Set<number>> {
    const max = this.ctx.config.events.webhook_max_attempts;
    for (const d of lost) d.attempts += 1;
    const givenUp = lost.filter((d) => d.attempts >= max).map((d) => d.id);
    await em.insert(
      WebhookAttemptEntity,
      lost.map((d) =>
        attemptRow(d, at, 0, `${LOST}; ${d.attempts >= max ? 'no attempts left' : 'sending again'}`),
      ),
    );
    const again = lost.filter((d) => d.attempts < max).map((d) => d.id);
    for (const [ids, state] of [
      [again, {}],
      [givenUp, { status: 'failed', lease: null, locked_until: null }],
    ] as const) {
      if (ids.length === 0) continue;
      await em
        .createQueryBuilder()
        .update(WebhookDeliveryEntity)
        .set({ attempts: () => 'attempts + 1', ...state })
        .where('id IN (:...ids)', { ids })
        .execute();
    }
    if (givenUp.length > 0)
      this.ctx.log.info('webhook deliveries failed: their instance stopped during the last attempt', {
        deliveries: givenUp,
      });
    return new Set(givenUp);
  }

  /** attempt sends one delivery once and records the attempt and the delivery's next state. */
  private async attempt(d: WebhookDeliveryRow, token: string): Promise<void> {
    const { webhook_timeout_seconds: timeoutS } = this.ctx.config.events;
    const abort = new AbortController();
    this.inflight.add(abort);
    const timer = setTimeout(() => abort.abort(new Error('timeout')), timeoutS * 1000);
    let status = 0;
    let message: string;
    try {
      const answer = await send(d, abort.signal, (code) => {
        status = code;
      });
      message =
        status === 200 || status === 204
          ? `delivered (HTTP ${status})`
          : status >= 300 && status < 400
            ? `HTTP ${status} redirect, not followed${answer.location ? ` (to ${answer.location})` : ''}`
            : `HTTP ${status}${answer.statusText ? ` ${answer.statusText}` : ''}`;
    } catch (err) {
      const reason = abort.signal.aborted ? (abort.signal.reason as Error | undefined)?.message : undefined;
      if (reason === 'timeout') message = `timed out after ${timeoutS} s${status ? ` (HTTP ${status})` : ''}`;
      else if (reason === 'stopping') message = 'interrupted: the gateway stopped; it will be sent again';
      else message = describeNetworkError(err);
    } finally {
      clearTimeout(timer);
      this.inflight.delete(abort);
    }
    const success = status === 200 || status === 204;
    const interrupted = abort.signal.aborted && (abort.signal.reason as Error).message === 'stopping';
    // The slot is free once the answer is in; the outcome is written with others (writeOutcomes).
    this.outcomes.push({ d, token, at: new Date(), status, message, success, interrupted });
    this.writing ??= this.writeOutcomes();
    if (!success && !interrupted)
      this.ctx.log.info('webhook delivery failed', { delivery: d.id, url: d.url, status, message });
  }

  /** writeOutcomes writes finished attempts, each time all that finished meanwhile in one unit of work. */
  private async writeOutcomes(): Promise<void> {
    const { webhook_max_attempts: max, webhook_backoff_seconds: backoffS } = this.ctx.config.events;
    // Answers of one claim come within a few ms of each other: wait that long to write them together.
    await new Promise((r) => setTimeout(r, GATHER_MS));
    while (this.outcomes.length > 0) {
      const batch = this.outcomes;
      this.outcomes = [];
      try {
        await this.ctx.db.work(async (em) => {
          await em
            .createQueryBuilder()
            .insert()
            .into(WebhookAttemptEntity)
            .values(batch.map((o) => attemptRow(o.d, o.at, o.status, o.message, o.success)))
            .updateEntity(false)
            .execute();
          // Successes of one claim in one statement; each other outcome has its own next state.
          const delivered = new Map<string, number[]>();
          for (const o of batch) {
            if (o.success) {
              delivered.set(o.token, [...(delivered.get(o.token) ?? []), o.d.id]);
              continue;
            }
            const attempts = o.interrupted ? o.d.attempts : o.d.attempts + 1;
            const backoffMs = backoffS * 1000 * 2 ** Math.max(0, attempts - 1);
            await em
              .createQueryBuilder()
              .update(WebhookDeliveryEntity)
              .set({
                status: attempts >= max ? 'failed' : 'pending',
                attempts,
                next_attempt_at: o.interrupted ? o.at : new Date(o.at.getTime() + backoffMs),
                lease: null,
                locked_until: null,
              })
              .where('id = :id AND lease = :token', { id: o.d.id, token: o.token })
              .execute();
          }
          for (const [token, ids] of delivered)
            await em
              .createQueryBuilder()
              .update(WebhookDeliveryEntity)
              .set({ status: 'succeeded', attempts: () => 'attempts + 1', lease: null, locked_until: null })
              .where('id IN (:...ids) AND lease = :token', { ids, token })
              .execute();
        });
      } catch (err) {
        // The leases run out and these deliveries are sent again, after a "no result" record.
        this.ctx.log.warn('webhook attempts not recorded', {
          deliveries: batch.map((o) => o.d.id),
          error: (err as Error).message ?? String(err),
        });
      }
    }
    this.writing = null;
  }
}

/** attemptRow is the delivery-log row of one attempt of `d`. */
function attemptRow(
  d: WebhookDeliveryRow,
  at: Date,
  status: number,
  message: string,
  success = false,
): Omit<WebhookAttemptRow, 'id'> {
  return {
    delivery_id: d.id,
    created_at: at,
    status,
    message,
    success,
    request_headers: d.request_headers,
    request_method: d.method,
    request_url: d.url,
    path: d.path,
    folder: d.folder,
  };
}
