import { Table, TableForeignKey, TableIndex, type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * PublicKeys1764028800000 adds the SSH public keys users log in with over SFTP (one row per key,
 * removed with its user). Table API only, so the one migration serves SQLite and PostgreSQL.
 */
export class PublicKeys1764028800000 implements MigrationInterface {
  name = 'PublicKeys1764028800000';

  async up(q: QueryRunner): Promise<void> {
    await q.createTable(
      new Table({
        name: 'public_keys',
        columns: [
          {
            name: 'id',
            type: 'integer',
            isPrimary: true,
            isGenerated: true,
            generationStrategy: 'increment',
          },
          { name: 'user_id', type: 'integer' },
          { name: 'title', type: 'varchar', length: '100', default: "''" },
          { name: 'public_key', type: 'text' },
          { name: 'fingerprint', type: 'varchar', length: '64' },
          { name: 'created_at', type: 'bigint' },
        ],
        foreignKeys: [
          new TableForeignKey({
            columnNames: ['user_id'],
            referencedTableName: 'users',
            referencedColumnNames: ['id'],
            onDelete: 'CASCADE',
          }),
        ],
        indices: [
          new TableIndex({ columnNames: ['user_id', 'fingerprint'], isUnique: true }),
          new TableIndex({ columnNames: ['fingerprint'] }),
        ],
      }),
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropTable('public_keys');
  }
}
