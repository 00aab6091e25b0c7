import { Table, TableIndex, type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Connections1765152000000 (issue 15, item 4): live connection presence. Each FTP, SFTP and
 * WebDAV session (and each instance's own) is a row its instance writes and renews every few
 * seconds in one statement, with the transfer in progress and its bytes so far; a row not renewed
 * for a while belongs to an instance that died and is not shown, then deleted. Ending a
 * connection marks its row; the owning instance closes it at its next renewal. Table API only, so
 * the one migration serves SQLite and PostgreSQL. Each instance also renews a row of its own
 * (`instances`), which the Site page lists.
 */
export class Connections1765152000000 implements MigrationInterface {
  name = 'Connections1765152000000';

  async up(q: QueryRunner): Promise<void> {
    await q.createTable(
      new Table({
        name: 'connections',
        columns: [
          // Chosen by the instance (random, below 2^48), so it can write the row with its first renewal.
          { name: 'id', type: 'bigint', isPrimary: true },
          { name: 'instance', type: 'varchar', length: '64' },
          { name: 'interface', type: 'varchar', length: '10' },
          { name: 'user_id', type: 'integer', isNullable: true },
          { name: 'username', type: 'varchar', length: '50', default: "''" },
          { name: 'ip', type: 'varchar', length: '64', default: "''" },
          { name: 'connected_at', type: 'bigint' },
          { name: 'last_seen_at', type: 'bigint' },
          { name: 'transfer_path', type: 'text', isNullable: true },
          { name: 'transfer_direction', type: 'varchar', length: '10', isNullable: true },
          { name: 'transfer_bytes', type: 'bigint', default: 0 },
          { name: 'transfer_started_at', type: 'bigint', isNullable: true },
          { name: 'end_requested_at', type: 'bigint', isNullable: true },
        ],
        indices: [
          new TableIndex({ name: 'idx_connections_seen', columnNames: ['last_seen_at'] }),
          new TableIndex({ name: 'idx_connections_instance', columnNames: ['instance'] }),
        ],
      }),
    );
    // The instances serving the site, each renewed by its own process (the Site page's list).
    await q.createTable(
      new Table({
        name: 'instances',
        columns: [
          { name: 'id', type: 'varchar', length: '64', isPrimary: true },
          { name: 'host', type: 'varchar', length: '100' },
          { name: 'pid', type: 'integer' },
          { name: 'version', type: 'varchar', length: '40' },
          { name: 'started_at', type: 'bigint' },
          { name: 'last_seen_at', type: 'bigint' },
        ],
      }),
    );
    if (q.connection.driver.options.type === 'postgres') {
      // Rewritten every few seconds and worthless after a crash of the server (every instance
      // writes its rows again at its next renewal): not worth a WAL record per renewal.
      await q.query('ALTER TABLE connections SET UNLOGGED');
      await q.query('ALTER TABLE instances SET UNLOGGED');
    }
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropTable('instances');
    await q.dropTable('connections');
  }
}
