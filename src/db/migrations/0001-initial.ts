import { Table, TableForeignKey, TableIndex, type MigrationInterface, type QueryRunner } from 'typeorm';

// Written with TypeORM's Table API, which emits each database's own DDL, so one migration serves
// SQLite and PostgreSQL. Times are epoch milliseconds (bigint) on both.
const id = {
  name: 'id',
  type: 'integer',
  isPrimary: true,
  isGenerated: true,
  generationStrategy: 'increment',
} as const;
const time = (name: string, isNullable = false) => ({ name, type: 'bigint', isNullable });
const flag = (name: string, value: boolean) => ({ name, type: 'boolean', default: value });
const text = (name: string, length?: number, isNullable = false) =>
  length
    ? { name, type: 'varchar', length: String(length), isNullable, default: isNullable ? undefined : "''" }
    : { name, type: 'text', isNullable, default: isNullable ? undefined : "''" };
const cascadeTo = (column: string, table: string) =>
  new TableForeignKey({
    columnNames: [column],
    referencedTableName: table,
    referencedColumnNames: ['id'],
    onDelete: 'CASCADE',
  });

/** Initial1763769600000 creates the accounts, permissions, sessions, actions and files tables. */
export class Initial1763769600000 implements MigrationInterface {
  name = 'Initial1763769600000';

  async up(q: QueryRunner): Promise<void> {
    await q.createTable(
      new Table({
        name: 'users',
        columns: [
          id,
          { name: 'username', type: 'varchar', length: '50' },
          { name: 'username_key', type: 'varchar', length: '50', isUnique: true },
          { name: 'password_hash', type: 'varchar', length: '100', isNullable: true },
          text('name', 50),
          text('email', 50),
          text('notes'),
          flag('ftp_permission', true),
          flag('web_permission', true),
          flag('sftp_permission', true),
          flag('dav_permission', true),
          flag('restapi_permission', true),
          flag('attachments_permission', false),
          flag('self_managed', true),
          flag('require_password_change', false),
          flag('site_admin', false),
          text('allowed_ips'),
          text('user_root', 250),
          { name: 'failed_logins', type: 'integer', default: 0 },
          time('failed_login_window_start', true),
          time('locked_until', true),
          time('last_login_at', true),
          time('created_at'),
          time('updated_at'),
        ],
      }),
    );
    await q.createTable(
      new Table({
        name: 'groups',
        columns: [id, { name: 'name', type: 'varchar', length: '50' }, text('notes'), time('created_at')],
      }),
    );
    await q.createTable(
      new Table({
        name: 'group_memberships',
        columns: [
          { name: 'group_id', type: 'integer', isPrimary: true },
          { name: 'user_id', type: 'integer', isPrimary: true },
        ],
        foreignKeys: [cascadeTo('group_id', 'groups'), cascadeTo('user_id', 'users')],
        indices: [new TableIndex({ columnNames: ['user_id'] })],
      }),
    );
    await q.createTable(
      new Table({
        name: 'permissions',
        columns: [
          id,
          { name: 'path', type: 'varchar', length: '5000' },
          { name: 'permission', type: 'varchar', length: '20' },
          { name: 'user_id', type: 'integer', isNullable: true },
          { name: 'group_id', type: 'integer', isNullable: true },
          time('created_at'),
        ],
        foreignKeys: [cascadeTo('user_id', 'users'), cascadeTo('group_id', 'groups')],
        indices: [
          new TableIndex({ columnNames: ['user_id'] }),
          new TableIndex({ columnNames: ['group_id'] }),
        ],
      }),
    );
    await q.createTable(
      new Table({
        name: 'notifications',
        columns: [
          id,
          { name: 'path', type: 'varchar', length: '5000' },
          { name: 'user_id', type: 'integer' },
          time('created_at'),
        ],
        foreignKeys: [cascadeTo('user_id', 'users')],
        indices: [new TableIndex({ columnNames: ['user_id'] })],
      }),
    );
    await q.createTable(
      new Table({
        name: 'api_keys',
        columns: [
          id,
          { name: 'user_id', type: 'integer', isNullable: true },
          { name: 'key_digest', type: 'varchar', length: '64', isUnique: true },
          { name: 'key_prefix', type: 'varchar', length: '16' },
          { name: 'descriptive_label', type: 'varchar', length: '100' },
          text('description'),
          text('name', 100),
          { name: 'permission_set', type: 'varchar', length: '30', default: "'full'" },
          text('platform', 50),
          time('created_at'),
          time('expires_at', true),
          time('last_use_at', true),
        ],
        foreignKeys: [cascadeTo('user_id', 'users')],
        indices: [new TableIndex({ columnNames: ['user_id', 'expires_at'] })],
      }),
    );
    await q.createTable(
      new Table({
        name: 'sessions',
        columns: [
          { name: 'id_digest', type: 'varchar', length: '64', isPrimary: true },
          { name: 'user_id', type: 'integer' },
          text('ip', 45),
          { name: 'interface', type: 'varchar', length: '20' },
          { name: 'reauthentication_failures', type: 'integer', default: 0 },
          time('created_at'),
          time('last_active_at'),
        ],
        foreignKeys: [cascadeTo('user_id', 'users')],
        indices: [
          new TableIndex({ columnNames: ['user_id'] }),
          new TableIndex({ columnNames: ['last_active_at'] }),
        ],
      }),
    );
    await q.createTable(
      new Table({
        name: 'actions',
        columns: [
          // SQLite's INTEGER key is already 64-bit, and AUTOINCREMENT takes no other type name.
          { ...id, type: q.connection.driver.options.type === 'postgres' ? 'bigint' : 'integer' },
          time('when'),
          { name: 'action', type: 'varchar', length: '30' },
          text('path', 5000),
          text('source', 5000),
          text('destination', 5000),
          text('display'),
          text('ip', 45),
          { name: 'user_id', type: 'integer', isNullable: true },
          text('username', 50),
          text('interface', 20),
          text('failure_type', 50),
          { name: 'targets', type: 'text', default: "'[]'" },
        ],
        indices: [
          new TableIndex({ columnNames: ['when'] }),
          new TableIndex({ columnNames: ['user_id', 'when'] }),
          // Per-IP failed-login counting (DESIGN.md lockout) reads this index.
          new TableIndex({ columnNames: ['ip', 'action', 'when'] }),
        ],
      }),
    );
    await q.createTable(
      new Table({
        name: 'files',
        columns: [
          id,
          { name: 'path', type: 'varchar', length: '600', isUnique: true },
          { name: 'parent', type: 'varchar', length: '600' },
          { name: 'name', type: 'varchar', length: '300' },
          { name: 'type', type: 'varchar', length: '10' },
          { name: 'size', type: 'bigint', isNullable: true },
          time('mtime'),
          { name: 'md5', type: 'varchar', length: '32', isNullable: true },
          { name: 'crc32', type: 'varchar', length: '8', isNullable: true },
          { name: 'blob_id', type: 'varchar', length: '64', isNullable: true },
        ],
        indices: [new TableIndex({ columnNames: ['parent', 'name'] })],
      }),
    );
  }

  async down(q: QueryRunner): Promise<void> {
    for (const table of [
      'files',
      'actions',
      'sessions',
      'api_keys',
      'notifications',
      'permissions',
      'group_memberships',
      'groups',
      'users',
    ]) {
      await q.dropTable(table);
    }
  }
}
