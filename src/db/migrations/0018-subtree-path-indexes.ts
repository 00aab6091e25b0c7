import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * SubtreePathIndexes1765584000000 (issue 13): a folder's move, copy or delete selects what is
 * inside it as a byte range of paths (db/sql.ts inside), which SQLite's path indexes (BINARY)
 * already serve; PostgreSQL gets indexes built `COLLATE "C"` for files and WebDAV locks, as Action
 * paths (0008) and dead properties (0015) have, since its own path indexes follow the database's
 * collation. Before, a substr test read the whole files table for every folder moved, copied or
 * deleted (36-107 ms with 323,000 files on SQLite here).
 */
export class SubtreePathIndexes1765584000000 implements MigrationInterface {
  name = 'SubtreePathIndexes1765584000000';

  async up(q: QueryRunner): Promise<void> {
    if (q.connection.driver.options.type !== 'postgres') return;
    await q.query('CREATE INDEX idx_files_path_c ON files (path COLLATE "C")');
    await q.query('CREATE INDEX idx_dav_locks_path_c ON dav_locks (path COLLATE "C")');
  }

  async down(q: QueryRunner): Promise<void> {
    if (q.connection.driver.options.type !== 'postgres') return;
    await q.query('DROP INDEX idx_dav_locks_path_c');
    await q.query('DROP INDEX idx_files_path_c');
  }
}
