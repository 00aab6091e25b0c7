import { Table, TableIndex, type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * BlobLeases1764547200000 (issue 19, item 2): a reader holds a lease on the blob it streams, so a
 * deleted or replaced blob is reclaimed as soon as no reader holds it instead of after a fixed
 * delay. A lease is a row (not process memory) so a reader on one instance keeps its blob from
 * every other instance's collector; it expires unless its instance renews it, so the leases of an
 * instance that died stop holding anything.
 */
export class BlobLeases1764547200000 implements MigrationInterface {
  name = 'BlobLeases1764547200000';

  async up(q: QueryRunner): Promise<void> {
    await q.createTable(
      new Table({
        name: 'blob_leases',
        columns: [
          { name: 'id', type: 'varchar', length: '32', isPrimary: true },
          { name: 'blob_id', type: 'varchar', length: '64' },
          { name: 'instance', type: 'varchar', length: '32' },
          { name: 'expires_at', type: 'bigint' },
        ],
        indices: [new TableIndex({ name: 'idx_blob_leases_blob', columnNames: ['blob_id', 'expires_at'] })],
      }),
    );
    // Kept up to date by the collector's reference checks (a file's blob, a part's, an upload's).
    await q.createIndex(
      'upload_parts',
      new TableIndex({ name: 'idx_upload_parts_blob', columnNames: ['blob_id'] }),
    );
    if (q.connection.driver.options.type === 'postgres') {
      // Leases live minutes and are renewed while they matter: not worth a WAL record and a flush
      // at every download's start and end. After a crash of the server PostgreSQL empties the
      // table; the collector then treats the blobs as unread (see blobs.ts "Leases").
      await q.query('ALTER TABLE blob_leases SET UNLOGGED');
    }
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropIndex('upload_parts', 'idx_upload_parts_blob');
    await q.dropTable('blob_leases');
  }
}
