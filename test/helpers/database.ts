/**
 * Fresh PostgreSQL databases on a server the tests or the soak are given: made empty, handed out
 * by URL, dropped afterwards (closing whatever connections are still open). The server itself is
 * never stopped.
 */
import pg from 'pg';

let counter = 0;

/** FreshDatabase is an empty database's URL and the drop that removes it. */
export interface FreshDatabase {
  name: string;
  url: string;
  drop: () => Promise<void>;
}

/** freshDatabase makes an empty database named `<prefix>_<pid>_<time>_<n>` on the server of `serverUrl`. */
export async function freshDatabase(serverUrl: string, prefix = 'svc_t'): Promise<FreshDatabase> {
  const name = `${prefix}_${process.pid}_${Date.now()}_${counter++}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    name,
    url: url.toString(),
    drop: async () => {
      const c = new pg.Client({ connectionString: serverUrl });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}
