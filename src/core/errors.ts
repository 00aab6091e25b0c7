/**
 * The one catalogue of SPEC's error types (SPEC "Errors"). The core throws GatewayError and
 * nothing else on purpose; each front end maps families (and a few types) to its own replies in
 * protocols/<p>/errors.ts.
 */

/** ErrorFamily is the part of an error type before the slash. */
export type ErrorFamily =
  | 'bad-request'
  | 'not-authenticated'
  | 'not-authorized'
  | 'not-found'
  | 'processing-failure'
  | 'rate-limited'
  | 'service-unavailable'
  | 'site-configuration';

// SPEC's lists, verbatim. A type the core raises must be here; titles are derived below.
const catalogue = {
  'bad-request': [
    'agent-upgrade-required',
    'attachment-too-large',
    'cannot-download-directory',
    'cant-move-with-multiple-locations',
    'datetime-parse',
    'destination-same',
    'folder-must-not-be-a-file',
    'invalid-body',
    'invalid-cursor',
    'invalid-cursor-type-for-sort',
    'invalid-etags',
    'invalid-filter-alias-combination',
    'invalid-filter-combination',
    'invalid-filter-field',
    'invalid-filter-param',
    'invalid-filter-param-value',
    'invalid-input-encoding',
    'invalid-interface',
    'invalid-oauth-provider',
    'invalid-path',
    'invalid-return-to-url',
    'invalid-upload-offset',
    'invalid-upload-part-gap',
    'invalid-upload-part-size',
    'method-not-allowed',
    'no-valid-input-params',
    'operation-on-non-scim-resource',
    'part-number-too-large',
    'reauthentication-needed-fields',
    'request-param-path-cannot-have-trailing-whitespace',
    'request-params-contain-invalid-character',
    'request-params-invalid',
    'request-params-required',
    'search-all-on-child-path',
    'unsupported-currency',
    'unsupported-http-response-format',
    'unsupported-media-type',
    'user-id-invalid',
    'user-id-on-user-endpoint',
    'user-required',
  ],
  'not-authenticated': [
    'authentication-required',
    'bundle-registration-code-failed',
    'files-agent-token-failed',
    'inbox-registration-code-failed',
    'invalid-credentials',
    'invalid-oauth',
    'invalid-or-expired-code',
    'invalid-username-or-password',
    'locked-out',
    'lockout-region-mismatch',
    'one-time-password-incorrect',
    'two-factor-authentication-error',
    'two-factor-authentication-setup-expired',
  ],
  'not-authorized': [
    'api-key-is-disabled',
    'api-key-is-path-restricted',
    'api-key-only-for-desktop-app',
    'api-key-only-for-mobile-app',
    'api-key-only-for-office-integration',
    'billing-permission-required',
    'bundle-maximum-uses-reached',
    'cannot-login-while-using-key',
    'cant-act-for-other-user',
    'contact-admin-for-password-change-help',
    'files-agent-failed-authorization',
    'folder-admin-or-billing-permission-required',
    'folder-admin-permission-required',
    'full-permission-required',
    'history-permission-required',
    'insufficient-permission-for-params',
    'must-authenticate-with-api-key',
    'need-admin-permission-for-inbox',
    'non-admins-must-query-by-folder-or-path',
    'not-allowed-to-create-bundle',
    'password-change-not-required',
    'password-change-required',
    'read-only-session',
    'read-permission-required',
    'reauthentication-failed',
    'reauthentication-failed-final',
    'reauthentication-needed-action',
    'recaptcha-failed',
    'self-managed-required',
    'site-admin-required',
    'site-files-are-immutable',
    'two-factor-authentication-required',
    'user-id-without-site-admin',
    'write-and-bundle-permission-required',
    'write-permission-required',
    'zip-download-ip-mismatch',
  ],
  'not-found': [
    'api-key-not-found',
    'bundle-path-not-found',
    'bundle-registration-not-found',
    'code-not-found',
    'file-not-found',
    'file-upload-not-found',
    'folder-not-found',
    'group-not-found',
    'inbox-not-found',
    'nested-not-found',
    'plan-not-found',
    'site-not-found',
    'user-not-found',
    // Extension: the resources DESIGN.md adds to SPEC's (permissions, notifications, sessions).
    'permission-not-found',
    'notification-not-found',
    'public-key-not-found',
    'bundle-not-found',
    'resource-not-found',
    'action-notification-export-not-found',
    'action-webhook-failure-not-found',
    'invoice-not-found',
    'payment-not-found',
    'connection-not-found',
  ],
  'processing-failure': [
    'already-completed',
    'automation-cannot-be-run-manually',
    'bundle-only-allows-previews',
    'bundle-operation-requires-subfolder',
    'could-not-create-parent',
    'destination-exists',
    'destination-folder-limited',
    'destination-parent-conflict',
    'destination-parent-does-not-exist',
    'expired-private-key',
    'expired-public-key',
    'export-failure',
    'export-not-ready',
    'failed-to-change-password',
    'file-locked',
    'file-not-uploaded',
    'file-pending-processing',
    'file-too-big-to-decrypt',
    'file-too-big-to-encrypt',
    'file-uploaded-to-wrong-region',
    'filename-too-long',
    'folder-locked',
    'folder-not-empty',
    'history-unavailable',
    'invalid-bundle-code',
    'invalid-file-type',
    'invalid-filename',
    'invalid-range',
    'model-save-error',
    'multiple-processing-errors',
    'path-too-long',
    'recipient-already-shared',
    'remote-server-error',
    'resource-locked',
    'subfolder-locked',
    'two-factor-authentication-code-already-sent',
    'two-factor-authentication-country-blacklisted',
    'two-factor-authentication-general-error',
    'two-factor-authentication-unsubscribed-recipient',
    'updates-not-allowed-for-remotes',
    // Extension: the storage the bytes go to (local disk, staging, S3) is full or over its quota
    // (ENOSPC, EDQUOT, S3's 507). SPEC has no type for it; each front end answers its own
    // "insufficient storage" (REST and WebDAV 507, FTP 452, SFTP a FAILURE saying so).
    'insufficient-storage',
  ],
  'rate-limited': [
    'duplicate-share-recipient',
    'reauthentication-rate-limited',
    'too-many-concurrent-requests',
    'too-many-login-attempts',
    'too-many-requests',
    'too-many-shares',
  ],
  'service-unavailable': [
    'agent-unavailable',
    'automations-unavailable',
    'uploads-unavailable',
    // Extension: the login gate cannot answer (the database is down); never a wrong password.
    'login-unavailable',
    // Extension: the database did not answer (connection refused, reset or timed out, SQLite
    // busy or failing I/O). Transient: REST and WebDAV add Retry-After.
    'database-unavailable',
  ],
  'site-configuration': [
    'account-already-exists',
    'account-overdue',
    'no-account-for-site',
    'site-was-removed',
    'trial-expired',
    'trial-locked',
    'user-requests-enabled-required',
  ],
} as const satisfies Record<ErrorFamily, readonly string[]>;

type Catalogue = typeof catalogue;
/** ErrorType is one of SPEC's error types, such as `not-found/user-not-found`. */
export type ErrorType = { [F in ErrorFamily]: `${F}/${Catalogue[F][number]}` }[ErrorFamily];

/** errorTypes lists every ErrorType, for the exhaustive mapping tests of each front end. */
export const errorTypes: readonly ErrorType[] = Object.entries(catalogue).flatMap(([family, types]) =>
  types.map((t) => `${family}/${t}` as ErrorType),
);

// Titles read as the type does ("Site Admin Required"), with the few acronyms spelled right.
const acronyms: Record<string, string> = {
  ip: 'IP',
  scim: 'SCIM',
  oauth: 'OAuth',
  http: 'HTTP',
  url: 'URL',
  api: 'API',
};
/** errorTitle is the short human title SPEC's error object carries for a type. */
export function errorTitle(type: ErrorType): string {
  return type
    .slice(type.indexOf('/') + 1)
    .split('-')
    .map((w) => acronyms[w] ?? w.charAt(0).toUpperCase() + w.slice(1))
    .join(' ');
}

/** ModelErrors are the field-level messages of a `processing-failure/model-save-error`. */
export interface ModelErrors {
  /** every message, in the site's language */
  errors: string[];
  /** field name → messages */
  model_errors: Record<string, string[]>;
  /** field name → translation keys (the English message where there is no key) */
  model_error_keys: Record<string, string[]>;
}

/** GatewayError is the only error the core throws on purpose; its message may reach a client. */
export class GatewayError extends Error {
  readonly family: ErrorFamily;
  readonly title: string;
  constructor(
    readonly type: ErrorType,
    message?: string,
    readonly model?: ModelErrors,
  ) {
    super(message ?? errorTitle(type));
    this.name = 'GatewayError';
    this.family = type.slice(0, type.indexOf('/')) as ErrorFamily;
    this.title = errorTitle(type);
  }
}

/**
 * LockedError is `processing-failure/file-locked` from a WebDAV lock whose token the request did
 * not submit: `lockRoot` is the locked resource as the client sees it ('' for its root, or a lock
 * above it), which WebDAV names in its `lock-token-submitted` condition (RFC 4918 §16).
 */
export class LockedError extends GatewayError {
  constructor(
    readonly lockRoot: string,
    until: Date,
  ) {
    super(
      'processing-failure/file-locked',
      `/${lockRoot} is locked by a WebDAV lock until ${until.toISOString()}`,
    );
  }
}

/** modelSaveError builds a `processing-failure/model-save-error` from field → message pairs. */
export function modelSaveError(
  fields: Record<string, string[]>,
  keys?: Record<string, string[]>,
): GatewayError {
  const messages = Object.entries(fields).flatMap(([field, msgs]) =>
    msgs.map((m) => `${humanField(field)} ${m}`),
  );
  return new GatewayError('processing-failure/model-save-error', messages.join(', '), {
    errors: messages,
    model_errors: fields,
    model_error_keys: keys ?? fields,
  });
}

function humanField(field: string): string {
  const words = field.replace(/_/g, ' ');
  return words.charAt(0).toUpperCase() + words.slice(1);
}

// Faults of what the core stands on (disk, object store, database), classified once here so each
// front end's table answers them in its own terms instead of as a bug (issue 12).

/** errorCode is the system or driver code of an error, or of the driver error it wraps. */
function errorCode(err: unknown): string | undefined {
  const e = err as { code?: unknown; driverError?: { code?: unknown }; cause?: { code?: unknown } } | null;
  const code = e?.driverError?.code ?? e?.code ?? e?.cause?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * isStorageFull tells a write refused for want of space: ENOSPC or EDQUOT from the local disk or
 * staging, SQLITE_FULL, or an S3-compatible store's 507 / storage-full code (MinIO's
 * XMinioStorageFull, whose message reads "Storage backend has reached its minimum free drive
 * threshold").
 */
export function isStorageFull(err: unknown): boolean {
  if (err instanceof GatewayError) return err.type === 'processing-failure/insufficient-storage';
  const code = errorCode(err);
  if (code === 'ENOSPC' || code === 'EDQUOT' || code === 'SQLITE_FULL') return true;
  const s3 = err as { name?: unknown; Code?: unknown; $metadata?: { httpStatusCode?: number } } | null;
  return (
    s3?.$metadata?.httpStatusCode === 507 ||
    s3?.name === 'XMinioStorageFull' ||
    s3?.Code === 'XMinioStorageFull'
  );
}

/** storageFull is the core's error for a write the storage had no room for. */
export function storageFull(): GatewayError {
  return new GatewayError(
    'processing-failure/insufficient-storage',
    'The storage is full: the upload was not stored and the file is unchanged',
  );
}

/** classifyStorageError turns a full storage into `insufficient-storage`; anything else is returned as is. */
export function classifyStorageError(err: unknown): unknown {
  return !(err instanceof GatewayError) && isStorageFull(err) ? storageFull() : err;
}

// node-postgres and its pool report a lost or refused connection with these system codes or
// messages; SQLSTATE class 08 is "connection exception", 57P01-03 a server shutting down or
// starting, 53300 too many connections.
const unreachableCodes = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  '57P01',
  '57P02',
  '57P03',
  '53300',
]);
const unreachableMessages =
  /Connection terminated|timeout exceeded when trying to connect|connection error and is not queryable|Client was closed and is not queryable|terminating connection/i;

/**
 * databaseUnreachableCause names why the database did not answer ("ECONNREFUSED",
 * "SQLITE_BUSY", …), or null for any other error (a constraint, a bug).
 */
export function databaseUnreachableCause(err: unknown): string | null {
  if (err instanceof GatewayError) return null;
  const code = errorCode(err);
  if (code) {
    if (unreachableCodes.has(code) || code.startsWith('08')) return code;
    // SQLite: another process holds the file past the busy timeout, or the file cannot be read,
    // written or opened (a failing disk, a file made read-only).
    if (/^SQLITE_(BUSY|LOCKED|IOERR|CANTOPEN|READONLY)/.test(code)) return code;
  }
  const message = err instanceof Error ? err.message : String(err);
  const m = unreachableMessages.exec(message);
  if (m) return m[0];
  // Node 20 reports a refused connection to a name with several addresses as an AggregateError.
  if (err instanceof AggregateError)
    for (const inner of err.errors as unknown[]) {
      const cause = databaseUnreachableCause(inner);
      if (cause) return cause;
    }
  return null;
}

/**
 * classifyDatabaseError turns a database that did not answer into
 * `service-unavailable/database-unavailable` and a database on a full disk into
 * `insufficient-storage`; anything else is returned as is.
 */
export function classifyDatabaseError(err: unknown): unknown {
  if (err instanceof GatewayError) return err;
  if (isStorageFull(err)) return storageFull();
  if (databaseUnreachableCause(err))
    return new GatewayError(
      'service-unavailable/database-unavailable',
      'The service cannot reach its database; try again in a few seconds',
    );
  return err;
}
