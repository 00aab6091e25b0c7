/**
 * Events ties the durable queues to the core: it registers the Action sink (so deliveries and
 * e-mail changes are queued in the Action's transaction) and runs the background loops of this
 * instance. Every loop works from the database only, so any number of instances can run them.
 */
import type { CoreContext } from '../context.ts';
import type { BlobStore } from '../files/blobstore.ts';
import { Exports } from './exports.ts';
import { Mailer } from './mail.ts';
import { Retention } from './retention.ts';
import { addActionSink } from './hooks.ts';
import { Loop } from './loop.ts';
import { Webhooks } from './webhooks.ts';

// How soon after an Action is committed its webhook deliveries are claimed.
const WAKE_DELAY_MS = 200;

/** Events owns webhooks, exports, e-mail notifications and pruning, and their loops. */
export class Events {
  readonly webhooks: Webhooks;
  readonly exports: Exports;
  readonly mail: Mailer;
  readonly retention: Retention;
  private readonly loops: Loop[] = [];
  private readonly byName = new Map<string, Loop>();
  private readonly detach: () => void;

  constructor(
    private readonly ctx: CoreContext,
    store: BlobStore,
  ) {
    this.webhooks = new Webhooks(ctx, () => this.byName.get('webhooks')?.wake());
    // A new export is built at once by this instance (any instance would pick it up within a poll).
    this.exports = new Exports(ctx, store, () => this.byName.get('exports')?.wake());
    this.mail = new Mailer(ctx);
    this.retention = new Retention(ctx);
    this.detach = addActionSink(ctx.db.source, async (em, action) => {
      if ((await this.webhooks.enqueue(em, action)) > 0) {
        // Woken after the caller's commit, a little later so a burst of Actions (an upload of
        // many files) is claimed in one unit of work instead of one each: on SQLite every claim
        // is a commit the next upload would wait behind.
        this.byName.get('webhooks')?.wake(WAKE_DELAY_MS);
      }
      await this.mail.enqueue(em, action);
    });
  }

  /** start runs this instance's background loops. */
  start(): void {
    const every = this.ctx.config.events.poll_interval_ms;
    this.loops.push(new Loop('webhooks', every, () => this.webhooks.tick(), this.ctx.log));
    this.loops.push(new Loop('exports', every, () => this.exports.tick(), this.ctx.log));
    this.loops.push(new Loop('mail', every, () => this.mail.tick(), this.ctx.log));
    // Pruning needs no hurry: once a minute (or at once again while a backlog lasts).
    this.loops.push(new Loop('retention', 60_000, () => this.retention.tick(), this.ctx.log));
    for (const loop of this.loops) {
      this.byName.set(loop.name, loop);
      loop.start();
    }
  }

  /** stop interrupts deliveries in flight, ends the loops and detaches from recordAction. */
  async stop(): Promise<void> {
    this.webhooks.interrupt();
    this.mail.interrupt();
    // A tick still claiming hands its claims back; then every send in flight is recorded.
    await Promise.all(this.loops.map((l) => l.stop()));
    await this.webhooks.settle();
    this.detach();
  }
}
