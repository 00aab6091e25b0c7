import { isatty } from 'node:tty';
import sonicBoom from 'sonic-boom';
import winston from 'winston';
import Transport from 'winston-transport';

/** Logger is the winston logger every part of the gateway writes to. */
export type Logger = winston.Logger;

/**
 * createLogger makes the root logger: one line per event on stderr, JSON when not on a terminal
 * (what log collectors read), human-readable on a terminal. `silent` is for tests.
 */
export function createLogger(level: string, opts: { silent?: boolean } = {}): Logger {
  const human = isatty(2);
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
    transports: [
      human
        ? new winston.transports.Console({ stderrLevels: Object.keys(winston.config.npm.levels) })
        : new LineTransport(),
    ],
  });
}

/** MESSAGE is where winston's formats leave the finished line (triple-beam's symbol). */
const MESSAGE = Symbol.for('message');

/** LineTransport writes each formatted line to stderr, in batches (writeLine). */
class LineTransport extends Transport {
  constructor() {
    super();
    // Made now, so the lines are written at exit even if the first is still waiting then.
    stderrLines();
  }

  override log(info: Record<symbol, unknown>, next: () => void): void {
    writeLine(`${String(info[MESSAGE])}\n`);
    next();
  }
}

// The package is CommonJS whose module.exports is the class itself; its types declare a module.
const SonicBoom = sonicBoom as unknown as typeof sonicBoom.SonicBoom;
type SonicBoom = sonicBoom.SonicBoom;

let lines: SonicBoom | undefined;

/** BATCH_BYTES of waiting lines are written at once; fewer wait at most FLUSH_MS. */
const BATCH_BYTES = 8 * 1024;
const FLUSH_MS = 50;
let waiting: string[] = [];
let waitingBytes = 0;
let flushTimer: NodeJS.Timeout | null = null;

/**
 * writeLine queues a JSON log line for stderr (log collectors read it through a pipe). The
 * console's write to a pipe is a blocking system call on the event loop, and one that wakes the
 * reader: two lines per small WebDAV request (access and transfer) cost 8% of the gateway's time
 * in a run of 4,000 PUTs and GETs (issue 13). Lines are gathered, in order, and handed to a
 * sonic-boom (pino's writer), which writes them in the thread pool, once 8 KiB wait or 50 ms
 * after the first of them. The timer runs only while lines wait: sonic-boom's own periodic flush
 * wrote an empty string every 50 ms even to an idle gateway, a trip through the thread pool and a
 * wake-up of the event loop 20 times a second (a third of the idle process's CPU). A reader that
 * stops reading no longer stalls the gateway: past 16 MiB waiting, lines are dropped. Whatever
 * waits is written before the process exits (flushLogs).
 */
function writeLine(line: string): void {
  waiting.push(line);
  waitingBytes += line.length;
  if (waitingBytes >= BATCH_BYTES) handOver();
  else if (!flushTimer) {
    flushTimer = setTimeout(handOver, FLUSH_MS);
    flushTimer.unref();
  }
}

/** handOver gives the waiting lines to the writer as one string. */
function handOver(): void {
  if (flushTimer) clearTimeout(flushTimer);
  flushTimer = null;
  if (waiting.length === 0) return;
  const text = waiting.length === 1 ? waiting[0]! : waiting.join('');
  waiting = [];
  waitingBytes = 0;
  stderrLines().write(text);
}

/** stderrLines is the writer of JSON log lines: what it is given, it writes as soon as it can. */
function stderrLines(): SonicBoom {
  if (lines) return lines;
  const stream = new SonicBoom({ fd: 2, sync: false, maxLength: 16 * 1024 * 1024 });
  // stderr gone (its reader died): the lines have nowhere to go, and the gateway goes on.
  stream.on('error', () => undefined);
  process.once('exit', flushLogs);
  return (lines = stream);
}

/** flushLogs writes the log lines still waiting, at once (before the process exits or prints). */
export function flushLogs(): void {
  try {
    handOver();
    lines?.flushSync();
  } catch {
    // Nothing more can be done for lines that cannot be written.
  }
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
