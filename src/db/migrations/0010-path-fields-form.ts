import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * PathFieldsForm1764892800000 (issue 11, item 6): the API now refuses a `user_root` that starts
 * with a slash or lacks the trailing one, and a permission or notification `path` with a leading
 * or trailing slash (SPEC "User", "Permission", "Notification"). The core always stored them in
 * that form, but a row written by hand or by an import may not be: a `user_root` of `/home/a/`
 * locks its user out of FTP, SFTP and WebDAV (no such folder) and grants on a path no file has.
 * This rewrites such rows in SPEC's form (empty segments dropped); a permission or notification
 * that then repeats an existing one is deleted, so no right or e-mail is doubled. No down: the
 * old spellings meant the same folders.
 */
export class PathFieldsForm1764892800000 implements MigrationInterface {
  name = 'PathFieldsForm1764892800000';

  async up(q: QueryRunner): Promise<void> {
    const bare = (v: string) => v.split('/').filter(Boolean).join('/');
    const users = (await q.query(
      `SELECT id, user_root FROM users WHERE user_root LIKE '/%' OR user_root LIKE '%//%'` +
        ` OR (user_root <> '' AND user_root NOT LIKE '%/')`,
    )) as { id: number; user_root: string }[];
    for (const u of users) {
      const root = bare(u.user_root);
      await q.query(`UPDATE users SET user_root = ${param(q, 1)} WHERE id = ${param(q, 2)}`, [
        root === '' ? '' : `${root}/`,
        u.id,
      ]);
    }
    for (const [table, key] of [
      ['permissions', ['user_id', 'group_id', 'permission']],
      ['notifications', ['user_id']],
    ] as const) {
      const rows = (await q.query(`SELECT id, path, ${key.join(', ')} FROM ${table} ORDER BY id`)) as (Record<
        string,
        unknown
      > & { id: number; path: string })[];
      const seen = new Set<string>();
      const identity = (r: Record<string, unknown>, path: string) =>
        JSON.stringify([...key.map((k) => r[k] ?? null), path]);
      for (const r of rows) if (bare(r.path) === r.path) seen.add(identity(r, r.path));
      for (const r of rows) {
        const path = bare(r.path);
        if (path === r.path) continue;
        if (seen.has(identity(r, path))) {
          await q.query(`DELETE FROM ${table} WHERE id = ${param(q, 1)}`, [r.id]);
        } else {
          seen.add(identity(r, path));
          await q.query(`UPDATE ${table} SET path = ${param(q, 1)} WHERE id = ${param(q, 2)}`, [path, r.id]);
        }
      }
    }
  }

  async down(): Promise<void> {}
}

// PostgreSQL numbers its placeholders, SQLite takes `?`.
function param(q: QueryRunner, n: number): string {
  return q.connection.driver.options.type === 'postgres' ? `$${n}` : '?';
}
