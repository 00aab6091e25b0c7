/**
 * Reading what the gateway logs, for tests that assert an operator would see a line: the core's
 * logger is silent in tests, so this turns it on with a sink that keeps each line's fields.
 */
import { Writable } from 'node:stream';
import winston from 'winston';
import type { Core } from '../../src/core/index.ts';
import type { Logger } from '../../src/log.ts';

/** LogCapture holds the lines logged at `info` and above since it started. */
export interface LogCapture {
  lines: Record<string, unknown>[];
  /** stop detaches the sink and silences the logger again */
  stop(): void;
}

/** captureLogs starts keeping the core's log lines at info and above. */
export function captureLogs(core: Core): LogCapture {
  return captureLogger(core.log);
}

/** captureLogger starts keeping a logger's lines at info and above (a logger without a core). */
export function captureLogger(log: Logger): LogCapture {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    objectMode: true,
    write(info: Record<string, unknown>, _enc, done) {
      lines.push(info);
      done();
    },
  });
  const transport = new winston.transports.Stream({ stream: sink, level: 'info' });
  log.add(transport);
  log.silent = false;
  return {
    lines,
    stop() {
      log.remove(transport);
      log.silent = true;
    },
  };
}
