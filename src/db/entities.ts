/**
 * Entity schemas (not decorators: tsx/esbuild emit no decorator metadata, so every column names
 * its type). Column names are SPEC's field names. Times are stored as epoch milliseconds in a
 * bigint column on both databases, and sizes as bigint: the transformers below hand the rest of
 * the code numbers and Dates whichever database answered (pg returns bigint as a string).
 */
import { EntitySchema, type ValueTransformer } from 'typeorm';

/** bigintNumber reads a bigint column as a JavaScript number (sizes and ids stay below 2^53). */
export const bigintNumber: ValueTransformer = {
  to: (v: unknown) => v,
  from: (v: unknown) => (v === null || v === undefined ? v : Number(v)),
};

/** epochTime stores a Date as epoch milliseconds and reads it back as a Date. */
export const epochTime: ValueTransformer = {
  to: (v: unknown) => (v instanceof Date ? v.getTime() : v),
  from: (v: unknown) => (v === null || v === undefined ? v : new Date(Number(v))),
};

const time = (nullable = false) => ({ type: 'bigint', nullable, transformer: epochTime }) as const;

/** UserRow is a user account, SPEC's User plus DESIGN.md's extension flags. */
export interface UserRow {
  id: number;
  username: string;
  /** lower-cased username: usernames are unique and looked up case-insensitively */
  username_key: string;
  password_hash: string | null;
  name: string;
  email: string;
  notes: string;
  ftp_permission: boolean;
  web_permission: boolean;
  sftp_permission: boolean;
  dav_permission: boolean;
  restapi_permission: boolean;
  attachments_permission: boolean;
  self_managed: boolean;
  require_password_change: boolean;
  site_admin: boolean;
  allowed_ips: string;
  user_root: string;
  failed_logins: number;
  failed_login_window_start: Date | null;
  locked_until: Date | null;
  last_login_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export const UserEntity = new EntitySchema<UserRow>({
  name: 'User',
  tableName: 'users',
  columns: {
    id: { type: 'integer', primary: true, generated: 'increment' },
    username: { type: 'varchar', length: 50 },
    username_key: { type: 'varchar', length: 50, unique: true },
    password_hash: { type: 'varchar', length: 100, nullable: true },
    name: { type: 'varchar', length: 50, default: '' },
    email: { type: 'varchar', length: 50, default: '' },
    notes: { type: 'text', default: '' },
    ftp_permission: { type: 'boolean', default: true },
    web_permission: { type: 'boolean', default: true },
    sftp_permission: { type: 'boolean', default: true },
    dav_permission: { type: 'boolean', default: true },
    restapi_permission: { type: 'boolean', default: true },
    attachments_permission: { type: 'boolean', default: false },
    self_managed: { type: 'boolean', default: true },
    require_password_change: { type: 'boolean', default: false },
    site_admin: { type: 'boolean', default: false },
    allowed_ips: { type: 'text', default: '' },
    user_root: { type: 'varchar', length: 250, default: '' },
    failed_logins: { type: 'integer', default: 0 },
    failed_login_window_start: time(true),
    locked_until: time(true),
    last_login_at: time(true),
    created_at: time(),
    updated_at: time(),
  },
});

/** GroupRow is a group of users. */
export interface GroupRow {
  id: number;
  name: string;
  notes: string;
  created_at: Date;
}

export const GroupEntity = new EntitySchema<GroupRow>({
  name: 'Group',
  tableName: 'groups',
  columns: {
    id: { type: 'integer', primary: true, generated: 'increment' },
    name: { type: 'varchar', length: 50 },
    notes: { type: 'text', default: '' },
    created_at: time(),
  },
});

/** MembershipRow says user_id belongs to group_id; both sides (group_ids, user_ids) read it. */
export interface MembershipRow {
  group_id: number;
  user_id: number;
}

export const MembershipEntity = new EntitySchema<MembershipRow>({
  name: 'Membership',
  tableName: 'group_memberships',
  columns: {
    group_id: { type: 'integer', primary: true },
    user_id: { type: 'integer', primary: true },
  },
});

/** PermissionLevel is SPEC's four levels plus DESIGN.md's Folder Admin `admin`. */
export type PermissionLevel = 'full' | 'readonly' | 'writeonly' | 'previewonly' | 'admin';

/** PermissionRow grants one user or one group one level on one folder path and below. */
export interface PermissionRow {
  id: number;
  path: string;
  permission: PermissionLevel;
  user_id: number | null;
  group_id: number | null;
  created_at: Date;
}

export const PermissionEntity = new EntitySchema<PermissionRow>({
  name: 'Permission',
  tableName: 'permissions',
  columns: {
    id: { type: 'integer', primary: true, generated: 'increment' },
    path: { type: 'varchar', length: 5000 },
    permission: { type: 'varchar', length: 20 },
    user_id: { type: 'integer', nullable: true },
    group_id: { type: 'integer', nullable: true },
    created_at: time(),
  },
});

/** NotificationRow subscribes a user to e-mail about changes in a folder path and below. */
export interface NotificationRow {
  id: number;
  path: string;
  user_id: number;
  created_at: Date;
}

export const NotificationEntity = new EntitySchema<NotificationRow>({
  name: 'Notification',
  tableName: 'notifications',
  columns: {
    id: { type: 'integer', primary: true, generated: 'increment' },
    path: { type: 'varchar', length: 5000 },
    user_id: { type: 'integer' },
    created_at: time(),
  },
});

/** ApiKeyRow is an API key; only a SHA-256 digest of the key is kept (the key is shown once). */
export interface ApiKeyRow {
  id: number;
  user_id: number | null;
  key_digest: string;
  /** the key's first characters, so a user can tell keys apart without the secret */
  key_prefix: string;
  descriptive_label: string;
  description: string;
  name: string;
  permission_set: string;
  platform: string;
  created_at: Date;
  expires_at: Date | null;
  last_use_at: Date | null;
}

export const ApiKeyEntity = new EntitySchema<ApiKeyRow>({
  name: 'ApiKey',
  tableName: 'api_keys',
  columns: {
    id: { type: 'integer', primary: true, generated: 'increment' },
    user_id: { type: 'integer', nullable: true },
    key_digest: { type: 'varchar', length: 64, unique: true },
    key_prefix: { type: 'varchar', length: 16 },
    descriptive_label: { type: 'varchar', length: 100 },
    description: { type: 'text', default: '' },
    name: { type: 'varchar', length: 100, default: '' },
    permission_set: { type: 'varchar', length: 30, default: 'full' },
    platform: { type: 'varchar', length: 50, default: '' },
    created_at: time(),
    expires_at: time(true),
    last_use_at: time(true),
  },
});

/** SessionRow is a REST session; the id handed to the client is a secret, so only its digest is kept. */
export interface SessionRow {
  id_digest: string;
  user_id: number;
  ip: string;
  interface: string;
  reauthentication_failures: number;
  created_at: Date;
  last_active_at: Date;
}

export const SessionEntity = new EntitySchema<SessionRow>({
  name: 'Session',
  tableName: 'sessions',
  columns: {
    id_digest: { type: 'varchar', length: 64, primary: true },
    user_id: { type: 'integer' },
    ip: { type: 'varchar', length: 45, default: '' },
    interface: { type: 'varchar', length: 20 },
    reauthentication_failures: { type: 'integer', default: 0 },
    created_at: time(),
    last_active_at: time(),
  },
});

/**
 * ClientLoginRow is when a `login` Action was last recorded for a client that sends its password
 * with every request (WebDAV): one row per user, client IP and interface, so every instance
 * records one `login` per window (accounts.login_window_seconds), not one per request.
 */
export interface ClientLoginRow {
  user_id: number;
  ip: string;
  interface: string;
  login_at: Date;
}

export const ClientLoginEntity = new EntitySchema<ClientLoginRow>({
  name: 'ClientLogin',
  tableName: 'client_logins',
  columns: {
    user_id: { type: 'integer', primary: true },
    ip: { type: 'varchar', length: 45, primary: true },
    interface: { type: 'varchar', length: 20, primary: true },
    login_at: time(),
  },
});

/** ActionRow is one audited operation (SPEC's Action). user_id is kept after the user is deleted. */
export interface ActionRow {
  id: number;
  when: Date;
  action: string;
  path: string;
  source: string;
  destination: string;
  display: string;
  ip: string;
  user_id: number | null;
  username: string;
  interface: string;
  failure_type: string;
  targets: string;
}

export const ActionEntity = new EntitySchema<ActionRow>({
  name: 'Action',
  tableName: 'actions',
  columns: {
    id: { type: 'bigint', primary: true, generated: 'increment', transformer: bigintNumber },
    when: time(),
    action: { type: 'varchar', length: 30 },
    path: { type: 'varchar', length: 5000, default: '' },
    source: { type: 'varchar', length: 5000, default: '' },
    destination: { type: 'varchar', length: 5000, default: '' },
    display: { type: 'text', default: '' },
    ip: { type: 'varchar', length: 45, default: '' },
    user_id: { type: 'integer', nullable: true },
    username: { type: 'varchar', length: 50, default: '' },
    interface: { type: 'varchar', length: 20, default: '' },
    failure_type: { type: 'varchar', length: 50, default: '' },
    targets: { type: 'text', default: '[]' },
  },
});

/** FileRow is one file or folder of the site tree; bytes live in the blob store under blob_id. */
export interface FileRow {
  id: number;
  path: string;
  parent: string;
  name: string;
  type: 'file' | 'directory';
  size: number | null;
  mtime: Date;
  md5: string | null;
  crc32: string | null;
  blob_id: string | null;
}

export const FileEntity = new EntitySchema<FileRow>({
  name: 'File',
  tableName: 'files',
  columns: {
    id: { type: 'integer', primary: true, generated: 'increment' },
    path: { type: 'varchar', length: 600, unique: true },
    parent: { type: 'varchar', length: 600 },
    name: { type: 'varchar', length: 300 },
    type: { type: 'varchar', length: 10 },
    size: { type: 'bigint', nullable: true, transformer: bigintNumber },
    mtime: time(),
    md5: { type: 'varchar', length: 32, nullable: true },
    crc32: { type: 'varchar', length: 8, nullable: true },
    blob_id: { type: 'varchar', length: 64, nullable: true },
  },
});

/** UploadRow is a multi-step REST upload in progress (SPEC "Upload lifecycle"), shared by every instance. */
export interface UploadRow {
  ref: string;
  path: string;
  user_id: number | null;
  api_key_id: number | null;
  interface: string;
  ip: string;
  /** the blob the finished file will be */
  blob_id: string;
  /** the object store's multipart upload id, when parts go straight to the store */
  store_upload_id: string | null;
  /** bytes of the old content kept at the start (SPEC `restart`) */
  restart: number;
  /** the old content's blob, captured at start so an overwrite meanwhile cannot change it */
  restart_blob_id: string | null;
  /** parts reserved to copy the kept bytes; client part n is part n + reserved_parts */
  reserved_parts: number;
  created_at: Date;
  expires_at: Date;
}

export const UploadEntity = new EntitySchema<UploadRow>({
  name: 'Upload',
  tableName: 'uploads',
  columns: {
    ref: { type: 'varchar', length: 64, primary: true },
    path: { type: 'varchar', length: 600 },
    user_id: { type: 'integer', nullable: true },
    api_key_id: { type: 'integer', nullable: true },
    interface: { type: 'varchar', length: 20 },
    ip: { type: 'varchar', length: 45, default: '' },
    blob_id: { type: 'varchar', length: 64 },
    store_upload_id: { type: 'varchar', length: 1024, nullable: true },
    restart: { type: 'bigint', default: 0, transformer: bigintNumber },
    restart_blob_id: { type: 'varchar', length: 64, nullable: true },
    reserved_parts: { type: 'integer', default: 0 },
    created_at: time(),
    expires_at: time(),
  },
});

/**
 * PendingVersionRow is what a cut upload kept (issue 20): the bytes that arrived, in a blob this
 * row owns, seen and resumable only by `user_id`, until `expires_at`.
 */
export interface PendingVersionRow {
  id: string;
  user_id: number;
  /** the site path the upload writes */
  path: string;
  parent: string;
  blob_id: string;
  size: number;
  /** the interface the bytes last came in on */
  interface: string;
  updated_at: Date;
  expires_at: Date;
}

export const PendingVersionEntity = new EntitySchema<PendingVersionRow>({
  name: 'PendingVersion',
  tableName: 'pending_versions',
  columns: {
    id: { type: 'varchar', length: 32, primary: true },
    user_id: { type: 'integer' },
    path: { type: 'varchar', length: 600 },
    parent: { type: 'varchar', length: 600 },
    blob_id: { type: 'varchar', length: 64 },
    size: { type: 'bigint', transformer: bigintNumber },
    interface: { type: 'varchar', length: 20 },
    updated_at: time(),
    expires_at: time(),
  },
});

/** UploadPartRow is one part the gateway itself received (local store), kept as a blob. */
export interface UploadPartRow {
  ref: string;
  part_number: number;
  blob_id: string;
  size: number;
  md5: string;
  crc32: string;
}

export const UploadPartEntity = new EntitySchema<UploadPartRow>({
  name: 'UploadPart',
  tableName: 'upload_parts',
  columns: {
    ref: { type: 'varchar', length: 64, primary: true },
    part_number: { type: 'integer', primary: true },
    blob_id: { type: 'varchar', length: 64 },
    size: { type: 'bigint', transformer: bigintNumber },
    md5: { type: 'varchar', length: 32 },
    crc32: { type: 'varchar', length: 8 },
  },
});

/**
 * BlobGarbageRow is a blob no longer wanted, or a new blob not committed yet: the collector deletes
 * it once no row refers to it and no live lease holds it.
 */
export interface BlobGarbageRow {
  blob_id: string;
  since: Date;
}

export const BlobGarbageEntity = new EntitySchema<BlobGarbageRow>({
  name: 'BlobGarbage',
  tableName: 'blob_garbage',
  columns: {
    blob_id: { type: 'varchar', length: 64, primary: true },
    since: time(),
  },
});

/**
 * BlobLeaseRow is a reader's (or a writer's) hold on a blob: while it is live (expires_at in the
 * future) the collector keeps the blob even when it is garbage. Its instance renews it while the
 * stream is open.
 */
export interface BlobLeaseRow {
  id: string;
  blob_id: string;
  /** the instance (process) holding it, for logs and diagnosis */
  instance: string;
  expires_at: Date;
}

export const BlobLeaseEntity = new EntitySchema<BlobLeaseRow>({
  name: 'BlobLease',
  tableName: 'blob_leases',
  columns: {
    id: { type: 'varchar', length: 32, primary: true },
    blob_id: { type: 'varchar', length: 64 },
    instance: { type: 'varchar', length: 32 },
    expires_at: time(),
  },
});

/** PublicKeyRow is an SSH public key a user logs in with over SFTP, kept in OpenSSH's one-line form. */
export interface PublicKeyRow {
  id: number;
  user_id: number;
  title: string;
  /** `type base64 [comment]`, as OpenSSH writes it in authorized_keys */
  public_key: string;
  /** `SHA256:<base64 without padding>` of the key blob, as `ssh-keygen -l` prints it */
  fingerprint: string;
  created_at: Date;
}

export const PublicKeyEntity = new EntitySchema<PublicKeyRow>({
  name: 'PublicKey',
  tableName: 'public_keys',
  columns: {
    id: { type: 'integer', primary: true, generated: 'increment' },
    user_id: { type: 'integer' },
    title: { type: 'varchar', length: 100, default: '' },
    public_key: { type: 'text' },
    fingerprint: { type: 'varchar', length: 64 },
    created_at: time(),
  },
});

/** DavLockRow is a WebDAV lock (RFC 4918 class 2), shared by every instance. */
export interface DavLockRow {
  /** the lock token, `urn:uuid:…` */
  token: string;
  /** the site path of the lock root */
  path: string;
  depth: '0' | 'infinity';
  scope: 'exclusive' | 'shared';
  /** the client's DAV:owner element as XML ('' when it sent none) */
  owner: string;
  user_id: number | null;
  timeout_seconds: number;
  created_at: Date;
  expires_at: Date;
}

export const DavLockEntity = new EntitySchema<DavLockRow>({
  name: 'DavLock',
  tableName: 'dav_locks',
  columns: {
    token: { type: 'varchar', length: 64, primary: true },
    path: { type: 'varchar', length: 600 },
    depth: { type: 'varchar', length: 10 },
    scope: { type: 'varchar', length: 10 },
    owner: { type: 'text', default: '' },
    user_id: { type: 'integer', nullable: true },
    timeout_seconds: { type: 'integer' },
    created_at: time(),
    expires_at: time(),
  },
});

/** DavPropertyRow is one WebDAV dead property of a file or folder, by site path. */
export interface DavPropertyRow {
  id: number;
  path: string;
  namespace: string;
  name: string;
  /** the property's content as XML (children carry their own xmlns) */
  value: string;
}

export const DavPropertyEntity = new EntitySchema<DavPropertyRow>({
  name: 'DavProperty',
  tableName: 'dav_properties',
  columns: {
    id: { type: 'integer', primary: true, generated: 'increment' },
    path: { type: 'varchar', length: 600 },
    namespace: { type: 'varchar', length: 1024 },
    name: { type: 'varchar', length: 255 },
    value: { type: 'text' },
  },
});

/** WebhookDeliveryRow is one Action queued for one webhook target, until delivered or given up. */
export interface WebhookDeliveryRow {
  id: number;
  action_id: number;
  created_at: Date;
  url: string;
  method: string;
  /** JSON object of the headers sent, signature included (the secret itself is never stored) */
  request_headers: string;
  body: string;
  path: string;
  folder: string;
  status: 'pending' | 'succeeded' | 'failed';
  attempts: number;
  next_attempt_at: Date;
  /** while an instance delivers it: until when its claim holds, and the claim's token */
  locked_until: Date | null;
  lease: string | null;
}

export const WebhookDeliveryEntity = new EntitySchema<WebhookDeliveryRow>({
  name: 'WebhookDelivery',
  tableName: 'webhook_deliveries',
  columns: {
    id: { type: 'bigint', primary: true, generated: 'increment', transformer: bigintNumber },
    action_id: { type: 'bigint', transformer: bigintNumber },
    created_at: time(),
    url: { type: 'varchar', length: 2000, default: '' },
    method: { type: 'varchar', length: 10, default: '' },
    request_headers: { type: 'text', default: '' },
    body: { type: 'text', default: '' },
    path: { type: 'varchar', length: 5000, default: '' },
    folder: { type: 'varchar', length: 5000, default: '' },
    status: { type: 'varchar', length: 20, default: '' },
    attempts: { type: 'integer', default: 0 },
    next_attempt_at: time(),
    locked_until: time(true),
    lease: { type: 'varchar', length: 40, nullable: true },
  },
});

/** WebhookAttemptRow is one delivery attempt: SPEC's ActionNotificationExportResult. */
export interface WebhookAttemptRow {
  id: number;
  delivery_id: number;
  created_at: Date;
  status: number;
  message: string;
  success: boolean;
  request_headers: string;
  request_method: string;
  request_url: string;
  path: string;
  folder: string;
}

export const WebhookAttemptEntity = new EntitySchema<WebhookAttemptRow>({
  name: 'WebhookAttempt',
  tableName: 'webhook_attempts',
  columns: {
    id: { type: 'bigint', primary: true, generated: 'increment', transformer: bigintNumber },
    delivery_id: { type: 'bigint', transformer: bigintNumber },
    created_at: time(),
    status: { type: 'integer', default: 0 },
    message: { type: 'text', default: '' },
    success: { type: 'boolean', default: false },
    request_headers: { type: 'text', default: '' },
    request_method: { type: 'varchar', length: 10, default: '' },
    request_url: { type: 'varchar', length: 2000, default: '' },
    path: { type: 'varchar', length: 5000, default: '' },
    folder: { type: 'varchar', length: 5000, default: '' },
  },
});

/** ExportRow is an ActionNotificationExport: its query (JSON), state and, when ready, its CSV blob. */
export interface ExportRow {
  id: number;
  user_id: number | null;
  created_at: Date;
  status: 'building' | 'ready' | 'failed';
  query: string;
  /** the newest attempt id when the build ran: the results endpoint shows the same rows */
  snapshot_id: number;
  result_count: number;
  message: string;
  /** the blob holding the CSV once ready (in the site's blob store), and its size in bytes */
  blob_id: string | null;
  csv_size: number;
  /** while an instance builds it: until when its claim holds, and the claim's token */
  locked_until: Date | null;
  lease: string | null;
}

export const ExportEntity = new EntitySchema<ExportRow>({
  name: 'ActionNotificationExport',
  tableName: 'action_notification_exports',
  columns: {
    id: { type: 'bigint', primary: true, generated: 'increment', transformer: bigintNumber },
    user_id: { type: 'integer', nullable: true },
    created_at: time(),
    status: { type: 'varchar', length: 20, default: '' },
    query: { type: 'text', default: '' },
    snapshot_id: { type: 'bigint', default: 0, transformer: bigintNumber },
    result_count: { type: 'integer', default: 0 },
    message: { type: 'text', default: '' },
    blob_id: { type: 'varchar', length: 64, nullable: true },
    csv_size: { type: 'bigint', default: 0, transformer: bigintNumber },
    locked_until: time(true),
    lease: { type: 'varchar', length: 40, nullable: true },
  },
});

/** MailChangeRow is one file change waiting to be mailed to a subscribed user at due_at. */
export interface MailChangeRow {
  id: number;
  user_id: number;
  action_id: number;
  action: string;
  path: string;
  when: Date;
  due_at: Date;
  locked_until: Date | null;
  lease: string | null;
  /** failed sends of this change so far, and why the last one failed */
  attempts: number;
  last_error: string;
}

export const MailChangeEntity = new EntitySchema<MailChangeRow>({
  name: 'MailChange',
  tableName: 'mail_changes',
  columns: {
    id: { type: 'bigint', primary: true, generated: 'increment', transformer: bigintNumber },
    user_id: { type: 'integer' },
    action_id: { type: 'bigint', transformer: bigintNumber },
    action: { type: 'varchar', length: 30, default: '' },
    path: { type: 'varchar', length: 5000, default: '' },
    when: time(),
    due_at: time(),
    locked_until: time(true),
    lease: { type: 'varchar', length: 40, nullable: true },
    attempts: { type: 'integer', default: 0 },
    last_error: { type: 'text', default: '' },
  },
});

/** doubleNumber reads a double column as a number (pg may hand back a string). */
const doubleNumber: ValueTransformer = bigintNumber;

/** AccountLineItemRow is an invoice or payment (SPEC AccountLineItem); nested items are JSON. */
export interface AccountLineItemRow {
  id: number;
  type: 'invoice' | 'payment';
  amount: number;
  balance: number;
  created_at: Date;
  currency: string;
  method: string;
  payment_reversed_at: Date | null;
  payment_type: string;
  site_name: string;
  invoice_line_items: string;
  payment_line_items: string;
}

export const AccountLineItemEntity = new EntitySchema<AccountLineItemRow>({
  name: 'AccountLineItem',
  tableName: 'account_line_items',
  columns: {
    id: { type: 'bigint', primary: true, transformer: bigintNumber },
    type: { type: 'varchar', length: 10, default: '' },
    amount: { type: 'double precision', default: 0, transformer: doubleNumber },
    balance: { type: 'double precision', default: 0, transformer: doubleNumber },
    created_at: time(),
    currency: { type: 'varchar', length: 10, default: '' },
    method: { type: 'varchar', length: 50, default: '' },
    payment_reversed_at: time(true),
    payment_type: { type: 'varchar', length: 50, default: '' },
    site_name: { type: 'varchar', length: 250, default: '' },
    invoice_line_items: { type: 'text', default: '' },
    payment_line_items: { type: 'text', default: '' },
  },
});

/** BundleKind is what a share link lets its recipients do (issue 14). */
export type BundleKind = 'download' | 'preview' | 'upload';

/** BundleRow is a share link: one user's paths, reached without an account through `code`. */
export interface BundleRow {
  id: number;
  user_id: number;
  /** the random code in the link's URL */
  code: string;
  kind: BundleKind;
  /** JSON array of site paths */
  paths: string;
  password_hash: string | null;
  description: string;
  expires_at: Date | null;
  max_uses: number | null;
  uses: number;
  created_at: Date;
}

export const BundleEntity = new EntitySchema<BundleRow>({
  name: 'Bundle',
  tableName: 'bundles',
  columns: {
    id: { type: 'integer', primary: true, generated: 'increment' },
    user_id: { type: 'integer' },
    code: { type: 'varchar', length: 64, unique: true },
    kind: { type: 'varchar', length: 10 },
    paths: { type: 'text' },
    password_hash: { type: 'varchar', length: 100, nullable: true },
    description: { type: 'text', default: '' },
    expires_at: time(true),
    max_uses: { type: 'integer', nullable: true },
    uses: { type: 'integer', default: 0 },
    created_at: time(),
  },
});

/** TransferDirection is which way a transfer in progress goes. */
export type TransferDirection = 'upload' | 'download';

/**
 * ConnectionRow is one live connection (an FTP or SFTP session, a WebDAV client) as its instance
 * last wrote it (issue 15): renewed every few seconds, with the transfer in progress.
 */
export interface ConnectionRow {
  id: number;
  /** the instance (process) serving it, which renews the row */
  instance: string;
  interface: string;
  user_id: number | null;
  username: string;
  ip: string;
  connected_at: Date;
  last_seen_at: Date;
  transfer_path: string | null;
  transfer_direction: TransferDirection | null;
  transfer_bytes: number;
  transfer_started_at: Date | null;
  /** set when someone ends the connection; its instance closes it at its next renewal */
  end_requested_at: Date | null;
}

export const ConnectionEntity = new EntitySchema<ConnectionRow>({
  name: 'Connection',
  tableName: 'connections',
  columns: {
    id: { type: 'bigint', primary: true, transformer: bigintNumber },
    instance: { type: 'varchar', length: 64 },
    interface: { type: 'varchar', length: 10 },
    user_id: { type: 'integer', nullable: true },
    username: { type: 'varchar', length: 50, default: '' },
    ip: { type: 'varchar', length: 64, default: '' },
    connected_at: time(),
    last_seen_at: time(),
    transfer_path: { type: 'text', nullable: true },
    transfer_direction: { type: 'varchar', length: 10, nullable: true },
    transfer_bytes: { type: 'bigint', default: 0, transformer: bigintNumber },
    transfer_started_at: time(true),
    end_requested_at: time(true),
  },
});

/** InstanceRow is a gateway process serving the site, renewed by it while it runs (issue 15, item 6). */
export interface InstanceRow {
  /** the name its connections carry (Connections.instance) */
  id: string;
  host: string;
  pid: number;
  version: string;
  started_at: Date;
  last_seen_at: Date;
}

export const InstanceEntity = new EntitySchema<InstanceRow>({
  name: 'Instance',
  tableName: 'instances',
  columns: {
    id: { type: 'varchar', length: 64, primary: true },
    host: { type: 'varchar', length: 100 },
    pid: { type: 'integer' },
    version: { type: 'varchar', length: 40 },
    started_at: time(),
    last_seen_at: time(),
  },
});

/** entities lists every schema the data source knows. */
export const entities = [
  UserEntity,
  GroupEntity,
  MembershipEntity,
  PermissionEntity,
  NotificationEntity,
  ApiKeyEntity,
  SessionEntity,
  ActionEntity,
  FileEntity,
  UploadEntity,
  UploadPartEntity,
  PendingVersionEntity,
  BlobGarbageEntity,
  BlobLeaseEntity,
  ClientLoginEntity,
  PublicKeyEntity,
  DavLockEntity,
  DavPropertyEntity,
  WebhookDeliveryEntity,
  WebhookAttemptEntity,
  ExportEntity,
  MailChangeEntity,
  AccountLineItemEntity,
  BundleEntity,
  ConnectionEntity,
  InstanceEntity,
];
