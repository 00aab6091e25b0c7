import { TableColumn, TableIndex, type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * EventFaults1764460800000 (issue 7, second part): webhook-log exports keep their CSV in the blob
 * store (streamed, never a whole text column) and are built under a lease, by one instance; a
 * queued e-mail change counts its failed sends and keeps the last error, so an unreachable SMTP
 * server leaves an explainable state; webhook claims read an index of pending deliveries only,
 * however long the delivery log grows.
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
    // The claim's query walks this index in its order and stops after a batch: only pending rows,
    // so delivered ones (the bulk of the table) are never visited, whatever the statistics say.
    await q.createIndex(
      'webhook_deliveries',
      new TableIndex({
        name: 'webhook_deliveries_pending',
        columnNames: ['next_attempt_at', 'id'],
        where: "status = 'pending'",
      }),
    );
    if (q.connection.driver.options.type === 'postgres') {
      // A queue table: rows turn over fast, so vacuum and analyze it after a thousand changes
      // rather than a fifth of the table, or claims walk dead rows under stale statistics.
      await q.query(
        'ALTER TABLE webhook_deliveries SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000, autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 1000)',
      );
    }
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropIndex('webhook_deliveries', 'webhook_deliveries_pending');
    if (q.connection.driver.options.type === 'postgres')
      await q.query(
        'ALTER TABLE webhook_deliveries RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, autovacuum_analyze_scale_factor, autovacuum_analyze_threshold)',
      );
    await q.dropColumns('mail_changes', ['attempts', 'last_error']);
    await q.dropColumns('action_notification_exports', ['blob_id', 'csv_size', 'locked_until', 'lease']);
    await q.addColumn(
      'action_notification_exports',
      new TableColumn({ name: 'csv', type: 'text', isNullable: true }),
    );
  }
}
