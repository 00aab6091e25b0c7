import { Table, type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * ClientLogins1764806400000 (issue 11, item 4): the `login` cadence of WebDAV clients (one
 * `login` Action per user, client IP and interface per window) moves from each process's memory
 * into the database, so two instances behind a load balancer record one `login`, not one each.
 */
export class ClientLogins1764806400000 implements MigrationInterface {
  name = 'ClientLogins1764806400000';

  async up(q: QueryRunner): Promise<void> {
    await q.createTable(
      new Table({
        name: 'client_logins',
        columns: [
          { name: 'user_id', type: 'integer', isPrimary: true },
          { name: 'ip', type: 'varchar', length: '45', isPrimary: true },
          { name: 'interface', type: 'varchar', length: '20', isPrimary: true },
          { name: 'login_at', type: 'bigint' },
        ],
      }),
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropTable('client_logins');
  }
}
