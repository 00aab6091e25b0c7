import { Table, TableIndex, type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Transfers1763856000000 adds multi-step uploads, their parts, the queue of blobs to collect, and
 * the indexes that let a folder listing sorted by size or mtime page without sorting the folder.
 */
export class Transfers1763856000000 implements MigrationInterface {
  name = 'Transfers1763856000000';

  async up(q: QueryRunner): Promise<void> {
    await q.createIndex(
      'files',
      new TableIndex({ name: 'idx_files_parent_size', columnNames: ['parent', 'size', 'name'] }),
    );
    await q.createIndex(
      'files',
      new TableIndex({ name: 'idx_files_parent_mtime', columnNames: ['parent', 'mtime', 'name'] }),
    );
    await q.createTable(
      new Table({
        name: 'uploads',
        columns: [
          { name: 'ref', type: 'varchar', length: '64', isPrimary: true },
          { name: 'path', type: 'varchar', length: '600' },
          { name: 'user_id', type: 'integer', isNullable: true },
          { name: 'api_key_id', type: 'integer', isNullable: true },
          { name: 'interface', type: 'varchar', length: '20' },
          { name: 'ip', type: 'varchar', length: '45', default: "''" },
          { name: 'blob_id', type: 'varchar', length: '64' },
          { name: 'store_upload_id', type: 'varchar', length: '1024', isNullable: true },
          { name: 'restart', type: 'bigint', default: 0 },
          { name: 'restart_blob_id', type: 'varchar', length: '64', isNullable: true },
          { name: 'reserved_parts', type: 'integer', default: 0 },
          { name: 'created_at', type: 'bigint' },
          { name: 'expires_at', type: 'bigint' },
        ],
        indices: [new TableIndex({ columnNames: ['expires_at'] })],
      }),
    );
    await q.createTable(
      new Table({
        name: 'upload_parts',
        columns: [
          { name: 'ref', type: 'varchar', length: '64', isPrimary: true },
          { name: 'part_number', type: 'integer', isPrimary: true },
          { name: 'blob_id', type: 'varchar', length: '64' },
          { name: 'size', type: 'bigint' },
          { name: 'md5', type: 'varchar', length: '32' },
          { name: 'crc32', type: 'varchar', length: '8' },
        ],
        foreignKeys: [
          {
            columnNames: ['ref'],
            referencedTableName: 'uploads',
            referencedColumnNames: ['ref'],
            onDelete: 'CASCADE',
          },
        ],
      }),
    );
    await q.createTable(
      new Table({
        name: 'blob_garbage',
        columns: [
          { name: 'blob_id', type: 'varchar', length: '64', isPrimary: true },
          { name: 'since', type: 'bigint' },
        ],
        indices: [new TableIndex({ columnNames: ['since'] })],
      }),
    );
    await q.createIndex('files', new TableIndex({ name: 'idx_files_blob', columnNames: ['blob_id'] }));
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropIndex('files', 'idx_files_blob');
    await q.dropTable('blob_garbage');
    await q.dropTable('upload_parts');
    await q.dropTable('uploads');
    await q.dropIndex('files', 'idx_files_parent_mtime');
    await q.dropIndex('files', 'idx_files_parent_size');
  }
}
