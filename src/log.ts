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
