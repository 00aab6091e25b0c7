import { Table, TableIndex, type MigrationInterface, type QueryRunner } from 'typeorm';

const bigId = (q: QueryRunner) =>
  ({
    name: 'id',
    // SQLite's INTEGER key is already 64-bit, and AUTOINCREMENT takes no other type name.
    type: q.connection.driver.options.type === 'postgres' ? 'bigint' : 'integer',
    isPrimary: true,
    isGenerated: true,
    generationStrategy: 'increment',
  }) as const;
const time = (name: string, isNullable = false) => ({ name, type: 'bigint', isNullable });
const text = (name: string, length?: number) =>
  length
    ? { name, type: 'varchar', length: String(length), default: "''" }
    : { name, type: 'text', default: "''" };

/**
 * Events1764115200000 adds the durable event tables (issue 7): the webhook delivery queue and its
 * attempt log (SPEC's ActionNotificationExportResult), webhook-log exports, the e-mail
 * notification queue and billing line items. Table API only, so one migration serves both databases.
 */
export class Events1764115200000 implements MigrationInterface {
  name = 'Events1764115200000';

  async up(q: QueryRunner): Promise<void> {
    await q.createTable(
      new Table({
        name: 'webhook_deliveries',
        columns: [
          bigId(q),
          { name: 'action_id', type: 'bigint' },
          time('created_at'),
          text('url', 2000),
          text('method', 10),
          text('request_headers'),
          text('body'),
          text('path', 5000),
          text('folder', 5000),
          text('status', 20),
          { name: 'attempts', type: 'integer', default: 0 },
          time('next_attempt_at'),
          time('locked_until', true),
          { name: 'lease', type: 'varchar', length: '40', isNullable: true },
        ],
        indices: [new TableIndex({ columnNames: ['status', 'next_attempt_at'] })],
      }),
    );
    await q.createTable(
      new Table({
        name: 'webhook_attempts',
        columns: [
          bigId(q),
          { name: 'delivery_id', type: 'bigint' },
          time('created_at'),
          { name: 'status', type: 'integer', default: 0 },
          text('message'),
          { name: 'success', type: 'boolean', default: false },
          text('request_headers'),
          text('request_method', 10),
          text('request_url', 2000),
          text('path', 5000),
          text('folder', 5000),
        ],
        indices: [
          new TableIndex({ columnNames: ['created_at'] }),
          new TableIndex({ columnNames: ['delivery_id'] }),
        ],
      }),
    );
    await q.createTable(
      new Table({
        name: 'action_notification_exports',
        columns: [
          bigId(q),
          { name: 'user_id', type: 'integer', isNullable: true },
          time('created_at'),
          text('status', 20),
          text('query'),
          { name: 'snapshot_id', type: 'bigint', default: 0 },
          { name: 'result_count', type: 'integer', default: 0 },
          text('message'),
          { name: 'csv', type: 'text', isNullable: true },
        ],
        indices: [new TableIndex({ columnNames: ['status'] })],
      }),
    );
    await q.createTable(
      new Table({
        name: 'mail_changes',
        columns: [
          bigId(q),
          { name: 'user_id', type: 'integer' },
          { name: 'action_id', type: 'bigint' },
          text('action', 30),
          text('path', 5000),
          time('when'),
          time('due_at'),
          time('locked_until', true),
          { name: 'lease', type: 'varchar', length: '40', isNullable: true },
        ],
        indices: [new TableIndex({ columnNames: ['user_id'] }), new TableIndex({ columnNames: ['due_at'] })],
      }),
    );
    await q.createTable(
      new Table({
        name: 'account_line_items',
        columns: [
          { name: 'id', type: 'bigint', isPrimary: true },
          text('type', 10),
          { name: 'amount', type: 'double precision', default: 0 },
          { name: 'balance', type: 'double precision', default: 0 },
          time('created_at'),
          text('currency', 10),
          text('method', 50),
          time('payment_reversed_at', true),
          text('payment_type', 50),
          text('site_name', 250),
          text('invoice_line_items'),
          text('payment_line_items'),
        ],
        indices: [new TableIndex({ columnNames: ['type', 'id'] })],
      }),
    );
  }

  async down(q: QueryRunner): Promise<void> {
    for (const t of [
      'account_line_items',
      'mail_changes',
      'action_notification_exports',
      'webhook_attempts',
      'webhook_deliveries',
    ])
      await q.dropTable(t);
  }
}
