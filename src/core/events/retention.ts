/**
 * Retention (issue 7 item 6): Actions and webhook delivery records (attempts, and finished
 * deliveries) older than `retention_days` are deleted, and so are finished exports of that age
 * (their CSV blobs go to the blob garbage queue), by a background job, a bounded batch per
 * table at a time so no transaction grows with the backlog. Pending deliveries are kept.
 */
import { In, LessThan, type EntityTarget, type FindOptionsWhere, type ObjectLiteral } from 'typeorm';
import {
  ActionEntity,
  ExportEntity,
  WebhookAttemptEntity,
  WebhookDeliveryEntity,
} from '../../db/entities.ts';
import type { CoreContext } from '../context.ts';
import { markGarbage } from '../files/namespace.ts';

// Rows deleted per table per tick.
const BATCH = 1000;
const DAY_MS = 86_400_000;

/** Retention prunes old Actions and delivery records. */
export class Retention {
  constructor(private readonly ctx: CoreContext) {}

  /** tick deletes one batch per table; true when a batch was full (more may wait). */
  async tick(now = new Date()): Promise<boolean> {
    const cutoff = new Date(now.getTime() - this.ctx.config.events.retention_days * DAY_MS);
    const counts = [
      await this.prune(ActionEntity, { when: LessThan(cutoff) }, 'when'),
      await this.prune(WebhookAttemptEntity, { created_at: LessThan(cutoff) }, 'created_at'),
      await this.prune(
        WebhookDeliveryEntity,
        { created_at: LessThan(cutoff), status: In(['succeeded', 'failed']) },
        'created_at',
      ),
      await this.pruneExports(cutoff),
    ];
    const total = counts.reduce((a, b) => a + b, 0);
    if (total > 0)
      this.ctx.log.info('pruned old records', {
        actions: counts[0],
        webhook_attempts: counts[1],
        webhook_deliveries: counts[2],
        exports: counts[3],
        older_than: cutoff.toISOString(),
      });
    return counts.some((n) => n === BATCH);
  }

  /** pruneExports deletes finished exports made before `cutoff` and queues their CSVs as garbage. */
  private pruneExports(cutoff: Date): Promise<number> {
    return this.ctx.db.work(async (em) => {
      const rows = await em.find(ExportEntity, {
        where: { created_at: LessThan(cutoff), status: In(['ready', 'failed']) },
        select: { id: true, blob_id: true },
        order: { id: 'ASC' },
        take: BATCH,
      });
      if (rows.length === 0) return 0;
      await markGarbage(
        em,
        rows.map((r) => r.blob_id),
      );
      await em.delete(ExportEntity, { id: In(rows.map((r) => r.id)) });
      return rows.length;
    });
  }

  /**
   * prune deletes a batch of the rows `where` finds, oldest first by their time column `by`: the
   * order of an index on that time (the Actions' from migration 0008, the attempts' own, the
   * deliveries' from 0017), so the look stops at the first row too young. In the order of ids it
   * went through the whole table whenever nothing was old enough, as on most sites most of the
   * time: 19.5 ms of the event loop a minute with 266,000 Actions on SQLite, growing with the log
   * (90 days of it).
   */
  private prune<T extends ObjectLiteral & { id: number }>(
    entity: EntityTarget<T>,
    where: FindOptionsWhere<T>,
    by: keyof T & string,
  ): Promise<number> {
    return this.ctx.db.work(async (em) => {
      const ids = (
        await em.find(entity, {
          where,
          select: { id: true } as never,
          order: { [by]: 'ASC', id: 'ASC' } as never,
          take: BATCH,
        })
      ).map((r) => r.id);
      if (ids.length) await em.delete(entity, { id: In(ids) } as never);
      return ids.length;
    });
  }
}
