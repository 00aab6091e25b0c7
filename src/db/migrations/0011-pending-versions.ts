import { Table, TableIndex, type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * PendingVersions1764979200000 (issue 20): an upload cut off mid-way (FTP STOR/APPE, an SFTP file
 * its client never closed, a WebDAV PUT whose body stopped) keeps what arrived as a pending version
 * of its path, owned by the user who sent it: only that user sees its size and may resume it, on
 * any protocol and any instance, until it completes, is replaced by a new upload from offset 0, or
 * expires (`uploads.pending_hours`). One per user and path.
 */
export class PendingVersions1764979200000 implements MigrationInterface {
  name = 'PendingVersions1764979200000';

  async up(q: QueryRunner): Promise<void> {
    await q.createTable(
      new Table({
        name: 'pending_versions',
        columns: [
          { name: 'id', type: 'varchar', length: '32', isPrimary: true },
          { name: 'user_id', type: 'integer' },
          { name: 'path', type: 'varchar', length: '600' },
          { name: 'parent', type: 'varchar', length: '600' },
          { name: 'blob_id', type: 'varchar', length: '64' },
          { name: 'size', type: 'bigint' },
          { name: 'interface', type: 'varchar', length: '20' },
          { name: 'updated_at', type: 'bigint' },
          { name: 'expires_at', type: 'bigint' },
        ],
        indices: [
          new TableIndex({
            name: 'idx_pending_versions_user_path',
            columnNames: ['user_id', 'path'],
            isUnique: true,
          }),
          new TableIndex({ name: 'idx_pending_versions_user_parent', columnNames: ['user_id', 'parent'] }),
          new TableIndex({ name: 'idx_pending_versions_blob', columnNames: ['blob_id'] }),
          new TableIndex({ name: 'idx_pending_versions_expires', columnNames: ['expires_at'] }),
        ],
      }),
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropTable('pending_versions');
  }
}
