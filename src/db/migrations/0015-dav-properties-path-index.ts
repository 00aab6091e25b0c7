import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * DavPropertiesPathIndex1765324800000 (issue 13): a PROPFIND of a folder first asks whether any
 * entry inside it has dead properties (core/files/properties.ts, anyInside), one range test on
 * path (`a/` ≤ path < `a0`), and reads them page by page only when some do: a listing of 10,000
 * entries spent about 5 ms looking up 500 paths at a time in a table most sites hardly use. The
 * range needs the byte order: SQLite's unique index on (path, namespace, name) has it (BINARY);
 * PostgreSQL gets an index built `COLLATE "C"`, as the Action paths have (migration 0008).
 */
export class DavPropertiesPathIndex1765324800000 implements MigrationInterface {
  name = 'DavPropertiesPathIndex1765324800000';

  async up(q: QueryRunner): Promise<void> {
    if (q.connection.driver.options.type !== 'postgres') return;
    await q.query('CREATE INDEX idx_dav_properties_path ON dav_properties (path COLLATE "C")');
  }

  async down(q: QueryRunner): Promise<void> {
    if (q.connection.driver.options.type !== 'postgres') return;
    await q.query('DROP INDEX idx_dav_properties_path');
  }
}
