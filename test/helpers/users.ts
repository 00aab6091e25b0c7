/**
 * Many users at once, for lists that must stay fast at 10,000 users: rows inserted straight into
 * the database in batches (no bcrypt, no Action per user), without a password, so none can log in.
 */
import type { Core } from '../../src/core/index.ts';
import { UserEntity, type UserRow } from '../../src/db/entities.ts';
import { dbOf } from './internals.ts';

/**
 * insertUsers adds `count` users named `<prefix>00000`, `<prefix>00001`, … with a name and an
 * e-mail, created one second apart (oldest first), 500 per unit of work; returns the ms it took.
 */
export async function insertUsers(core: Core, count: number, prefix = 'many'): Promise<number> {
  const t0 = performance.now();
  const base = Date.now() - count * 1000;
  for (let i = 0; i < count; i += 500) {
    const rows: Omit<UserRow, 'id'>[] = [];
    for (let j = i; j < Math.min(count, i + 500); j++) {
      const username = `${prefix}${String(j).padStart(5, '0')}`;
      const created = new Date(base + j * 1000);
      rows.push({
        username,
        username_key: username.toLowerCase(),
        password_hash: null,
        name: `Person ${j}`,
        email: `${username}@example.com`,
        notes: '',
        ftp_permission: true,
        web_permission: true,
        sftp_permission: true,
        dav_permission: true,
        restapi_permission: true,
        attachments_permission: false,
        self_managed: true,
        require_password_change: false,
        site_admin: false,
        allowed_ips: '',
        user_root: '',
        failed_logins: 0,
        failed_login_window_start: null,
        locked_until: null,
        last_login_at: null,
        created_at: created,
        updated_at: created,
      });
    }
    await dbOf(core).work((em) => em.insert(UserEntity, rows));
  }
  return Math.round(performance.now() - t0);
}
