import { TableColumn, TableIndex, type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * EventFaults1764460800000 (issue 7, second part): webhook-log exports keep their CSV in the blob
 * store (streamed, never a whole text column) and are built under a lease, by one instance; a queued e-mail change counts its failed sends and
 * keeps the last error, so an unreachable SMTP server leaves an explainable state; webhook claims
 * are found by their lease token through an index, however long the delivery log grows.
 */
export class EventFaults1764460800000 implements MigrationInterface {
  name = 'EventFaults1764460800000';

  async up(q: QueryRunner): Promise<void> {
    await q.dropColumn('action_notification_exports', 'csv');
    await q.addColumns('action_notification_exports', [
      new TableColumn({ name: 'blob_id', type: 'varchar', length: '64', isNullable: true }),
      new TableColumn({ name: 'csv_size', type: 'bigint', default: 0 }),
      new TableColumn({ name: 'locked_until', type: 'bigint', isNullable: true }),
      new TableColumn({ name: 'lease', type: 'varchar', length: '40', isNullable: true }),
    ]);
    await q.addColumns('mail_changes', [
      new TableColumn({ name: 'attempts', type: 'integer', default: 0 }),
      new TableColumn({ name: 'last_error', type: 'text', default: "''" }),
    ]);
    await q.createIndex('webhook_deliveries', new TableIndex({ columnNames: ['lease'] }));
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropIndex('webhook_deliveries', new TableIndex({ columnNames: ['lease'] }));
    await q.dropColumns('mail_changes', ['attempts', 'last_error']);
    await q.dropColumns('action_notification_exports', ['blob_id', 'csv_size', 'locked_until', 'lease']);
    await q.addColumn(
      'action_notification_exports',
      new TableColumn({ name: 'csv', type: 'text', isNullable: true }),
    );
  }
}
