/**
 * The REST API's reference: an OpenAPI 3.1 document built at run time from the core's request
 * schemas (src/core/request-schemas.ts) and the response schemas beside the formatters
 * (protocols/rest/schemas.ts), so it describes what the code accepts and answers. `operations`
 * lists every route; test/protocols/rest/openapi.test.ts fails naming any route the routers
 * register that is missing here, and checks real answers against the document.
 *
 * A new route adds one entry to `operations` (its router path, as registered), with its request
 * schema (exported by the core and named in requestSchemas, or written here for a route that parses
 * by hand) and its response schema (registered in schemas.ts).
 */
import { z } from 'zod';
import {
  ACTION_NAMES,
  INTERFACE_NAMES,
  requestSchemas,
  type RequestSchemaName,
} from '../../src/core/index.ts';
import * as s from './schemas.ts';

type JsonSchema = Record<string, unknown>;
type Method = 'get' | 'head' | 'post' | 'put' | 'patch' | 'delete';

/** Param is one query parameter or header of an operation. */
interface Param {
  name: string;
  in?: 'query' | 'header';
  description: string;
  schema?: JsonSchema;
  required?: boolean;
}

/** Operation is one route of the API as the reference shows it. */
export interface Operation {
  method: Method;
  /** the path as the router registers it (`/users/:id`, `/files{/*path}`) */
  route: string;
  /** the path in the document when it is not the route's (a `.json` the negotiation strips) */
  docPath?: string;
  /** the signed transfer URLs live at the site root, not under /api/rest/v1 */
  root?: boolean;
  tag: string;
  summary: string;
  description?: string;
  /** no credentials (sessions, the document itself, signed URLs) */
  open?: boolean;
  params?: Param[];
  /** the request body: a core schema's name or a schema written here */
  body?: RequestSchemaName | z.ZodType;
  status: number;
  /** the success body: a registered resource, an array of one (`list`), or raw content */
  response?: z.ZodType | { content: string; description: string } | null;
  /** a list answered one page at a time, with SPEC's cursor headers */
  list?: boolean;
  /** an array answered whole or paged by `page` (a folder listing) */
  array?: boolean;
}

const pageParams: Param[] = [
  { name: 'cursor', description: 'The X-Svc-Cursor-Next (or -Prev) of the previous page' },
  {
    name: 'per_page',
    description: 'Items per page (default 1000, at most 10000); the same on every page of a listing',
    schema: { type: 'integer', minimum: 1, maximum: 10000 },
  },
];

const historyParams: Param[] = [
  ...pageParams,
  { name: 'start_at', description: 'Only actions at or after this ISO 8601 date-time' },
  { name: 'end_at', description: 'Only actions at or before this ISO 8601 date-time' },
  { name: 'display', description: '`full` or `parent`', schema: { enum: ['full', 'parent', ''] } },
  {
    name: 'sort_by',
    description:
      'One field and a direction, e.g. `sort_by[created_at]=desc` (curl needs -g for the brackets)',
    schema: { type: 'object', additionalProperties: { enum: ['asc', 'desc'] } },
  },
];

// The parameters of a list whose query object the core validates with a zod schema.
function queryParams(name: RequestSchemaName): Param[] {
  const schema = toSchema(requestSchemas[name], 'input');
  const props = (schema.properties ?? {}) as Record<string, JsonSchema>;
  return Object.entries(props).map(([field, fieldSchema]) => ({
    name: field,
    description: `See ${name}`,
    schema: fieldSchema,
  }));
}

const pathParam =
  'The file or folder path, each segment percent-encoded UTF-8; slashes separate folders; empty (`/folders`) for the site root';

const filePost = z.union([
  z.object({
    'move-destination': z.string().describe('Move the file or folder here'),
    overwrite: z.boolean().optional(),
  }),
  z.object({
    'copy-destination': z.string().describe('Copy the file or folder here'),
    overwrite: z.boolean().optional(),
  }),
  z.object({
    action: z.literal('put'),
    ref: z.string().optional().describe('Ask for another part URL of this upload'),
    part: z.number().int().min(1).max(10000).optional(),
    restart: z.number().int().min(0).optional().describe('Bytes of the existing file to keep'),
  }),
  z.object({ action: z.literal('end'), ref: z.string() }),
]);

const sessionCreate = z.object({ username: z.string(), password: z.string() });

const idRoute = (
  plural: string,
  tag: string,
  resource: z.ZodType,
  name: string,
  listParams?: Param[],
): Operation[] => [
  {
    method: 'get',
    route: `/${plural}`,
    tag,
    summary: `List ${plural}`,
    ...(listParams ? { params: listParams } : {}),
    status: 200,
    response: resource,
    list: true,
  },
  {
    method: 'get',
    route: `/${plural}/:id`,
    tag,
    summary: `Show one ${name}`,
    status: 200,
    response: resource,
  },
];

// A resource site admins list, show, create, update (PUT or PATCH) and delete by id.
const crud = (
  plural: string,
  tag: string,
  resource: z.ZodType,
  name: string,
  create: RequestSchemaName,
  update: RequestSchemaName,
  listParams?: Param[],
): Operation[] => [
  ...idRoute(plural, tag, resource, name, listParams),
  {
    method: 'post',
    route: `/${plural}`,
    tag,
    summary: `Create a ${name}`,
    body: create,
    status: 201,
    response: resource,
  },
  ...(['put', 'patch'] as const).map((method): Operation => ({
    method,
    route: `/${plural}/:id`,
    tag,
    summary: `Update a ${name} (only the fields sent)`,
    body: update,
    status: 200,
    response: resource,
  })),
  {
    method: 'delete',
    route: `/${plural}/:id`,
    tag,
    summary: `Delete a ${name}`,
    status: 200,
    response: s.EmptyList,
  },
];

/** operations is every route of the REST front end, as registered on its routers. */
export const operations: Operation[] = [
  {
    method: 'get',
    route: '/openapi',
    docPath: '/openapi.json',
    tag: 'Reference',
    summary: 'This document',
    open: true,
    status: 200,
    response: { content: 'application/json', description: 'The OpenAPI 3.1 document of this API' },
  },
  {
    method: 'post',
    route: '/sessions',
    tag: 'Sessions',
    summary: 'Log in: create a session',
    open: true,
    body: sessionCreate,
    status: 200,
    response: s.Session,
  },
  {
    method: 'delete',
    route: '/sessions',
    tag: 'Sessions',
    summary: 'Log out (always an empty array, even for an unknown session)',
    open: true,
    status: 200,
    response: s.EmptyList,
  },

  ...crud('users', 'Users', s.User, 'user', 'UserCreate', 'UserUpdate', [
    ...pageParams,
    ...queryParams('UserListQuery'),
  ]),
  ...crud('groups', 'Groups', s.Group, 'group', 'GroupCreate', 'GroupUpdate'),

  {
    method: 'get',
    route: '/permissions',
    tag: 'Permissions',
    summary: 'List permissions',
    params: [
      ...pageParams,
      {
        name: 'filter',
        description:
          'Only rows of this path, user or group, e.g. `filter[path]=reports`; `filter[applies_to]=reports/2026` keeps the rows that count there: on that path and its ancestors (extension)',
        schema: toSchema(requestSchemas.PermissionFilter, 'input'),
      },
    ],
    status: 200,
    response: s.Permission,
    list: true,
  },
  {
    method: 'post',
    route: '/permissions',
    tag: 'Permissions',
    summary: 'Grant a permission',
    body: 'PermissionCreate',
    status: 201,
    response: s.Permission,
  },
  {
    method: 'delete',
    route: '/permissions/:id',
    tag: 'Permissions',
    summary: 'Revoke a permission',
    status: 200,
    response: s.EmptyList,
  },

  {
    method: 'get',
    route: '/notifications',
    tag: 'Notifications',
    summary: 'List notifications',
    status: 200,
    response: s.Notification,
    list: true,
  },
  {
    method: 'post',
    route: '/notifications',
    tag: 'Notifications',
    summary: 'Subscribe a user to a folder',
    body: 'NotificationCreate',
    status: 201,
    response: s.Notification,
  },
  {
    method: 'delete',
    route: '/notifications/:id',
    tag: 'Notifications',
    summary: 'Delete a notification',
    status: 200,
    response: s.EmptyList,
  },

  {
    method: 'get',
    route: '/api_keys',
    tag: 'API keys',
    summary: 'List API keys of a user (the caller by default)',
    params: [...pageParams, ...queryParams('ApiKeyListQuery')],
    status: 200,
    response: s.ApiKey,
    list: true,
  },
  {
    method: 'get',
    route: '/api_key',
    tag: 'API keys',
    summary: 'The API key in use',
    status: 200,
    response: s.ApiKey,
  },
  {
    method: 'get',
    route: '/api_keys/:id',
    tag: 'API keys',
    summary: 'Show one API key',
    status: 200,
    response: s.ApiKey,
  },
  {
    method: 'post',
    route: '/api_keys',
    tag: 'API keys',
    summary: 'Create an API key (the answer is the only one that shows `key`)',
    params: [
      {
        name: 'X-Svc-Reauthentication',
        in: 'header',
        description: '`password:<PASSWORD>`, required when a session (not a key) creates a key',
      },
    ],
    body: 'ApiKeyCreate',
    status: 201,
    response: s.ApiKey,
  },
  {
    method: 'delete',
    route: '/api_keys/:id',
    tag: 'API keys',
    summary: 'Delete an API key',
    status: 200,
    response: s.EmptyList,
  },

  ...crud('bundles', 'Share links', s.Bundle, 'share link', 'BundleCreate', 'BundleUpdate'),

  {
    method: 'get',
    route: '/public_keys',
    tag: 'SSH public keys',
    summary: 'List SSH public keys of a user (the caller by default)',
    params: [...pageParams, ...queryParams('PublicKeyListQuery')],
    status: 200,
    response: s.PublicKey,
    list: true,
  },
  {
    method: 'get',
    route: '/public_keys/:id',
    tag: 'SSH public keys',
    summary: 'Show one SSH public key',
    status: 200,
    response: s.PublicKey,
  },
  {
    method: 'post',
    route: '/public_keys',
    tag: 'SSH public keys',
    summary: 'Add an SSH public key',
    body: 'PublicKeyCreate',
    status: 201,
    response: s.PublicKey,
  },
  {
    method: 'delete',
    route: '/public_keys/:id',
    tag: 'SSH public keys',
    summary: 'Delete an SSH public key',
    status: 200,
    response: s.EmptyList,
  },

  {
    method: 'get',
    route: '/history/files{/*path}',
    tag: 'History',
    summary: 'Actions on a file (last 24 hours)',
    params: historyParams,
    status: 200,
    response: s.Action,
    list: true,
  },
  {
    method: 'get',
    route: '/history/folders{/*path}',
    tag: 'History',
    summary: 'Actions in a folder (last 24 hours)',
    params: historyParams,
    status: 200,
    response: s.Action,
    list: true,
  },
  {
    method: 'get',
    route: '/history/users/:id',
    tag: 'History',
    summary: "A user's actions (last 24 hours)",
    params: historyParams,
    status: 200,
    response: s.Action,
    list: true,
  },
  {
    method: 'get',
    route: '/history/login',
    tag: 'History',
    summary: 'Logins and failed logins (last 24 hours)',
    params: historyParams,
    status: 200,
    response: s.Action,
    list: true,
  },
  {
    method: 'get',
    route: '/history',
    tag: 'History',
    summary: 'All actions (last 24 hours)',
    params: [
      ...historyParams,
      {
        name: 'filter',
        description:
          'Fields user_id, folder, path, e.g. `filter[folder]=reports`; and, as extensions of SPEC, ' +
          '`filter[username]` (a user by name, instead of user_id), ' +
          "`filter[interface]` (one of SPEC's Action interfaces: " +
          `${INTERFACE_NAMES.join(', ')}) and \`filter[action]\` (one of ${ACTION_NAMES.join(', ')})`,
        schema: {
          type: 'object',
          properties: {
            user_id: { type: 'integer' },
            username: { type: 'string' },
            folder: { type: 'string' },
            path: { type: 'string' },
            interface: { type: 'string', enum: [...INTERFACE_NAMES] },
            action: { type: 'string', enum: [...ACTION_NAMES] },
          },
        },
      },
      {
        name: 'filter_prefix',
        description: 'Field path: actions on paths starting with it',
        schema: { type: 'object' },
      },
    ],
    status: 200,
    response: s.Action,
    list: true,
  },

  {
    method: 'post',
    route: '/action_webhook_failures/:id/retry',
    tag: 'Webhooks',
    summary: 'Retry a failed webhook delivery',
    description:
      'The id is a delivery record of `/action_notification_export_results` (its `id`) whose ' +
      '`success` is false: the delivery it belongs to is sent once more, now.',
    status: 204,
    response: null,
  },
  {
    method: 'post',
    route: '/action_notification_exports',
    tag: 'Webhooks',
    summary: 'Export the webhook delivery log',
    body: 'ActionNotificationExportCreate',
    status: 201,
    response: s.ActionNotificationExport,
  },
  {
    method: 'get',
    route: '/action_notification_exports/:id',
    tag: 'Webhooks',
    summary: 'Show an export (poll until `ready`)',
    status: 200,
    response: s.ActionNotificationExport,
  },
  {
    method: 'get',
    route: '/action_notification_export_results',
    tag: 'Webhooks',
    summary: 'The deliveries an export found',
    params: [
      ...pageParams,
      {
        name: 'action_notification_export_id',
        description: 'The export',
        required: true,
        schema: { type: 'integer' },
      },
    ],
    status: 200,
    response: s.ActionNotificationExportResult,
    list: true,
  },

  ...idRoute('invoices', 'Billing', s.AccountLineItem, 'invoice'),
  ...idRoute('payments', 'Billing', s.AccountLineItem, 'payment'),

  {
    method: 'get',
    route: '/folders{/*path}',
    tag: 'Files',
    summary: "List a folder's contents",
    description: 'The X-Svc-Rights header names what the caller may do in the folder.',
    params: [
      {
        name: 'per_page',
        description: 'Entries per page (default 1000, at most 5000)',
        schema: { type: 'integer', minimum: 1, maximum: 5000 },
      },
      { name: 'page', description: 'Page number, from 1', schema: { type: 'integer', minimum: 1 } },
      {
        name: 'sort_by',
        description: 'One of path, size, modified_at_datetime with asc or desc, e.g. `sort_by[size]=desc`',
        schema: { type: 'object', additionalProperties: { enum: ['asc', 'desc'] } },
      },
      { name: 'search', description: 'Only entries whose name contains this' },
    ],
    status: 200,
    response: s.Entry,
    array: true,
  },
  {
    method: 'post',
    route: '/folders{/*path}',
    tag: 'Files',
    summary: 'Create a folder (and its missing parents)',
    status: 201,
    response: s.EmptyList,
  },
  {
    method: 'get',
    route: '/files{/*path}',
    tag: 'Files',
    summary: 'A download URL for a file, or with action=stat its entry only',
    params: [
      { name: 'action', description: '`stat`: the entry without download_uri', schema: { enum: ['stat'] } },
    ],
    status: 200,
    response: s.Download,
  },
  {
    method: 'post',
    route: '/files{/*path}',
    tag: 'Files',
    summary: 'Move, copy, or upload (action=put starts or continues, action=end finishes)',
    description:
      'The answer is an empty array for move and copy, an Upload for action=put and the file entry for action=end.',
    body: filePost,
    status: 200,
    response: s.FileOperationResult,
  },
  {
    method: 'delete',
    route: '/files{/*path}',
    tag: 'Files',
    summary: 'Delete a file or folder (a non-empty folder only with Depth: infinity)',
    params: [
      { name: 'Depth', in: 'header', description: '`infinity` deletes a folder and everything in it' },
    ],
    status: 200,
    response: s.EmptyList,
  },
  {
    method: 'get',
    route: '/zip{/*path}',
    tag: 'Files',
    summary: 'A folder (or some of its entries) as one zip, streamed',
    params: [{ name: 'entries[]', description: 'Names inside the folder to include (all when absent)' }],
    status: 200,
    response: { content: 'application/zip', description: 'The zip archive' },
  },

  {
    method: 'get',
    route: '/download/:token',
    root: true,
    tag: 'Signed URLs',
    summary: "A file's bytes (Range, ETag and If-None-Match honoured)",
    open: true,
    status: 200,
    response: { content: 'application/octet-stream', description: "The file's bytes" },
  },
  {
    method: 'head',
    route: '/download/:token',
    root: true,
    tag: 'Signed URLs',
    summary: "A file's headers",
    open: true,
    status: 200,
    response: { content: 'application/octet-stream', description: 'No body' },
  },
  {
    method: 'put',
    route: '/upload/:token',
    root: true,
    tag: 'Signed URLs',
    summary: 'One part of a multi-step upload (the body is the part)',
    open: true,
    status: 200,
    response: { content: 'text/plain', description: 'Empty; the ETag header names the part' },
  },
  {
    method: 'get',
    route: '/billing/:token',
    root: true,
    tag: 'Signed URLs',
    summary: 'A printable invoice or payment',
    open: true,
    status: 200,
    response: { content: 'text/html', description: 'The document' },
  },
  {
    method: 'get',
    route: '/exports/:token',
    root: true,
    tag: 'Signed URLs',
    summary: "An export's results as CSV",
    open: true,
    status: 200,
    response: { content: 'text/csv', description: 'The results' },
  },

  {
    method: 'get',
    route: '/site',
    tag: 'Site',
    summary: 'What this gateway runs and what its operator should fix (site admins)',
    description:
      'An extension. Listeners with their bound ports, storage and database kinds, version, the instances seen, ' +
      "and the problems `svc-gateway doctor` also reports (certificate, public URL, FTP passive address) plus a bootstrap admin's unchanged password.",
    status: 200,
    response: s.SiteStatus,
  },
  {
    method: 'post',
    route: '/users/:id/unlock',
    tag: 'Users',
    summary: 'End a lockout after failed logins (extension); the user may log in again at once',
    status: 200,
    response: s.User,
  },
  {
    method: 'get',
    route: '/connections',
    tag: 'Connections',
    summary: 'List the live connections of every instance (site admins)',
    description:
      'FTP, SFTP and WebDAV sessions with their transfer in progress, oldest first. Each instance renews ' +
      'its rows every few seconds; the rows of an instance that stopped renewing (it died) are left out ' +
      'after 15 seconds.',
    params: pageParams,
    status: 200,
    response: s.Connection,
    list: true,
  },
  {
    method: 'delete',
    route: '/connections/:id',
    tag: 'Connections',
    summary: 'End a connection, on whatever instance serves it (site admins)',
    description:
      'Marks the connection; the instance serving it closes it within a few seconds (at once when it ' +
      'is the instance asked). A connection no longer listed is not-found/connection-not-found.',
    status: 200,
    response: s.EmptyList,
  },
  {
    method: 'get',
    route: '/permissions/effective',
    tag: 'Permissions',
    summary: 'What a user may do on a path, and the grant that gives each capability (extension)',
    description:
      "For site admins, and for Folder Admins on paths inside their folders. Each capability (list, read, write, delete, admin) lists the permission rows that give it: the user's own, a group's, on the path or an ancestor, or site admin.",
    params: queryParams('PermissionEffectiveQuery'),
    status: 200,
    response: s.EffectiveRights,
  },
  {
    method: 'get',
    route: '/groups/:id/members',
    tag: 'Groups',
    summary: "A group's members with their names, one page at a time (extension)",
    params: pageParams,
    status: 200,
    response: s.GroupMember,
    list: true,
  },
  {
    method: 'post',
    route: '/groups/:id/members',
    tag: 'Groups',
    summary: 'Add one user to a group, by user_id or username (extension)',
    body: 'GroupMemberAdd',
    status: 201,
    response: s.GroupMember,
  },
  {
    method: 'delete',
    route: '/groups/:id/members/:user_id',
    tag: 'Groups',
    summary: 'Take one user out of a group (extension)',
    status: 200,
    response: s.EmptyList,
  },
];

/** toSchema renders a zod schema as JSON Schema 2020-12, OpenAPI 3.1's dialect. */
function toSchema(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  const out = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as JsonSchema;
  delete out.$schema;
  return out;
}

// A response schema is a reference to its component: every response is registered in schemas.ts.
function responseSchema(schema: z.ZodType): JsonSchema {
  const meta = s.resources.get(schema);
  if (!meta) throw new Error('A response schema is not registered in protocols/rest/schemas.ts');
  return { $ref: `#/components/schemas/${meta.id}` };
}

/** docPath is where an operation's route appears in the document (`{path}` for the file path). */
export function docPath(op: Pick<Operation, 'route' | 'docPath'>): string {
  return op.docPath ?? op.route.replace(/\{\/\*(\w+)\}/g, '/{$1}').replace(/:(\w+)/g, '{$1}');
}

function operationObject(op: Operation): JsonSchema {
  const pathParams = [...docPath(op).matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);
  const parameters: JsonSchema[] = pathParams.map((name) => ({
    name,
    in: 'path',
    required: true,
    description: name === 'path' ? pathParam : name === 'token' ? 'The signed token' : 'An integer id',
    schema: name === 'id' ? { type: 'integer' } : { type: 'string' },
  }));
  for (const p of op.params ?? []) {
    const object = (p.schema as { type?: string } | undefined)?.type === 'object';
    parameters.push({
      name: p.name,
      in: p.in ?? 'query',
      description: p.description,
      required: p.required ?? false,
      schema: p.schema ?? { type: 'string' },
      ...(object ? { style: 'deepObject', explode: true } : {}),
    });
  }
  const responses: JsonSchema = {};
  const success: JsonSchema = { description: op.summary };
  if (op.list) {
    success.headers = {
      'X-Svc-Cursor-Next': { $ref: '#/components/headers/CursorNext' },
      'X-Svc-Cursor-Prev': { $ref: '#/components/headers/CursorPrev' },
    };
  }
  if (op.response && op.response instanceof z.ZodType) {
    const schema = responseSchema(op.response);
    success.content = {
      'application/json': { schema: op.list || op.array ? { type: 'array', items: schema } : schema },
    };
  } else if (op.response) {
    success.description = op.response.description;
    success.content = { [op.response.content]: { schema: {} } };
  }
  responses[String(op.status)] = success;
  if (op.route === '/download/:token') {
    responses['206'] = {
      description: 'The requested range',
      content: { 'application/octet-stream': { schema: {} } },
    };
    responses['304'] = { description: 'Not modified (If-None-Match)' };
  }
  responses['4XX'] = { $ref: '#/components/responses/Error' };
  responses['5XX'] = { $ref: '#/components/responses/Error' };
  const body = op.body;
  return {
    tags: [op.tag],
    summary: op.summary,
    ...(op.description ? { description: op.description } : {}),
    operationId: `${op.method}${docPath(op).replace(/[^A-Za-z0-9]+(\w)?/g, (_, c: string | undefined) => (c ?? '').toUpperCase())}`,
    ...(op.open ? { security: [] } : {}),
    ...(parameters.length ? { parameters } : {}),
    ...(body
      ? {
          requestBody: {
            required: true,
            description: 'JSON, XML or form fields (XML and forms send every value as text)',
            content: {
              'application/json': {
                schema:
                  typeof body === 'string'
                    ? { $ref: `#/components/schemas/${body}` }
                    : toSchema(body, 'input'),
              },
            },
          },
        }
      : {}),
    responses,
  };
}

let cached: JsonSchema | null = null;

/** openApiDocument builds (once) the OpenAPI 3.1 document of the REST API. */
export function openApiDocument(): JsonSchema {
  if (cached) return cached;
  const schemas: Record<string, JsonSchema> = {};
  for (const [name, schema] of Object.entries(requestSchemas)) schemas[name] = toSchema(schema, 'input');
  const generated = z.toJSONSchema(s.resources, {
    io: 'output',
    unrepresentable: 'any',
    uri: (id) => `#/components/schemas/${id}`,
  }) as { schemas: Record<string, JsonSchema> };
  for (const [name, schema] of Object.entries(generated.schemas)) {
    delete schema.$schema;
    delete schema.$id;
    schemas[name] = schema;
  }
  const paths: Record<string, Record<string, unknown>> = {};
  for (const op of operations) {
    const p = (paths[docPath(op)] ??= {});
    if (op.root) p.servers = [{ url: '/', description: 'Signed URLs live at the site root' }];
    p[op.method] = operationObject(op);
  }
  cached = {
    openapi: '3.1.0',
    info: {
      title: 'svc-gateway REST API',
      version: '1',
      description:
        "The REST API of svc-gateway (SPEC.md). Responses are JSON, or SPEC's XML with a `.xml` path extension " +
        "or `Accept: application/xml` (on /files and /folders by Accept only). Errors are SPEC's error object; " +
        'branch on its `type`. Lists are paged with `cursor` and `per_page` and the X-Svc-Cursor-Next header.',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    servers: [{ url: '/api/rest/v1' }],
    security: [{ ApiKey: [] }, { Session: [] }, { BasicKey: [] }],
    tags: [...new Set(operations.map((o) => o.tag))].map((name) => ({ name })),
    paths,
    components: {
      schemas,
      securitySchemes: {
        ApiKey: { type: 'apiKey', in: 'header', name: 'X-SvcAPI-Key' },
        Session: {
          type: 'apiKey',
          in: 'header',
          name: 'X-SvcAPI-Auth',
          description: 'The id POST /sessions answers',
        },
        BasicKey: {
          type: 'http',
          scheme: 'basic',
          description: 'The API key as the user name, any password',
        },
      },
      headers: {
        CursorNext: { description: 'Send as `cursor` for the next page', schema: { type: 'string' } },
        CursorPrev: { description: 'Send as `cursor` for the previous page', schema: { type: 'string' } },
      },
      responses: {
        Error: {
          description: "SPEC's error object",
          content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
        },
      },
    },
  };
  return cached;
}
