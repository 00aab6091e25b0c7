/**
 * Events ties the durable queues to the core: it registers the Action sink (so deliveries and
 * e-mail changes are queued in the Action's transaction) and runs the background loops of this
 * instance. Every loop works from the database only, so any number of instances can run them.
 */
import type { CoreContext } from '../context.ts';
import { addActionSink } from './hooks.ts';
import { Loop } from './loop.ts';
import { Webhooks } from './webhooks.ts';

/** Events owns webhooks, exports, e-mail notifications and pruning, and their loops. */
export class Events {
  readonly webhooks: Webhooks;
  private readonly loops: Loop[] = [];
  private readonly detach: () => void;

  constructor(private readonly ctx: CoreContext) {
    this.webhooks = new Webhooks(ctx);
    this.detach = addActionSink(ctx.db.source, async (em, action) => {
      if ((await this.webhooks.enqueue(em, action)) > 0) {
        // Woken after the caller's commit (a microtask later is too early on PostgreSQL; the
        // claim's conditions make an early tick harmless anyway).
        setImmediate(() => this.loops[0]?.wake());
      }
    });
  }

  /** start runs this instance's background loops. */
  start(): void {
    const every = this.ctx.config.events.poll_interval_ms;
    this.loops.push(new Loop('webhooks', every, () => this.webhooks.tick(), this.ctx.log));
    for (const loop of this.loops) loop.start();
  }

  /** stop interrupts deliveries in flight, ends the loops and detaches from recordAction. */
  async stop(): Promise<void> {
    this.webhooks.interrupt();
    await Promise.all(this.loops.map((l) => l.stop()));
    this.detach();
  }
}
