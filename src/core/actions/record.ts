import type { EntityManager } from 'typeorm';
import { sql } from '../../db/sql.ts';
import { runActionSinks } from '../events/hooks.ts';
import type { Interface, Principal } from '../principal.ts';

/** ActionName is SPEC's Action `action` values. */
export type ActionName =
  | 'create'
  | 'read'
  | 'update'
  | 'destroy'
  | 'move'
  | 'copy'
  | 'login'
  | 'failedlogin'
  | 'user_create'
  | 'user_update'
  | 'user_destroy'
  | 'group_create'
  | 'group_update'
  | 'group_destroy'
  | 'permission_create'
  | 'permission_destroy'
  | 'api_key_create'
  | 'api_key_update'
  | 'api_key_destroy'
  | 'public_key_create'
  | 'public_key_destroy'
  | 'bundle_create'
  | 'bundle_update'
  | 'bundle_destroy';

/** FailureType is SPEC's Action `failure_type` values the gateway records. */
export type FailureType =
  | 'locked_out'
  | 'ip_mismatch'
  | 'password_mismatch'
  | 'username_not_found'
  | 'none'
  | 'no_ftp_permission'
  | 'no_web_permission'
  | 'no_directory'
  | 'no_sftp_permission'
  | 'no_dav_permission'
  | 'no_restapi_permission'
  | 'key_mismatch'
  | 'disabled';

/** ActionFields describes one Action; who, how and from where come from the principal or are given. */
export interface ActionFields {
  action: ActionName;
  path?: string;
  source?: string;
  destination?: string;
  display?: string;
  failure_type?: FailureType;
  targets?: unknown[];
  /** for failedlogin, where there is no principal yet */
  user?: { id: number | null; username: string };
  interface?: Interface;
  ip?: string;
  /** bytes of the file, when known (not stored; webhook bodies carry it) */
  size?: number;
}

/**
 * recordAction writes one Action row in the caller's unit of work, so the Action commits or rolls
 * back with the change it describes; the webhook deliveries and e-mail changes it causes are
 * queued in the same unit of work (events/hooks.ts), so none is lost or sent for a rolled-back change.
 */
export async function recordAction(
  em: EntityManager,
  who: Principal | null,
  fields: ActionFields,
): Promise<void> {
  const user =
    fields.user ??
    (who?.user ? { id: who.user.id, username: who.user.username } : { id: null, username: '' });
  const row = {
    when: new Date(),
    action: fields.action,
    path: fields.path ?? '',
    source: fields.source ?? '',
    destination: fields.destination ?? '',
    display: fields.display ?? '',
    ip: fields.ip ?? who?.ip ?? '',
    user_id: user.id,
    username: user.username,
    interface: fields.interface ?? who?.interface ?? '',
    failure_type: fields.failure_type ?? '',
    targets: JSON.stringify(fields.targets ?? []),
  };
  // Written by hand with RETURNING: TypeORM's insert reads the row back for its column defaults,
  // a second statement on every upload, download and login.
  const [inserted] = await sql<{ id: number | string }>(
    em,
    `INSERT INTO actions ("when", action, path, source, destination, display, ip, user_id, username,
                          "interface", failure_type, targets)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
    [
      row.when.getTime(),
      row.action,
      row.path,
      row.source,
      row.destination,
      row.display,
      row.ip,
      row.user_id,
      row.username,
      row.interface,
      row.failure_type,
      row.targets,
    ],
  );
  const id = Number(inserted?.id ?? 0);
  await runActionSinks(em, {
    ...row,
    id,
    targets: fields.targets ?? [],
    ...(fields.size === undefined ? {} : { size: fields.size }),
  });
}
