/**
 * The gateway as its own process, as an operator runs it (`svc-gateway serve`): for tests whose
 * clients would otherwise block the test's own event loop (a FUSE mount served by the gateway) or
 * that check the process itself.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * startFlags are the node options of `npm start` (package.json scripts.start), so a gateway a test
 * or benchmark starts has the heap settings an operator's `npm start` gives it (the soak's memory
 * figures depend on them).
 */
export function startFlags(): string[] {
  const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
    scripts: { start: string };
  };
  const m = /^node((?:\s+--\S+)*)\s+bin\/svc-gateway\.js serve$/.exec(pkg.scripts.start.trim());
  if (!m) throw new Error(`package.json scripts.start is not "node [--flags] bin/svc-gateway.js serve"`);
  return m[1]!.trim().split(/\s+/).filter(Boolean);
}

/** ServedProcess is a running gateway process: its stdout lines and the ports of its `ready` line. */
export interface ServedProcess {
  child: ChildProcess;
  stdout: string[];
  /** every stderr line (JSON log lines), for assertions on what was logged */
  stderr: string[];
  ports: Record<string, number>;
}

/**
 * serveProcess starts `svc-gateway serve` with `npm start`'s node options, on loopback with every
 * port chosen by the system.
 * `prefix` runs it through another program that execs it (`prlimit --nofile=256 --`); `nodeArgs`
 * go to node (`--cpu-prof`).
 */
export function serveProcess(
  dataDir: string,
  env: Record<string, string>,
  opts: { prefix?: string[]; nodeArgs?: string[] } = {},
): Promise<ServedProcess> {
  const argv = [
    ...(opts.prefix ?? []),
    process.execPath,
    ...startFlags(),
    ...(opts.nodeArgs ?? []),
    'bin/svc-gateway.js',
    'serve',
  ];
  const child = spawn(argv[0]!, argv.slice(1), {
    env: {
      ...process.env,
      SVC_DATA_DIR: dataDir,
      SVC_BIND: '127.0.0.1',
      SVC_HTTPS_PORT: '0',
      SVC_WEBDAV_PORT: '0',
      SVC_FTP_PORT: '0',
      SVC_FTPS_PORT: '0',
      SVC_SFTP_PORT: '0',
      SVC_FTP_PASV_PORTS: '23100-23109',
      SVC_LOG_LEVEL: 'info',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const stdout: string[] = [];
  const stderr: string[] = [];
  createInterface({ input: child.stdout! }).on('line', (l) => stdout.push(l));
  return new Promise((resolve, reject) => {
    // A process that never says ready (a log level above info hides the line) is not left behind.
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error('no ready line within 60 s'));
    }, 60_000);
    child.once('exit', (code) => reject(new Error(`exited with ${code} before ready`)));
    createInterface({ input: child.stderr! }).on('line', (line) => {
      stderr.push(line);
      if (!line.includes('"ready"')) return;
      clearTimeout(timer);
      resolve({
        child,
        stdout,
        stderr,
        ports: (JSON.parse(line) as { ports: Record<string, number> }).ports,
      });
    });
  });
}

/** stopProcess sends SIGTERM and resolves with the exit code. */
export function stopProcess(s: ServedProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (s.child.exitCode !== null) return resolve(s.child.exitCode);
    s.child.once('exit', (code) => resolve(code));
    s.child.kill('SIGTERM');
  });
}

let marks = 0;

/**
 * logSettled resolves once every line the process logged before the call is in `s.stderr`: the
 * gateway writes its lines in batches, in order (src/log.ts), so the access line of a GET /healthz
 * marked with its own X-Request-Id, made now, tells. The marker's line is removed again.
 */
export async function logSettled(s: ServedProcess): Promise<void> {
  const mark = `settled-${process.pid}-${++marks}`;
  const status = await new Promise<number>((resolve, reject) => {
    https
      .get(
        {
          host: '127.0.0.1',
          port: s.ports.https,
          path: '/healthz',
          headers: { 'X-Request-Id': mark },
          rejectUnauthorized: false,
        },
        (res) => {
          res.resume();
          res.once('end', () => resolve(res.statusCode ?? 0));
        },
      )
      .once('error', reject);
  });
  if (status !== 200) throw new Error(`GET /healthz answered ${status}`);
  const tagged = `"request_id":"${mark}"`;
  for (let waited = 0; !s.stderr.some((l) => l.includes(tagged)); waited += 10) {
    if (waited > 10_000) throw new Error(`the access line of ${mark} did not come within 10 s`);
    await new Promise((r) => setTimeout(r, 10));
  }
  const at = s.stderr.findIndex((l) => l.includes(tagged));
  s.stderr.splice(at, 1);
}
