import { readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import ipaddr from 'ipaddr.js';

const here = path.dirname(fileURLToPath(import.meta.url));
/**
 * DEFAULT_CONFIG_FILE is the documented defaults file shipped with the gateway: beside src/ when
 * run from source, two levels up when run from the compiled dist/src/.
 */
export const DEFAULT_CONFIG_FILE =
  [path.resolve(here, '../config/default.yaml'), path.resolve(here, '../../config/default.yaml')].find((f) =>
    existsSync(f),
  ) ?? path.resolve(here, '../config/default.yaml');

/** ConfigError stops the start: its message names the setting and what it accepts. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

// A port is 0..65535 (0 picks a free port, for tests) or `off`, which disables the listener.
const port = z
  .union([z.literal('off'), z.coerce.number().int().min(0).max(65535)], {
    error: 'a port number from 0 to 65535, or off',
  })
  .transform((v) => (v === 'off' ? null : v));

const boolish = z.union(
  [
    z.boolean(),
    z.enum(['true', 'false', '1', '0', 'yes', 'no']).transform((v) => ['true', '1', 'yes'].includes(v)),
  ],
  { error: 'true or false' },
);

const ipOrCidr = z.string().refine(
  (v) => {
    try {
      // Only four-part decimal IPv4: ipaddr.js would read `10.0.0.010` as 10.0.0.8 (octal).
      const addr = v.split('/')[0]!;
      if (!addr.includes(':') && !ipaddr.IPv4.isValidFourPartDecimal(addr)) return false;
      if (v.includes('/')) ipaddr.parseCIDR(v);
      else ipaddr.parse(v);
      return true;
    } catch {
      return false;
    }
  },
  { message: 'an IPv4 or IPv6 address or CIDR range' },
);

const positiveInt = z.coerce.number().int().positive();
const nonNegativeInt = z.coerce.number().int().min(0);

// One outgoing webhook (issue 7): where to send file Actions, which ones, and how to sign them.
// SPEC's Action names a webhook may filter on; a misspelt one would silently never match. GET
// /history's filter[action] takes the same names (core/actions/history.ts).
export const ACTION_NAMES = [
  'create',
  'read',
  'update',
  'destroy',
  'move',
  'copy',
  'login',
  'failedlogin',
  'user_create',
  'user_update',
  'user_destroy',
  'group_create',
  'group_update',
  'group_destroy',
  'permission_create',
  'permission_destroy',
  'api_key_create',
  'api_key_update',
  'api_key_destroy',
  'public_key_create',
  'public_key_destroy',
  'bundle_create',
  'bundle_update',
  'bundle_destroy',
] as const;
const isHttpUrl = (v: string) => {
  try {
    const u = new URL(v);
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.hostname !== '';
  } catch {
    return false;
  }
};
const webhook = z.strictObject({
  url: z.string().refine(isHttpUrl, { message: 'an http(s) URL' }),
  folder: z.string().optional(),
  path: z.string().optional(),
  actions: z.array(z.enum(ACTION_NAMES)).optional(),
  method: z.enum(['POST', 'PUT', 'PATCH']).optional(),
  // Checked here, or every attempt would fail on a header Node refuses to send.
  headers: z
    .record(z.string(), z.string().regex(/^[^\r\n\0]*$/, 'header values are one line'))
    .refine((h) => Object.keys(h).every((name) => /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)), {
      message: "header names are HTTP tokens (letters, digits and !#$%&'*+-.^_`|~)",
    })
    .optional(),
  secret: z.string().optional(),
});

const schema = z.strictObject({
  data_dir: z.string().min(1),
  database: z.strictObject({
    url: z.string().refine((v) => v === '' || /^postgres(ql)?:\/\//.test(v), {
      message: 'empty (SQLite) or postgres://…',
    }),
    pool_size: positiveInt,
    sqlite_busy_timeout_ms: positiveInt,
  }),
  storage: z.strictObject({
    kind: z.enum(['local', 's3']),
    s3: z.strictObject({
      bucket: z.string(),
      endpoint: z.string(),
      public_endpoint: z
        .string()
        .refine((v) => v === '' || isHttpUrl(v), { message: 'empty or an http(s) URL' }),
      region: z.string(),
      force_path_style: boolish,
    }),
    reclaim_at_once_below_free_percent: z.coerce.number().min(0).max(100),
    durability: z.enum(['fsync', 'os']),
  }),
  bind: z.string().refine((v) => ipaddr.isValid(v), { message: 'an IP address' }),
  ports: z.strictObject({
    https: port,
    webdav: port,
    ftp: port,
    ftps: port,
    sftp: port,
    ftp_pasv: z
      .string()
      .regex(/^\d+-\d+$/, { message: 'a range first-last, such as 30000-30099' })
      .transform((v) => {
        const [first, last] = v.split('-').map(Number) as [number, number];
        return { first, last };
      })
      .refine((r) => r.first > 0 && r.first <= r.last && r.last <= 65535, {
        message: 'a range first-last with 0 < first <= last <= 65535',
      }),
  }),
  public_url: z
    .string()
    .refine((v) => v === '' || /^https?:\/\/[^/]+/.test(v), { message: 'an http(s) URL' }),
  admin: z.strictObject({
    username: z.string().min(1).max(50),
    password: z.string(),
  }),
  tls: z.strictObject({ cert: z.string(), key: z.string() }),
  secret: z.string(),
  log_level: z.enum(['error', 'warn', 'info', 'http', 'verbose', 'debug', 'silly']),
  log_access: z.enum(['info', 'debug', 'off']),
  metrics: z.strictObject({ allowed_ips: z.array(ipOrCidr), token: z.string() }),
  site: z.strictObject({ allowed_ips: z.array(ipOrCidr) }),
  proxy: z.strictObject({ trusted: z.array(ipOrCidr), header_timeout_ms: positiveInt }),
  accounts: z.strictObject({
    bcrypt_rounds: z.coerce.number().int().min(4).max(15),
    // At most 5 s: the time a change on another instance may take to apply is a promise (README).
    credential_cache_seconds: z.coerce.number().int().min(0).max(5),
    login_window_seconds: positiveInt,
  }),
  sessions: z.strictObject({
    // A fraction is allowed (0.05 is 3 s), so a test can watch a session expire.
    idle_timeout_minutes: z.coerce.number().positive(),
    reauthentication_attempts: positiveInt,
  }),
  lockout: z.strictObject({
    max_failures: positiveInt,
    window_minutes: positiveInt,
    duration_minutes: positiveInt,
    ip_max_failures: positiveInt,
    ip_window_minutes: positiveInt,
  }),
  ftp: z.strictObject({
    passive_address: z.string().refine((v) => v === '' || ipaddr.IPv4.isValidFourPartDecimal(v), {
      message: 'empty or an IPv4 address',
    }),
    active_mode: boolish,
    require_tls: boolish,
    require_session_reuse: boolish,
    idle_timeout_seconds: positiveInt,
    data_timeout_seconds: positiveInt,
    login_grace_seconds: positiveInt,
    passive_listeners_per_user: nonNegativeInt,
  }),
  sftp: z.strictObject({
    host_keys: z.array(z.string().min(1)),
    banner: z.string(),
    idle_timeout_seconds: positiveInt,
    login_grace_seconds: positiveInt,
    keepalive_interval_seconds: positiveInt,
    max_handles: positiveInt,
    max_inflight_requests: positiveInt,
  }),
  limits: z.strictObject({
    max_connections: nonNegativeInt,
    max_connections_per_address: nonNegativeInt,
    max_sessions_per_user: nonNegativeInt,
  }),
  shutdown: z.strictObject({
    grace_seconds: nonNegativeInt,
    unready_seconds: nonNegativeInt,
  }),
  uploads: z.strictObject({
    pending_hours: z.coerce.number().positive(),
  }),
  http: z.strictObject({
    idle_timeout_seconds: positiveInt,
    body_timeout_seconds: positiveInt,
  }),
  webhooks: z.array(webhook),
  events: z.strictObject({
    webhook_max_attempts: positiveInt,
    webhook_backoff_seconds: z.coerce.number().positive(),
    webhook_timeout_seconds: z.coerce.number().positive(),
    webhook_lease_grace_seconds: z.coerce.number().positive(),
    poll_interval_ms: positiveInt,
    retention_days: positiveInt,
    notification_batch_seconds: z.coerce.number().positive(),
  }),
  smtp: z.strictObject({
    url: z.string().refine((v) => v === '' || /^smtps?:\/\//.test(v), {
      message: 'empty (write .eml files) or smtp://… / smtps://…',
    }),
    from: z.string(),
  }),
  api: z.strictObject({
    max_body_bytes: positiveInt,
  }),
});

/** Config is the validated, typed settings object every part of the gateway reads. */
export type Config = z.infer<typeof schema>;
type Raw = Record<string, unknown>;

// Each SVC_* variable of DESIGN.md's runtime contract and the key it sets.
const envKeys: Record<string, string> = {
  SVC_DATA_DIR: 'data_dir',
  SVC_DATABASE_URL: 'database.url',
  SVC_STORAGE: 'storage.kind',
  SVC_S3_BUCKET: 'storage.s3.bucket',
  SVC_S3_ENDPOINT: 'storage.s3.endpoint',
  SVC_S3_PUBLIC_ENDPOINT: 'storage.s3.public_endpoint',
  SVC_S3_REGION: 'storage.s3.region',
  SVC_S3_FORCE_PATH_STYLE: 'storage.s3.force_path_style',
  SVC_DURABILITY: 'storage.durability',
  SVC_BIND: 'bind',
  SVC_HTTPS_PORT: 'ports.https',
  SVC_WEBDAV_PORT: 'ports.webdav',
  SVC_FTP_PORT: 'ports.ftp',
  SVC_FTPS_PORT: 'ports.ftps',
  SVC_FTP_PASV_PORTS: 'ports.ftp_pasv',
  SVC_SFTP_PORT: 'ports.sftp',
  SVC_FTP_PASV_ADDRESS: 'ftp.passive_address',
  SVC_FTP_REQUIRE_TLS: 'ftp.require_tls',
  SVC_SSH_HOST_KEY: 'sftp.host_keys',
  SVC_PUBLIC_URL: 'public_url',
  SVC_ADMIN_USERNAME: 'admin.username',
  SVC_ADMIN_PASSWORD: 'admin.password',
  SVC_TLS_CERT: 'tls.cert',
  SVC_TLS_KEY: 'tls.key',
  SVC_SECRET: 'secret',
  SVC_LOG_LEVEL: 'log_level',
  SVC_LOG_ACCESS: 'log_access',
  SVC_METRICS_ALLOWED_IPS: 'metrics.allowed_ips',
  SVC_METRICS_TOKEN: 'metrics.token',
  SVC_SHUTDOWN_UNREADY_SECONDS: 'shutdown.unready_seconds',
  SVC_MAX_CONNECTIONS: 'limits.max_connections',
  SVC_MAX_CONNECTIONS_PER_ADDRESS: 'limits.max_connections_per_address',
  SVC_MAX_SESSIONS_PER_USER: 'limits.max_sessions_per_user',
  SVC_SESSION_IDLE_TIMEOUT_MINUTES: 'sessions.idle_timeout_minutes',
  SVC_SHUTDOWN_GRACE_SECONDS: 'shutdown.grace_seconds',
  SVC_UPLOADS_PENDING_HOURS: 'uploads.pending_hours',
  SVC_CREDENTIAL_CACHE_SECONDS: 'accounts.credential_cache_seconds',
  SVC_LOGIN_WINDOW_SECONDS: 'accounts.login_window_seconds',
  SVC_SITE_ALLOWED_IPS: 'site.allowed_ips',
  SVC_TRUSTED_PROXIES: 'proxy.trusted',
  SVC_WEBHOOKS: 'webhooks',
  SVC_WEBHOOK_MAX_ATTEMPTS: 'events.webhook_max_attempts',
  SVC_WEBHOOK_BACKOFF_SECONDS: 'events.webhook_backoff_seconds',
  SVC_WEBHOOK_TIMEOUT_SECONDS: 'events.webhook_timeout_seconds',
  SVC_RETENTION_DAYS: 'events.retention_days',
  SVC_NOTIFICATION_BATCH_SECONDS: 'events.notification_batch_seconds',
  SVC_SMTP_URL: 'smtp.url',
  SVC_MAIL_FROM: 'smtp.from',
};

/** envValue turns one variable's text into the setting's value (lists and JSON documents). */
function envValue(name: string, key: string, value: string): unknown {
  if (key === 'site.allowed_ips' || key === 'proxy.trusted' || key === 'metrics.allowed_ips')
    return value.split(/[\s,]+/).filter(Boolean);
  // File names may hold spaces: only commas separate them.
  if (key === 'sftp.host_keys')
    return value
      .split(',')
      .map((f) => f.trim())
      .filter(Boolean);
  if (key === 'webhooks') {
    if (value.trim() === '') return [];
    try {
      return JSON.parse(value) as unknown;
    } catch {
      throw new ConfigError(`${name}: not a JSON array of {url, folder?, path?, actions?, …}`);
    }
  }
  return value;
}

function setPath(target: Raw, dotted: string, value: unknown): void {
  const keys = dotted.split('.');
  let node = target;
  for (const key of keys.slice(0, -1)) {
    if (typeof node[key] !== 'object' || node[key] === null) node[key] = {};
    node = node[key] as Raw;
  }
  node[keys[keys.length - 1]!] = value;
}

function merge(base: Raw, over: Raw): Raw {
  const out: Raw = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const b = out[k];
    out[k] =
      v && typeof v === 'object' && !Array.isArray(v) && b && typeof b === 'object' && !Array.isArray(b)
        ? merge(b as Raw, v as Raw)
        : v;
  }
  return out;
}

function readYaml(file: string): Raw {
  try {
    const doc: unknown = parseYaml(readFileSync(file, 'utf8'));
    if (doc === null || doc === undefined) return {};
    if (typeof doc !== 'object' || Array.isArray(doc)) throw new Error('the top level must be a mapping');
    return doc as Raw;
  } catch (err) {
    throw new ConfigError(`config file ${file}: ${(err as Error).message}`);
  }
}

/**
 * loadConfig reads config/default.yaml, then the file named by SVC_CONFIG (if any), then the
 * SVC_* environment variables, then `overrides` (tests), and validates the result.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: Raw = {}): Config {
  let raw = readYaml(DEFAULT_CONFIG_FILE);
  if (env.SVC_CONFIG) {
    if (!existsSync(env.SVC_CONFIG))
      throw new ConfigError(`SVC_CONFIG: file ${env.SVC_CONFIG} does not exist`);
    raw = merge(raw, readYaml(env.SVC_CONFIG));
  }
  const fromEnv: Raw = {};
  for (const [name, key] of Object.entries(envKeys)) {
    const value = env[name];
    if (value === undefined) continue;
    setPath(fromEnv, key, envValue(name, key, value));
  }
  raw = merge(merge(raw, fromEnv), overrides);
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    // Only a file (or a test's overrides) can hold a key the schema lacks: each variable has its key.
    const from = env.SVC_CONFIG ? ` in config file ${env.SVC_CONFIG} (SVC_CONFIG)` : '';
    const lines = parsed.error.issues.flatMap((issue) => {
      const key = issue.path.join('.');
      // The variable that sets this key or a section holding it (SVC_WEBHOOKS for webhooks.0.url).
      const envName = Object.entries(envKeys).find(([, k]) => key === k || key.startsWith(`${k}.`))?.[0];
      if (issue.code === 'unrecognized_keys') {
        const where = envName && env[envName] !== undefined ? ` in ${envName}` : from;
        return issue.keys.map(
          (k) => `unknown setting ${key ? `${key}.` : ''}${k}${where}: see config/default.yaml`,
        );
      }
      return [`setting ${key}${envName ? ` (${envName})` : ''}: ${issue.message}`];
    });
    throw new ConfigError(`invalid configuration:\n  ${lines.join('\n  ')}`);
  }
  const config = parsed.data;
  config.data_dir = path.resolve(config.data_dir);
  return config;
}
