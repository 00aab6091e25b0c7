// `npm test`: every unit and protocol test in one mocha run (with tsx), closing with the single line
// `N passed, N failed` that CI reads.
//
//   npm test                                   SQLite, unless SVC_TEST_DATABASE_URL says otherwise
//   npm test -- --grep users                   extra arguments go to mocha
//   npm test -- test/unit/docker.test.ts       named spec files replace the default globs
//   SVC_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npm test
//       the run gets a fresh database on that server (svc_test_<timestamp>_<pid>), dropped afterwards
//
// Tests read SVC_TEST_DATABASE_URL (or SVC_DATABASE_URL) themselves; this script only swaps a
// PostgreSQL URL for the fresh database's and otherwise passes the environment through.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * DEBIAN_CLIENTS are the programs the tests drive, with the Debian package that provides each.
 * Later protocol work adds lftp (lftp), ssh/sftp (openssh-client), rclone, litmus and cadaver.
 */
const DEBIAN_CLIENTS = [
  { command: 'curl', package: 'curl' },
  { command: 'openssl', package: 'openssl' },
  { command: 'lftp', package: 'lftp' },
  { command: 'litmus', package: 'litmus' },
  { command: 'cadaver', package: 'cadaver' },
  { command: 'rclone', package: 'rclone' },
  { command: 'script', package: 'bsdutils' },
  { command: 'sftp', package: 'openssh-client' },
  { command: 'scp', package: 'openssh-client' },
  { command: 'ssh-keygen', package: 'openssh-client' },
  { command: 'sshpass', package: 'sshpass' },
  // The mount suite: real FUSE mounts and the everyday tools run on them.
  { command: 'sshfs', package: 'sshfs' },
  { command: 'fusermount3', package: 'fuse3' },
  { command: 'git', package: 'git' },
  { command: 'rsync', package: 'rsync' },
  { command: 'sqlite3', package: 'sqlite3' },
  // The web interface's suite drives Debian's chromium through playwright-core.
  { command: 'chromium', package: 'chromium' },
  { command: 'unzip', package: 'unzip' },
  // storage.durability's test counts the fsyncs the kernel sees.
  { command: 'strace', package: 'strace' },
  // README's examples (test/protocols/readme.test.ts) read JSON answers with jq.
  { command: 'jq', package: 'jq' },
  // The balanced-cluster test puts HAProxy in front of three gateways; the docker/ test checks the
  // compose file and HAProxy's config with them.
  { command: 'haproxy', package: 'haproxy' },
  { command: 'docker-compose', package: 'docker-compose' },
];

const SPEC_GLOBS = ['test/unit/**/*.test.ts', 'test/protocols/**/*.test.ts'];
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const MOCHA = path.join(ROOT, 'node_modules', '.bin', 'mocha');
const REPORTER = path.join(ROOT, 'test', 'reporter.cjs');

/** fail ends the run before mocha could count anything, still closing with the line CI reads. */
function fail(message) {
  console.error(`test/run.js: ${message}`);
  console.log('0 passed, 1 failed');
  process.exit(1);
}

function onPath(command) {
  return (process.env.PATH ?? '').split(path.delimiter).some((dir) => {
    try {
      fs.accessSync(path.join(dir, command), fs.constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/** ensureClients installs missing client packages when it can (root with apt-get), else stops. */
function ensureClients() {
  const missing = DEBIAN_CLIENTS.filter((c) => !onPath(c.command));
  if (missing.length === 0) return;
  const packages = [...new Set(missing.map((c) => c.package))];
  const names = missing.map((c) => c.command).join(', ');
  if (process.getuid?.() !== 0 || !onPath('apt-get')) {
    fail(`the tests need ${names}; install the Debian packages: apt-get install ${packages.join(' ')}`);
  }
  console.log(`test/run.js: ${names} missing, installing ${packages.join(' ')}`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  for (const args of [['update'], ['install', '-y', '--no-install-recommends', ...packages]]) {
    const result = spawnSync('apt-get', args, { stdio: 'inherit', env });
    if (result.status !== 0) fail(`apt-get ${args.join(' ')} failed; install ${packages.join(' ')} by hand`);
  }
  const still = DEBIAN_CLIENTS.filter((c) => !onPath(c.command));
  if (still.length > 0) fail(`still missing after apt-get: ${still.map((c) => c.command).join(', ')}`);
}

/** redact hides the password of a database URL before it is printed. */
function redact(url) {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparsable URL)';
  }
}

/** connectAdmin opens a connection on the URL's server for CREATE/DROP DATABASE. */
async function connectAdmin(serverUrl) {
  const { default: pg } = await import('pg');
  let lastError;
  // The URL's own database may not exist; the maintenance databases do on any normal server.
  for (const database of [null, 'postgres', 'template1']) {
    const u = new URL(serverUrl);
    if (database) u.pathname = `/${database}`;
    const client = new pg.Client({ connectionString: u.toString() });
    try {
      await client.connect();
      return client;
    } catch (error) {
      lastError = error;
      await client.end().catch(() => {});
    }
  }
  throw lastError;
}

/** createDatabase makes the run's own database and returns its name and URL. */
async function createDatabase(serverUrl) {
  const name = `svc_test_${Date.now()}_${process.pid}`;
  const client = await connectAdmin(serverUrl);
  try {
    await client.query(`CREATE DATABASE "${name}"`);
  } finally {
    await client.end();
  }
  const u = new URL(serverUrl);
  u.pathname = `/${name}`;
  return { name, url: u.toString() };
}

/** dropDatabase removes the run's database, closing connections a test may have left open. */
async function dropDatabase(serverUrl, name) {
  const client = await connectAdmin(serverUrl);
  try {
    try {
      await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    } catch (error) {
      if (error?.code !== '42601') throw error;
      // PostgreSQL before 13 has no WITH (FORCE).
      await client.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [name]);
      await client.query(`DROP DATABASE IF EXISTS "${name}"`);
    }
  } finally {
    await client.end();
  }
}

/** runMocha runs mocha under tsx and resolves with its exit code (128 + n when killed by signal n). */
function runMocha(args, env) {
  const child = spawn(process.execPath, ['--import=tsx', MOCHA, ...args], {
    cwd: ROOT,
    stdio: 'inherit',
    env,
  });
  // Ctrl-C and `timeout` reach mocha through the process group; forward a plain `kill` too, and
  // stay alive until mocha is gone so the database is still dropped.
  const forward = (signal) => child.kill(signal);
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  return new Promise((resolve) => {
    child.on('error', (error) => {
      console.error(`test/run.js: cannot start mocha: ${error.message}`);
      resolve(1);
    });
    child.on('close', (code, signal) => {
      process.off('SIGINT', forward);
      process.off('SIGTERM', forward);
      resolve(code ?? 128 + (os.constants.signals[signal] ?? 0));
    });
  });
}

async function main() {
  process.chdir(ROOT);
  ensureClients();
  if (!fs.existsSync(MOCHA)) fail('mocha is not installed; run npm ci first');

  const extra = process.argv.slice(2);
  const ownSpecs = extra.some(
    (a) => a === '--spec' || a.startsWith('--spec=') || (!a.startsWith('-') && /\.[cm]?[jt]s$/.test(a)),
  );
  const ownReporter = extra.some((a) => a === '--reporter' || a === '-R' || a.startsWith('--reporter='));
  const summaryFile = path.join(os.tmpdir(), `svc-test-summary-${process.pid}.json`);
  fs.rmSync(summaryFile, { force: true });
  const args = [
    ...(ownReporter ? [] : ['--reporter', REPORTER]),
    '--timeout',
    '20000',
    '--exit',
    ...(ownSpecs ? [] : SPEC_GLOBS),
    ...extra,
  ];
  const env = { ...process.env, SVC_TEST_SUMMARY_FILE: summaryFile };

  const testUrl = process.env.SVC_TEST_DATABASE_URL;
  let database = null;
  if (testUrl && /^postgres(ql)?:\/\//.test(testUrl)) {
    try {
      database = await createDatabase(testUrl);
    } catch (error) {
      fail(`cannot create a test database on ${redact(testUrl)}: ${error.message}`);
    }
    env.SVC_TEST_DATABASE_URL = database.url;
    console.log(`test/run.js: database: PostgreSQL ${redact(database.url)} (fresh, dropped after the run)`);
  } else if (testUrl) {
    console.log(`test/run.js: database: ${redact(testUrl)} (SVC_TEST_DATABASE_URL, used as is)`);
  } else if (process.env.SVC_DATABASE_URL) {
    console.log(
      `test/run.js: database: ${redact(process.env.SVC_DATABASE_URL)} (SVC_DATABASE_URL, used as is)`,
    );
  } else {
    console.log('test/run.js: database: SQLite (no SVC_TEST_DATABASE_URL)');
  }

  let code;
  try {
    code = await runMocha(args, env);
  } finally {
    if (database) {
      // Silent when it works, so mocha's summary stays the last line.
      await dropDatabase(testUrl, database.name).catch((error) =>
        console.error(`test/run.js: could not drop database ${database.name}: ${error.message}`),
      );
    }
  }

  const summarized = fs.existsSync(summaryFile);
  fs.rmSync(summaryFile, { force: true });
  if (!summarized && !ownReporter) {
    // mocha stopped before the end of the run (a spec file failed to load, a crash, a signal).
    console.error(`test/run.js: mocha exited with code ${code} before reporting a result`);
    console.log('0 passed, 1 failed');
    code ||= 1;
  }
  process.exit(code);
}

await main();
