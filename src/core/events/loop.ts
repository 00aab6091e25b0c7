/**
 * Loop runs one background job over and over: `tick` does a batch of due work and says whether
 * more may be waiting (then it runs again at once), otherwise the loop sleeps `intervalMs`.
 * stop() ends the loop and waits for the running tick; ticks never overlap.
 */
import type { Logger } from '../../log.ts';

/** Loop is one background job of the core (webhooks, exports, e-mail, pruning). */
export class Loop {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = true;

  constructor(
    private readonly name: string,
    private readonly intervalMs: number,
    private readonly tick: () => Promise<boolean>,
    private readonly log: Logger,
  ) {}

  /** start runs the first tick soon and keeps going until stop. */
  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.schedule(0);
  }

  /** wake runs a tick now unless one is running (new work was just committed). */
  wake(): void {
    if (this.stopped || this.running) return;
    this.schedule(0);
  }

  /** stop ends the loop; it resolves once the tick in progress, if any, has finished. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }

  private schedule(ms: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.running = this.tick()
        .catch((err: unknown) => {
          this.log.warn('background job failed; trying again later', {
            job: this.name,
            error: (err as Error).message ?? String(err),
          });
          return false;
        })
        .then((more) => {
          this.running = null;
          if (!this.stopped) this.schedule(more ? 0 : this.intervalMs);
        });
    }, ms);
    this.timer.unref();
  }
}
