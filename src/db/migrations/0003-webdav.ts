import { Table, TableIndex, type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Webdav1763942400000 adds WebDAV's locks and dead properties. Both live in the database, keyed by
 * site path, so every instance behind a load balancer honours the same locks and sees the same
 * properties (DESIGN.md "Scale-out").
 */
export class Webdav1763942400000 implements MigrationInterface {
  name = 'Webdav1763942400000';

  async up(q: QueryRunner): Promise<void> {
    await q.createTable(
      new Table({
        name: 'dav_locks',
        columns: [
          { name: 'token', type: 'varchar', length: '64', isPrimary: true },
          { name: 'path', type: 'varchar', length: '600' },
          { name: 'depth', type: 'varchar', length: '10' },
          { name: 'scope', type: 'varchar', length: '10' },
          { name: 'owner', type: 'text', default: "''" },
          { name: 'user_id', type: 'integer', isNullable: true },
          { name: 'timeout_seconds', type: 'integer' },
          { name: 'created_at', type: 'bigint' },
          { name: 'expires_at', type: 'bigint' },
        ],
        indices: [
          new TableIndex({ name: 'idx_dav_locks_path', columnNames: ['path'] }),
          new TableIndex({ name: 'idx_dav_locks_expires', columnNames: ['expires_at'] }),
        ],
      }),
    );
    await q.createTable(
      new Table({
        name: 'dav_properties',
        columns: [
          {
            name: 'id',
            type: 'integer',
            isPrimary: true,
            isGenerated: true,
            generationStrategy: 'increment',
          },
          { name: 'path', type: 'varchar', length: '600' },
          { name: 'namespace', type: 'varchar', length: '1024' },
          { name: 'name', type: 'varchar', length: '255' },
          { name: 'value', type: 'text' },
        ],
        indices: [
          new TableIndex({
            name: 'idx_dav_properties_key',
            columnNames: ['path', 'namespace', 'name'],
            isUnique: true,
          }),
        ],
      }),
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropTable('dav_properties');
    await q.dropTable('dav_locks');
  }
}
