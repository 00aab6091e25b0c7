import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * PermissionPathIndex1765238400000 (issue 13): the permission rows that count on a path are read
 * before every file operation (core/access/rights.ts) by the path and its ancestors. Without an
 * index on path, SQLite went through all of the user's rows and their groups' and sorted what it
 * kept, so a check grew with the user's permissions: on a copy of a gateway's database 73 µs with
 * 200 rows and 207 µs with 2,000, against 10 µs with the index. PostgreSQL gets a hash index:
 * SPEC allows a permission path of 5,000 characters, past what a btree row may hold (about 2,700
 * bytes), and these lookups only ask for equality.
 */
export class PermissionPathIndex1765238400000 implements MigrationInterface {
  name = 'PermissionPathIndex1765238400000';

  async up(q: QueryRunner): Promise<void> {
    const pg = q.connection.driver.options.type === 'postgres';
    await q.query(`CREATE INDEX idx_permissions_path ON permissions ${pg ? 'USING hash ' : ''}(path)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP INDEX idx_permissions_path');
  }
}
