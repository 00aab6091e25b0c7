import { Table, TableForeignKey, TableIndex, type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Bundles1765065600000 (issue 14): share links. A bundle is one user's link to one or more paths,
 * reached without an account through a random code in its URL: kind (download, preview, upload),
 * optional password (bcrypt), expiry and maximum uses, and how often it was used. Deleting the
 * bundle revokes the link; deleting its user deletes their bundles. Table API only, so the one
 * migration serves SQLite and PostgreSQL.
 */
export class Bundles1765065600000 implements MigrationInterface {
  name = 'Bundles1765065600000';

  async up(q: QueryRunner): Promise<void> {
    await q.createTable(
      new Table({
        name: 'bundles',
        columns: [
          {
            name: 'id',
            type: 'integer',
            isPrimary: true,
            isGenerated: true,
            generationStrategy: 'increment',
          },
          { name: 'user_id', type: 'integer' },
          { name: 'code', type: 'varchar', length: '64' },
          { name: 'kind', type: 'varchar', length: '10' },
          { name: 'paths', type: 'text' },
          { name: 'password_hash', type: 'varchar', length: '100', isNullable: true },
          { name: 'description', type: 'text', default: "''" },
          { name: 'expires_at', type: 'bigint', isNullable: true },
          { name: 'max_uses', type: 'integer', isNullable: true },
          { name: 'uses', type: 'integer', default: 0 },
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
          new TableIndex({ name: 'idx_bundles_code', columnNames: ['code'], isUnique: true }),
          new TableIndex({ name: 'idx_bundles_user', columnNames: ['user_id'] }),
        ],
      }),
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropTable('bundles');
  }
}
