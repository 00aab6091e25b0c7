/**
 * Test fixtures shared by unit and protocol tests: a fresh database per core or gateway (a temp
 * SQLite data dir, or a fresh PostgreSQL database when SVC_TEST_DATABASE_URL names a server), and
 * an HTTPS client that trusts the gateway's own generated certificate.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, type Config } from '../../src/config.ts';
import { createCore, type Core } from '../../src/core/index.ts';
import { createLogger } from '../../src/log.ts';
import { startGateway } from '../../src/main.ts';
import { freshDatabase } from './database.ts';

/** TEST_DATABASE_URL selects PostgreSQL for the whole run (npm test leaves it empty for SQLite). */
export const TEST_DATABASE_URL = process.env.SVC_TEST_DATABASE_URL ?? '';
/** dbKind names the database this run tests, for test titles. */
export const dbKind = TEST_DATABASE_URL ? 'postgres' : 'sqlite';

/** TestConfig is a config with its own data dir and database, and the cleanup of both. */
export interface TestConfig {
  config: Config;
  cleanup: () => Promise<void>;
}

/** testConfig builds settings for one test core or gateway: port 0 everywhere, cheap bcrypt, quiet. */
export async function testConfig(overrides: Record<string, unknown> = {}): Promise<TestConfig> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-test-'));
  const db = TEST_DATABASE_URL ? await freshDatabase(TEST_DATABASE_URL) : null;
  const base = {
    data_dir: dir,
    database: { url: db?.url ?? '' },
    bind: '127.0.0.1',
    ports: { https: 0, webdav: 'off', ftp: 'off', ftps: 'off', sftp: 'off' },
    accounts: { bcrypt_rounds: 4 },
    admin: { username: 'admin', password: 'admin-password' },
    log_level: 'error',
    // Tests that read the log (captureLogs) count operational lines; access lines have their own
    // test (observability.test.ts), which turns them on.
    log_access: 'off',
    // A test's stop should not wait out the production drain for a transfer it abandoned.
    shutdown: { grace_seconds: 2 },
  };
  const cleanup = async () => {
    await db?.drop();
    rmSync(dir, { recursive: true, force: true });
  };
  let config: Config;
  try {
    config = loadConfig({}, deepMerge(base, overrides));
  } catch (err) {
    // A test of refused settings gets no config, so nothing else would remove these.
    await cleanup();
    throw err;
  }
  return { config, cleanup };
}

function deepMerge(a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const out = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const av = out[k];
    out[k] =
      v && typeof v === 'object' && !Array.isArray(v) && av && typeof av === 'object' && !Array.isArray(av)
        ? deepMerge(av as Record<string, unknown>, v as Record<string, unknown>)
        : v;
  }
  return out;
}

/** TestCore is a migrated core on a fresh database, without listeners. */
export interface TestCore {
  core: Core;
  config: Config;
  close: () => Promise<void>;
}

/** openTestCore opens a core for unit tests. */
export async function openTestCore(overrides: Record<string, unknown> = {}): Promise<TestCore> {
  const { config, cleanup } = await testConfig(overrides);
  const core = await createCore(config, createLogger('error', { silent: true })).catch(
    async (err: unknown) => {
      await cleanup();
      throw err;
    },
  );
  return {
    core,
    config,
    close: async () => {
      await core.close();
      await cleanup();
    },
  };
}

/** Response is what the test HTTPS client read. */
export interface Response {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  /** the body parsed as JSON, when it is JSON */
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** RequestOptions are the parts of a test request. */
export interface RequestOptions {
  headers?: Record<string, string>;
  /** an object is sent as JSON; a string or Buffer as is (set Content-Type yourself) */
  body?: unknown;
  /** the client's source address, e.g. 127.0.0.2 for allowed_ips tests */
  localAddress?: string;
}

/** TestGateway is a started gateway (HTTPS on a free port) with a client bound to it. */
export interface TestGateway {
  core: Core;
  config: Config;
  /** the HTTPS port */
  port: number;
  /** every bound listener's port by front-end name (https, ftp, ftps, sftp, webdav) */
  ports: Record<string, number>;
  /** a site-wide API key, made through the core */
  siteKey: string;
  request(method: string, urlPath: string, opts?: RequestOptions): Promise<Response>;
  stop(): Promise<void>;
}

/** startTestGateway starts the whole gateway in-process, as `npm start` would, on port 0. */
export async function startTestGateway(overrides: Record<string, unknown> = {}): Promise<TestGateway> {
  const { config, cleanup } = await testConfig(overrides);
  const gateway = await startGateway(config, createLogger('error', { silent: true }), {
    announce: () => undefined,
  }).catch(async (err: unknown) => {
    await cleanup();
    throw err;
  });
  const port = gateway.ports.https!;
  const ca = readFileSync(path.join(config.data_dir, 'tls', 'cert.pem'));
  const agent = new https.Agent({ ca, keepAlive: true });
  const siteKey = (await gateway.core.apiKeys.createSiteWide('tests')).key!;
  return {
    core: gateway.core,
    config,
    port,
    ports: gateway.ports,
    siteKey,
    request: (method, urlPath, opts = {}) => httpsRequest(agent, port, method, urlPath, opts),
    stop: async () => {
      agent.destroy();
      await gateway.stop();
      await cleanup();
    },
  };
}

function httpsRequest(
  agent: https.Agent,
  port: number,
  method: string,
  urlPath: string,
  opts: RequestOptions,
): Promise<Response> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  let payload: Buffer | undefined;
  if (opts.body !== undefined) {
    if (typeof opts.body === 'string' || Buffer.isBuffer(opts.body)) payload = Buffer.from(opts.body);
    else {
      payload = Buffer.from(JSON.stringify(opts.body));
      headers['Content-Type'] ??= 'application/json';
    }
    headers['Content-Length'] = String(payload.length);
  }
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path: urlPath,
        headers,
        agent,
        servername: 'localhost',
        localAddress: opts.localAddress,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}
