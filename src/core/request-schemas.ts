/**
 * The zod schemas the core validates request fields with, by the name the REST API reference
 * gives them: protocols/rest/openapi.ts generates the document's request bodies and query objects
 * from these, so the reference cannot drift from what the core accepts.
 */
import { permissionCreateSchema, permissionFilterSchema } from './access/permissions.ts';
import { apiKeyCreateSchema, apiKeyListSchema } from './accounts/api-keys.ts';
import { groupCreateSchema, groupUpdateSchema } from './accounts/groups.ts';
import { publicKeyCreateSchema, publicKeyListSchema } from './accounts/public-keys.ts';
import { userCreateSchema, userListSchema, userUpdateSchema } from './accounts/users.ts';
import { bundleCreateSchema, bundleUpdateSchema } from './bundles/bundles.ts';
import { exportCreateSchema } from './events/exports.ts';
import { notificationCreateSchema } from './events/notifications.ts';
import { permissionEffectiveSchema } from './access/permissions.ts';
import { groupMemberAddSchema } from './accounts/groups.ts';

/** requestSchemas are the core's request schemas, named as the API reference shows them. */
export const requestSchemas = {
  UserCreate: userCreateSchema,
  UserUpdate: userUpdateSchema,
  GroupCreate: groupCreateSchema,
  GroupUpdate: groupUpdateSchema,
  PermissionCreate: permissionCreateSchema,
  PermissionFilter: permissionFilterSchema,
  NotificationCreate: notificationCreateSchema,
  ApiKeyCreate: apiKeyCreateSchema,
  ApiKeyListQuery: apiKeyListSchema,
  PublicKeyCreate: publicKeyCreateSchema,
  PublicKeyListQuery: publicKeyListSchema,
  ActionNotificationExportCreate: exportCreateSchema,
  BundleCreate: bundleCreateSchema,
  BundleUpdate: bundleUpdateSchema,
  UserListQuery: userListSchema,
  PermissionEffectiveQuery: permissionEffectiveSchema,
  GroupMemberAdd: groupMemberAddSchema,
} as const;

/** RequestSchemaName names one of the core's request schemas. */
export type RequestSchemaName = keyof typeof requestSchemas;
