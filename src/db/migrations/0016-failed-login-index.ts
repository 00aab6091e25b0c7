import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * FailedLoginIndex1765411200000 (issue 13): the index that counts an address's failed logins (the
 * login rate limit, core/actions/failed-logins.ts) holds the failed logins only, not every Action:
 * (ip, action, when) over all rows was one more index for every download and upload to update
 * (about 8 µs of a small GET's 55 µs Action INSERT here, and a page more in its commit). The count
 * names `action = 'failedlogin'` as a literal, so both databases use the partial index.
 */
export class FailedLoginIndex1765411200000 implements MigrationInterface {
  name = 'FailedLoginIndex1765411200000';

  async up(q: QueryRunner): Promise<void> {
    // The index 0001 made, by the name TypeORM gave it.
    const old = q.connection.namingStrategy.indexName('actions', ['ip', 'action', 'when']);
    await q.query(`DROP INDEX IF EXISTS "${old}"`);
    await q.query(`CREATE INDEX idx_actions_failed_ip ON actions (ip, "when") WHERE action = 'failedlogin'`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP INDEX idx_actions_failed_ip');
    const old = q.connection.namingStrategy.indexName('actions', ['ip', 'action', 'when']);
    await q.query(`CREATE INDEX "${old}" ON actions (ip, action, "when")`);
  }
}
