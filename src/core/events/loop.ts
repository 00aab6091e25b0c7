/**
 * Loop runs one background job over and over: `tick` does a batch of due work and says whether
 * more may be waiting (then it runs again at once), otherwise the loop sleeps `intervalMs`.
 * stop() ends the loop and waits for the running tick; ticks never overlap.
 */
import { LogThrottle, type Logger } from '../../log.ts';
import { GatewayError } from '../errors.ts';

// Shared by every loop: during a database outage each job fails on each tick, and the database
// layer has logged the cause already; one line every few seconds for all of them says enough.
const outages = new LogThrottle();

/** Loop is one background job of the core (webhooks, exports, e-mail, pruning). */
export class Loop {
  private timer: NodeJS.Timeout | null = null;
  // When the pending timer fires (epoch ms), so wake() can tell whether it would come sooner.
  private dueAt = 0;
  private running: Promise<void> | null = null;
  // Set by wake() during a tick: work committed after the tick's claim runs soon, not after the interval.
  private wokenDuringTick: number | null = null;
  private stopped = true;

  constructor(
    readonly name: string,
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

  /**
   * wake runs a tick within `delayMs` (new work was just committed), unless one is due sooner;
   * during a tick, the next one then follows within `delayMs`. The delay gathers a burst of new
   * work into one tick.
   */
  wake(delayMs = 0): void {
    if (this.stopped) return;
    if (this.running) {
      this.wokenDuringTick = Math.min(this.wokenDuringTick ?? delayMs, delayMs);
      return;
    }
    if (this.timer && this.dueAt <= Date.now() + delayMs) return;
    this.schedule(delayMs);
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
    this.dueAt = Date.now() + ms;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.running = this.tick()
        .catch((err: unknown) => {
          const outage = err instanceof GatewayError && err.family === 'service-unavailable';
          const held = outage ? outages.take(err.type) : { held: 0 };
          if (held)
            this.log.warn('background job failed; trying again later', {
              job: this.name,
              error: (err as Error).message ?? String(err),
              ...(held.held ? { held_back: held.held } : {}),
            });
          return false;
        })
        .then((more) => {
          this.running = null;
          const woken = this.wokenDuringTick;
          this.wokenDuringTick = null;
          if (!this.stopped) this.schedule(more ? 0 : Math.min(this.intervalMs, woken ?? Infinity));
        });
    }, ms);
    this.timer.unref();
  }
}
