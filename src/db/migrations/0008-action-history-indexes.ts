import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * ActionHistoryIndexes1764633600000 (issue 19, item 3): the indexes the history queries seek, so
 * they keep their latency as the Action log grows to millions of rows (core/actions/history.ts).
 * - (when, id) and (user_id, when, id) replace (when) and (user_id, when): history pages by keyset
 *   on (when, id), newest first, so the id must be in the index to seek and to stop early.
 * - (path, when, id): a file's history (equality) and a folder's (the range `a/` ≤ path < `a0`).
 *   On PostgreSQL it is built `COLLATE "C"`, the byte order the range relies on, whatever the
 *   database's collation; the queries compare `path COLLATE "C"` to use it.
 * - source and destination: partial, holding only the rows a file or folder test can find by
 *   them: actions with a source (moves and copies), and those whose destination is not their path
 *   (the core records a move's destination as its path too, so normally none). Recording an
 *   ordinary Action therefore touches one index more than before, not three.
 * - logins: (when, id) of the login and failedlogin Actions only, for /history/login.
 */
export class ActionHistoryIndexes1764633600000 implements MigrationInterface {
  name = 'ActionHistoryIndexes1764633600000';

  async up(q: QueryRunner): Promise<void> {
    const pg = q.connection.driver.options.type === 'postgres';
    const binary = (col: string) => (pg ? `"${col}" COLLATE "C"` : `"${col}"`);
    // The indexes 0001 made, by the names TypeORM gave them.
    for (const cols of [['when'], ['user_id', 'when']])
      await q.query(`DROP INDEX IF EXISTS "${q.connection.namingStrategy.indexName('actions', cols)}"`);
    for (const sql of [
      'CREATE INDEX idx_actions_when ON actions ("when", id)',
      'CREATE INDEX idx_actions_user ON actions (user_id, "when", id)',
      `CREATE INDEX idx_actions_path ON actions (${binary('path')}, "when", id)`,
      `CREATE INDEX idx_actions_source ON actions (${binary('source')}, "when", id) WHERE source <> ''`,
      `CREATE INDEX idx_actions_destination ON actions (${binary('destination')}, "when", id)` +
        ` WHERE destination <> '' AND destination <> path`,
      `CREATE INDEX idx_actions_logins ON actions ("when", id) WHERE action IN ('login', 'failedlogin')`,
    ]) {
      await q.query(sql);
    }
  }

  async down(q: QueryRunner): Promise<void> {
    for (const name of ['logins', 'destination', 'source', 'path', 'user', 'when'])
      await q.query(`DROP INDEX idx_actions_${name}`);
    await q.query('CREATE INDEX idx_actions_when_only ON actions ("when")');
    await q.query('CREATE INDEX idx_actions_user_when ON actions (user_id, "when")');
  }
}
