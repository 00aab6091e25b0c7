/**
 * The REST API's response resources (SPEC "Resources and their fields", with DESIGN.md's extension
 * fields) and SPEC's error object, as zod schemas registered under the name the API reference
 * gives them. They are the one description of what routes answer: protocols/rest/openapi.ts turns
 * them into the document's components, and test/protocols/rest/openapi.test.ts checks real answers
 * against that document. A field a formatter adds without adding it here fails that test.
 */
import { z } from 'zod';

/** resources is the registry of response schemas; each is a component of the API reference. */
export const resources = z.registry<{ id: string; description?: string }>();

const dateTime = z.iso.datetime({ offset: true });
const id = z.number().int();

/** named registers `schema` as the component `name`. */
function named<S extends z.ZodType>(name: string, description: string, schema: S): S {
  const described = schema.describe(description) as S;
  resources.add(described, { id: name, description });
  return described;
}

/** ErrorObject is SPEC's error body (the model-save fields only on model-save-error). */
export const ErrorObject = named(
  'Error',
  "SPEC's error object; clients branch on `type`, never on the status",
  z.object({
    error: z.string(),
    'http-code': z.number().int(),
    instance: z.string(),
    title: z.string(),
    type: z.string(),
    detail: z.string().optional(),
    errors: z.array(z.string()).optional(),
    model_errors: z.record(z.string(), z.array(z.string())).optional(),
    model_error_keys: z.record(z.string(), z.array(z.string())).optional(),
  }),
);

/** EmptyList is SPEC's "empty array" success body (DELETE and friends). */
export const EmptyList = named('EmptyList', 'An empty array: the success body of deletions', z.tuple([]));

/** Session is what POST /sessions answers. */
export const Session = named(
  'Session',
  'A session; send its id as X-SvcAPI-Auth',
  z.object({ id: z.string() }),
);

/** User is SPEC's User as the API shows it (password and grant_permission are write-only). */
export const User = named(
  'User',
  'A user account',
  z.object({
    id,
    username: z.string(),
    name: z.string(),
    email: z.string(),
    notes: z.string(),
    group_ids: z.string(),
    ftp_permission: z.boolean(),
    web_permission: z.boolean(),
    sftp_permission: z.boolean(),
    dav_permission: z.boolean(),
    restapi_permission: z.boolean(),
    attachments_permission: z.boolean(),
    self_managed: z.boolean(),
    require_password_change: z.boolean(),
    site_admin: z.boolean(),
    allowed_ips: z.string(),
    user_root: z.string(),
    created_at: dateTime,
    last_login_at: dateTime.nullable(),
    locked_until: dateTime
      .nullable()
      .describe('When a lockout after failed logins ends; null when not locked'),
  }),
);

/** Group is SPEC's Group. */
export const Group = named(
  'Group',
  'A group of users',
  z.object({ id, name: z.string(), notes: z.string(), user_ids: z.string() }),
);

/** Permission is SPEC's Permission (with the group's name, our extension). */
export const Permission = named(
  'Permission',
  'One user or group authorized on one folder at one level',
  z.object({
    id,
    path: z.string(),
    permission: z.enum(['full', 'readonly', 'writeonly', 'previewonly', 'admin']),
    user_id: id.nullable(),
    username: z.string().nullable(),
    group_id: id.nullable(),
    group_name: z.string().nullable(),
  }),
);

/** Notification is SPEC's Notification. */
export const Notification = named(
  'Notification',
  'An e-mail subscription of a user to a folder',
  z.object({ id, path: z.string(), user_id: id, username: z.string() }),
);

/** ApiKey is SPEC's ApiKey; `key` only in the answer that created it. */
export const ApiKey = named(
  'ApiKey',
  'An API key; `key` is shown once, when it is created',
  z.object({
    id,
    descriptive_label: z.string(),
    description: z.string(),
    created_at: dateTime,
    expires_at: dateTime.nullable(),
    key: z.string().optional(),
    last_use_at: dateTime.nullable(),
    name: z.string(),
    permission_set: z.string(),
    platform: z.string(),
    url: z.string(),
    user_id: id.nullable(),
  }),
);

/** PublicKey is an SSH public key of a user (our extension). */
export const PublicKey = named(
  'PublicKey',
  'An SSH public key a user logs in to SFTP with',
  z.object({
    id,
    title: z.string(),
    public_key: z.string(),
    fingerprint: z.string(),
    created_at: dateTime,
    user_id: id,
  }),
);

/** Bundle is a share link (SPEC names bundles; the fields are ours). */
export const Bundle = named(
  'Bundle',
  'A share link: paths shared by their owner with anyone who has the URL (and the password, if set)',
  z.object({
    id,
    code: z.string(),
    url: z.string(),
    paths: z.array(z.string()),
    kind: z.enum(['download', 'preview', 'upload']),
    description: z.string(),
    expires_at: dateTime.nullable(),
    max_uses: z.number().int().nullable(),
    uses: z.number().int(),
    has_password: z.boolean(),
    created_at: dateTime,
    user_id: id,
  }),
);

/** Entry is SPEC's file or folder entry. */
export const Entry = named(
  'Entry',
  'A file or folder',
  z.object({
    path: z.string(),
    type: z.enum(['file', 'directory']),
    size: z.number().int().nullable(),
    mtime: dateTime,
    crc32: z.string().nullable(),
    md5: z.string().nullable(),
  }),
);

/** Download is a file entry with the signed URL its bytes are read from (none with action=stat). */
export const Download = named(
  'Download',
  'A file entry with `download_uri`, a signed URL valid for 3 minutes (omitted with action=stat)',
  Entry.extend({ download_uri: z.string().optional() }),
);

/** Upload is SPEC's Upload object. */
export const Upload = named(
  'Upload',
  'One step of a multi-step upload: where and how to send the next part',
  z.object({
    ref: z.string(),
    path: z.string(),
    action: z.literal('put/write'),
    ask_about_overwrites: z.boolean(),
    http_method: z.literal('PUT'),
    upload_uri: z.string(),
    partsize: z.number().int(),
    part_number: z.number().int(),
    available_parts: z.number().int(),
    send: z.record(z.string(), z.string()),
    headers: z.record(z.string(), z.string()),
    parameters: z.record(z.string(), z.string()),
    expires: dateTime,
  }),
);

/** Action is SPEC's Action (history record). */
export const Action = named(
  'Action',
  'One recorded action (history)',
  z.object({
    id,
    path: z.string(),
    when: dateTime,
    destination: z.string(),
    source: z.string(),
    display: z.string(),
    ip: z.string(),
    targets: z.array(z.unknown()),
    user_id: id.nullable(),
    username: z.string(),
    action: z.string(),
    failure_type: z.string(),
    interface: z.string(),
  }),
);

/** ActionNotificationExport is SPEC's webhook-log export. */
export const ActionNotificationExport = named(
  'ActionNotificationExport',
  'An export of the webhook delivery log',
  z.object({
    id,
    export_version: z.string(),
    start_at: dateTime.nullable(),
    end_at: dateTime.nullable(),
    status: z.enum(['building', 'ready', 'failed']),
    query_path: z.string(),
    query_folder: z.string(),
    query_message: z.string(),
    query_request_method: z.string(),
    query_request_url: z.string(),
    query_status: z.string(),
    query_success: z.boolean().nullable(),
    results_url: z.string(),
    user_id: id,
  }),
);

/** ActionNotificationExportResult is SPEC's export result (one webhook delivery). */
export const ActionNotificationExportResult = named(
  'ActionNotificationExportResult',
  'One webhook delivery of an export',
  z.object({
    id,
    created_at: z.number().int(),
    status: z.number().int(),
    message: z.string(),
    success: z.boolean(),
    request_headers: z.string(),
    request_method: z.string(),
    request_url: z.string(),
    path: z.string(),
    folder: z.string(),
  }),
);

const optionalDate = dateTime.nullable();

/** AccountLineItem is SPEC's invoice or payment. */
export const AccountLineItem = named(
  'AccountLineItem',
  'An invoice or a payment',
  z.object({
    id,
    amount: z.number(),
    balance: z.number(),
    created_at: dateTime,
    currency: z.string(),
    download_uri: z.string(),
    invoice_line_items: z.array(
      z.object({
        amount: z.number(),
        created_at: optionalDate,
        description: z.string(),
        type: z.string(),
        service_end_at: optionalDate,
        service_start_at: optionalDate,
        plan: z.string(),
        site: z.string(),
      }),
    ),
    method: z.string(),
    payment_line_items: z.array(
      z.object({
        amount: z.number(),
        created_at: optionalDate,
        invoice_id: id.nullable(),
        payment_id: id.nullable(),
      }),
    ),
    payment_reversed_at: optionalDate,
    payment_type: z.string(),
    site_name: z.string(),
    type: z.enum(['invoice', 'payment']),
  }),
);

/** FileOperationResult is what POST /files answers: move and copy, action=put, action=end. */
export const FileOperationResult = named(
  'FileOperationResult',
  'An empty array (move, copy), an Upload (action=put) or the file entry (action=end)',
  z.union([EmptyList, Upload, Entry]),
);

/** SiteStatus is GET /site's answer (an extension): what this gateway runs and what to fix. */
export const SiteStatus = named(
  'SiteStatus',
  'What this gateway runs (listeners, storage, database, version, instances) and the problems its operator should fix',
  z.object({
    version: z.string(),
    database: z.enum(['sqlite', 'postgres']),
    storage: z.object({
      kind: z.enum(['local', 's3']),
      bucket: z.string().nullable(),
      endpoint: z.string().nullable(),
    }),
    bind: z.string(),
    public_url: z.string(),
    listeners: z.array(
      z.object({
        name: z.string(),
        serves: z.string(),
        enabled: z.boolean(),
        port: z.number().int().nullable(),
      }),
    ),
    ftp_passive_ports: z.string(),
    ftp_passive_address: z.string(),
    certificate: z
      .object({
        file: z.string(),
        generated: z.boolean(),
        valid_from: dateTime,
        valid_until: dateTime,
        names: z.string(),
      })
      .nullable(),
    instances: z.array(
      z.object({
        host: z.string(),
        pid: z.number().int(),
        version: z.string(),
        started_at: dateTime,
        current: z.boolean(),
      }),
    ),
    problems: z.array(
      z.object({
        check: z.string(),
        severity: z.enum(['warn', 'fail']),
        detail: z.string(),
      }),
    ),
    checked_at: dateTime,
  }),
);

/** Connection is a live session on some instance (issue 15): who, how, from where, and its transfer. */
export const Connection = named(
  'Connection',
  'A live connection on some instance of the site (renewed every few seconds while it lasts)',
  z.object({
    id,
    instance: z.string(),
    interface: z.string(),
    user_id: id.nullable(),
    username: z.string(),
    ip: z.string(),
    connected_at: dateTime,
    last_seen_at: dateTime,
    transfer_path: z.string().nullable(),
    transfer_direction: z.enum(['upload', 'download']).nullable(),
    transfer_bytes: z.number().int(),
    transfer_started_at: dateTime.nullable(),
    ending: z.boolean(),
  }),
);

/** GroupMember is one member of a group (our extension, GET /groups/:id/members). */
export const GroupMember = named(
  'GroupMember',
  'A member of a group, with the names a person reads',
  z.object({ user_id: id, username: z.string(), name: z.string() }),
);

/** EffectiveRights is what a user may do on a path and the grants that give it (our extension). */
export const EffectiveRights = named(
  'EffectiveRights',
  "A user's capabilities on a path, each with the permission rows (or site admin) that give it",
  z.object({
    user_id: id,
    username: z.string(),
    path: z.string(),
    site_admin: z.boolean(),
    capabilities: z.array(
      z.object({
        capability: z.enum(['list', 'read', 'write', 'delete', 'admin']),
        allowed: z.boolean(),
        grants: z.array(
          z.object({
            via: z.enum(['user', 'group', 'site_admin']),
            permission_id: id.nullable(),
            path: z.string().nullable(),
            permission: z.enum(['full', 'readonly', 'writeonly', 'previewonly', 'admin']).nullable(),
            group_id: id.nullable(),
            group_name: z.string().nullable(),
          }),
        ),
      }),
    ),
  }),
);
