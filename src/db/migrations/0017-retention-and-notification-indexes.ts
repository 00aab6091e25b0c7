import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * RetentionNotificationIndexes1765497600000 (issue 13): two lookups that went through a whole
 * table.
 * - Every upload asks which users watch its folders (core/events/mail.ts): notifications by path,
 *   which had no index. PostgreSQL gets a hash index, as permissions' path has (migration 0014):
 *   SPEC allows a notification path of 5,000 characters, past what a btree row may hold.
 * - The retention job (core/events/retention.ts) finds finished webhook deliveries older than the
 *   retention by creation time, now through (created_at, id), and stops at the first one too young.
 */
export class RetentionNotificationIndexes1765497600000 implements MigrationInterface {
  name = 'RetentionNotificationIndexes1765497600000';

  async up(q: QueryRunner): Promise<void> {
    const pg = q.connection.driver.options.type === 'postgres';
    await q.query(`CREATE INDEX idx_notifications_path ON notifications ${pg ? 'USING hash ' : ''}(path)`);
    await q.query('CREATE INDEX idx_webhook_deliveries_created ON webhook_deliveries (created_at, id)');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP INDEX idx_webhook_deliveries_created');
    await q.query('DROP INDEX idx_notifications_path');
  }
}
