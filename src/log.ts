import winston from 'winston';

/** Logger is the winston logger every part of the gateway writes to. */
export type Logger = winston.Logger;

/**
 * createLogger makes the root logger: one line per event on stderr, JSON when not on a terminal
 * (what log collectors read), human-readable on a terminal. `silent` is for tests.
 */
export function createLogger(level: string, opts: { silent?: boolean } = {}): Logger {
  const human = process.stderr.isTTY;
  return winston.createLogger({
    level,
    silent: opts.silent ?? false,
    format: human
      ? winston.format.combine(
          winston.format.timestamp(),
          winston.format.printf(({ level: l, message, timestamp, ...rest }) => {
            const extra = Object.keys(rest).length ? ` ${JSON.stringify(rest)}` : '';
            return `${String(timestamp)} ${l} ${String(message)}${extra}`;
          }),
        )
      : winston.format.combine(winston.format.timestamp(), winston.format.json()),
    transports: [new winston.transports.Console({ stderrLevels: Object.keys(winston.config.npm.levels) })],
  });
}

/**
 * LogThrottle lets one line per key through per window, so a fault that hits every request (the
 * database gone, a full disk) logs a few lines rather than one per request (issue 12: 129 stack
 * traces in a 12 s outage). The next line let through tells how many were held back.
 */
export class LogThrottle {
  private readonly last = new Map<string, { at: number; held: number }>();

  constructor(private readonly windowMs = 5_000) {}

  /**
   * take tells whether a line for `key` may be logged now: null to hold it back, or the number of
   * lines held back since the last one let through.
   */
  take(key: string, now = Date.now()): { held: number } | null {
    const seen = this.last.get(key);
    if (seen && now - seen.at < this.windowMs) {
      seen.held++;
      return null;
    }
    // Keys are causes (a handful); forget the stale ones so the map cannot grow without bound.
    if (this.last.size > 256)
      for (const [k, v] of this.last) if (now - v.at >= this.windowMs) this.last.delete(k);
    this.last.set(key, { at: now, held: 0 });
    return { held: seen?.held ?? 0 };
  }
}
