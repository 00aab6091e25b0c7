/**
 * createCore(): the one module front ends (protocols/*) may import. Everything a protocol needs,
 * logging in, authenticating, and every operation on behalf of a Principal, is reached from here.
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Config } from '../config.ts';
import { Database, type DatabaseKind } from '../db/database.ts';
import type { Logger } from '../log.ts';
import { ApiKeys } from './accounts/api-keys.ts';
import { Groups } from './accounts/groups.ts';
import { LoginGate } from './accounts/login.ts';
import { PublicKeys } from './accounts/public-keys.ts';
import { CredentialCache } from './accounts/credential-cache.ts';
import { Sessions } from './accounts/sessions.ts';
import { Users } from './accounts/users.ts';
import { History } from './actions/history.ts';
import { Permissions } from './access/permissions.ts';
import type { CoreContext } from './context.ts';
import { GatewayError } from './errors.ts';
import { Billing } from './billing/billing.ts';
import { Bundles } from './bundles/bundles.ts';
import { Events } from './events/events.ts';
import { Notifications } from './events/notifications.ts';
import { createBlobStore } from './files/blobstores/index.ts';
import { Files, type FileApi } from './files/files.ts';
import { keepInternals } from './internals.ts';
import { Locks } from './files/locks.ts';
import { Properties } from './files/properties.ts';
import { Metrics } from './metrics.ts';
import { Paginator } from './pagination.ts';
import { Readiness, type ReadinessReport } from './readiness.ts';
import type { Interface, Principal } from './principal.ts';
import { Site } from './site/site.ts';
import { Connections } from './connections/connections.ts';

export {
  GatewayError,
  LockedError,
  errorTypes,
  errorTitle,
  type ErrorFamily,
  type ErrorType,
  type ModelErrors,
} from './errors.ts';
export type { Capability } from './access/rights.ts';
export { isSiteAdmin, operatorPrincipal, type Interface, type Principal } from './principal.ts';
export type { Entry, ListOptions } from './files/namespace.ts';
export type { FileSession, Download, WriteOptions } from './files/session.ts';
export type { StagedWrite } from './files/staging.ts';
export type { WriteHandle } from './files/write.ts';
export type { Upload } from './files/uploads.ts';
export { MAX_LOCK_SECONDS, type DavLock, type LockRequest } from './files/locks.ts';
export type { DeadProperty, PropertyChange } from './files/properties.ts';
export type { SignedDownload } from './files/files.ts';
export type { ByteRange } from './files/blobstore.ts';
export { readBytes } from './files/blobstore.ts';
export { resolveChroot, MAX_PATH } from './paths.ts';
export { clientIp, ipInList } from './access/allowed-ips.ts';
export type { Page, PageRequest } from './pagination.ts';
export { requestSchemas, type RequestSchemaName } from './request-schemas.ts';
export type { User } from './accounts/users.ts';
export type { Group } from './accounts/groups.ts';
export type { ApiKey } from './accounts/api-keys.ts';
export type { Permission } from './access/permissions.ts';
export type { Notification } from './events/notifications.ts';
export type { LoginRequest, KeyLoginRequest } from './accounts/login.ts';
export type { PublicKey } from './accounts/public-keys.ts';
export type { Action, HistoryQuery } from './actions/history.ts';
export type { ActionNotificationExportResult } from './events/webhooks.ts';
export { SIGNATURE_HEADER } from './events/webhooks.ts';
export type { AccountLineItem, ImportResult } from './billing/billing.ts';
export {
  bundleCreateSchema,
  bundleUpdateSchema,
  GRANT_TTL_S,
  type Bundle,
  type BundleSummary,
  type BundleVisit,
} from './bundles/bundles.ts';
export type { Metrics } from './metrics.ts';
export type { ReadinessReport } from './readiness.ts';
export type { Instance, Listener, Problem, SiteReport } from './site/site.ts';
export type {
  Connection,
  Connections,
  ConnectionOpening,
  LiveConnection,
  LiveTransfer,
  TransferDirection,
  TransferStart,
} from './connections/connections.ts';
export type { EffectiveRights, Grant } from './access/effective.ts';
export type { GroupMember } from './accounts/groups.ts';

/** Core is the gateway's shared core: accounts, access, files and actions, once for every protocol. */
export interface Core {
  readonly config: Config;
  readonly log: Logger;
  /** databaseKind names the database this core runs on (for the `ready` line) */
  readonly databaseKind: DatabaseKind;
  readonly users: Users;
  readonly groups: Groups;
  readonly permissions: Permissions;
  readonly notifications: Notifications;
  readonly apiKeys: ApiKeys;
  /** publicKeys are users' SSH public keys for SFTP logins */
  readonly publicKeys: PublicKeys;
  readonly sessions: Sessions;
  readonly gate: LoginGate;
  /** history answers SPEC's history endpoints (the last 24 hours of Actions) */
  readonly history: History;
  /** files is the file API adapters use: sessions, uploads, signed downloads */
  readonly files: FileApi;
  /** events are webhooks (and their delivery log), exports, e-mail notifications, pruning */
  readonly events: Events;
  /** billing holds invoices and payments (SPEC AccountLineItem) */
  readonly billing: Billing;
  /** bundles are share links: made by users, opened by anyone with the link (issue 14) */
  readonly bundles: Bundles;
  /** dav holds WebDAV's locks and dead properties, in the database so every instance shares them */
  readonly dav: { readonly locks: Locks; readonly properties: Properties };
  /** namespace.mkdir creates a folder with its parents (fixtures and the CLI) */
  readonly namespace: { mkdir(p: Principal, path: string): Promise<void> };
  /** metrics are the gateway's Prometheus metrics, which the front ends and the kit update */
  readonly metrics: Metrics;
  /**
   * readiness tells whether this instance should get traffic (/readyz): the database and the blob
   * store answer, and it is not draining.
   */
  readiness(): Promise<ReadinessReport>;
  /** drain marks the instance as stopping: readiness fails from now on. */
  drain(): void;
  /**
   * authenticateApiKey admits a request carrying an API key, or throws not-authenticated
   * (service-unavailable when the database does not answer).
   */
  authenticateApiKey(key: string, iface: Interface, ip: string): Promise<Principal>;
  /** close waits for queued database work and closes the database. */
  close(): Promise<void>;
  /** site is what this gateway runs and what the operator should fix (GET /site, the Site admin page) */
  readonly site: Site;
  /**
   * connections are the live sessions of every instance (issue 15): adapters register theirs,
   * site admins list them and end them on whatever instance serves them.
   */
  readonly connections: Connections;
}

/** TlsMaterial is a PEM certificate chain and its private key (HTTPS, WebDAV, FTPS). */
export interface TlsMaterial {
  cert: string;
  key: string;
}

/**
 * FrontEnd is the lifecycle every protocol adapter exports (STYLE.md §2): main starts them in
 * order over one core and stops them in reverse order on SIGTERM.
 */
export interface FrontEnd {
  readonly name: string;
  /** start binds the listener and resolves with the bound port (0 in the settings picks a free one) */
  start(core: Core, opts: { host: string; port: number; tls: TlsMaterial }): Promise<{ port: number }>;
  /** stop closes the listener and its connections; it never exits the process */
  stop(): Promise<void>;
}

/** loadSecret returns SVC_SECRET, or the secret generated once and kept in the data dir. */
function loadSecret(config: Config): string {
  if (config.secret) return config.secret;
  const file = path.join(config.data_dir, 'secret');
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  mkdirSync(config.data_dir, { recursive: true });
  const secret = randomBytes(32).toString('hex');
  writeFileSync(file, `${secret}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
  return secret;
}

/**
 * createCore opens the database, applies pending migrations (before any listener starts, as
 * DESIGN.md asks) and builds the services. `serving` (startGateway) also starts now what a serving
 * gateway keeps for its whole run, rather than when first needed.
 */
export async function createCore(
  config: Config,
  log: Logger,
  opts: { migrate?: boolean; background?: boolean; serving?: boolean } = {},
): Promise<Core> {
  const db = await Database.open(config, log);
  try {
    if (opts.migrate !== false) {
      const applied = await db.migrate();
      if (applied.length) log.info('database migrated', { migrations: applied, database: db.kind });
    } else if (await db.pendingMigrations()) {
      throw new Error('the database schema is behind this version: run `svc-gateway migrate`');
    }
  } catch (err) {
    await db.close();
    throw err;
  }
  if (opts.serving) db.serving();
  const secret = loadSecret(config);
  const metrics = new Metrics(config.metrics);
  db.observe = (kind, seconds, ok) =>
    metrics.dbSeconds.observe({ kind, result: ok ? 'ok' : 'failed' }, seconds);
  const ctx: CoreContext = {
    config,
    db,
    log,
    secret,
    paginator: new Paginator(secret),
    credentials: new CredentialCache(config.accounts.credential_cache_seconds * 1000),
    metrics,
  };
  const gate = new LoginGate(ctx);
  const files = new Files(ctx, await createBlobStore(config, config.data_dir));
  // The staging sweep finishes before any front end starts, so the first listener sees a clean dir.
  if (opts.background !== false) await files.startBackground();
  const apiKeys = new ApiKeys(ctx);
  const events = new Events(ctx, files.store);
  if (opts.background !== false) events.start();
  // The pool is read before the webhook queue's gauges run their queries, which it would count.
  metrics.gauge(
    'svc_db_pool_connections',
    'Database connections by state: total (open), idle, waiting (callers queued), max',
    ['state'],
    (set) => {
      for (const [state, n] of Object.entries(db.pool())) set({ state }, n);
    },
  );
  events.webhooks.watch(metrics);
  const readiness = new Readiness(db, files.store);
  const connections = new Connections(ctx);
  if (opts.background !== false) connections.start();
  const core: Core = {
    config,
    log,
    databaseKind: db.kind,
    users: new Users(ctx),
    groups: new Groups(ctx),
    permissions: new Permissions(ctx),
    notifications: new Notifications(ctx),
    apiKeys,
    publicKeys: new PublicKeys(ctx),
    sessions: new Sessions(ctx, gate),
    gate,
    history: new History(ctx),
    files,
    events,
    billing: new Billing(ctx),
    bundles: new Bundles(ctx, files),
    dav: { locks: new Locks(ctx), properties: new Properties(ctx, files.store) },
    namespace: {
      async mkdir(p, path) {
        await files.session(p).mkdir(path, { parents: true });
      },
    },
    metrics,
    connections,
    readiness: () => readiness.check(),
    drain: () => readiness.drain(),
    authenticateApiKey(key, iface, ip) {
      return gate.guarded(iface, async () => {
        const found = await apiKeys.lookup(key);
        if (!found)
          throw new GatewayError('not-authenticated/invalid-credentials', 'Invalid or expired API key');
        return gate.authenticateKey(found.row, found.owner, iface, ip);
      });
    },
    async close() {
      await connections.stop();
      await events.stop();
      await files.stop();
      await db.close();
    },
    site: new Site(ctx, db.kind, connections),
  };
  keepInternals(core, { db, files });
  return core;
}

/** The values filter[action] and filter[interface] take on GET /history (web admin History page). */
export { ACTION_NAMES, INTERFACE_NAMES } from './actions/history.ts';
