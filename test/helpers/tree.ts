/**
 * TreeProbe reads a gateway's database from outside, as an operator's SQL would, to check the
 * namespace's invariants after a test (issue 11: "a query, not a listing"): every row's parent
 * folder exists, every blob a row refers to exists in the local blob store
 * (<data_dir>/blobs/<first two characters>/<id>, src/core/files/blobstores/local.ts), no row is left
 * under a prefix that moved away; and it counts Action rows. PostgreSQL through pg; SQLite through
 * a read-only better-sqlite3 handle on the gateway's WAL-mode file, which sees every commit.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import pg from 'pg';

/** SqliteReader is the part of better-sqlite3 the probe uses (the package ships no types). */
interface SqliteReader {
  prepare(sql: string): { all(...params: unknown[]): unknown[] };
  close(): void;
}
type SqliteOpen = new (file: string, opts: { readonly: boolean; fileMustExist: boolean }) => SqliteReader;

type Param = string | number;

/** TreeProbe is a read-only view of one gateway database and its local blob folder. */
export class TreeProbe {
  private constructor(
    private readonly query: (sql: string, params: Param[]) => Promise<Record<string, unknown>[]>,
    private readonly end: () => Promise<void>,
    private readonly blobDir: string,
  ) {}

  /** open connects to PostgreSQL at `databaseUrl`, or to `<dataDir>/gateway.sqlite` when it is empty. */
  static async open(dataDir: string, databaseUrl: string): Promise<TreeProbe> {
    const blobDir = path.join(dataDir, 'blobs');
    if (databaseUrl) {
      const client = new pg.Client({ connectionString: databaseUrl });
      await client.connect();
      return new TreeProbe(
        async (sql, params) => {
          let n = 0;
          return (
            await client.query(
              sql.replace(/\?/g, () => `$${++n}`),
              params,
            )
          ).rows as Record<string, unknown>[];
        },
        () => client.end(),
        blobDir,
      );
    }
    const Sqlite = createRequire(import.meta.url)('better-sqlite3') as SqliteOpen;
    const db = new Sqlite(path.join(dataDir, 'gateway.sqlite'), { readonly: true, fileMustExist: true });
    return new TreeProbe(
      async (sql, params) => db.prepare(sql).all(...params) as Record<string, unknown>[],
      async () => void db.close(),
      blobDir,
    );
  }

  /** orphans are the rows whose parent folder has no row of type directory (the root '' always exists). */
  async orphans(): Promise<string[]> {
    const rows = await this.query(
      `SELECT f.path FROM files f WHERE f.parent <> '' AND NOT EXISTS
         (SELECT 1 FROM files d WHERE d.path = f.parent AND d.type = 'directory')`,
      [],
    );
    return rows.map((r) => String(r.path));
  }

  /**
   * blobs checks every file row's blob: `checked` is how many rows refer to one, `missing` names
   * those whose blob is not in the blob store, as `path (blob id)`.
   */
  async blobs(): Promise<{ checked: number; missing: string[] }> {
    const rows = await this.query(
      `SELECT path, blob_id FROM files WHERE type = 'file' AND blob_id IS NOT NULL`,
      [],
    );
    const missing = rows
      .filter((r) => {
        const id = String(r.blob_id);
        return !existsSync(path.join(this.blobDir, id.slice(0, 2), id));
      })
      .map((r) => `${String(r.path)} (blob ${String(r.blob_id)})`);
    return { checked: rows.length, missing };
  }

  /** under lists the paths of the row `folder` and every row below it. */
  async under(folder: string): Promise<string[]> {
    const prefix = `${folder}/`;
    const rows = await this.query(
      `SELECT path FROM files WHERE path = ? OR substr(path, 1, ?) = ? ORDER BY path`,
      [folder, [...prefix].length, prefix],
    );
    return rows.map((r) => String(r.path));
  }

  /** file reads the row of a site path, or null. */
  async file(sitePath: string): Promise<{ type: string; md5: string | null; size: number } | null> {
    const rows = await this.query(`SELECT type, md5, size FROM files WHERE path = ?`, [sitePath]);
    const r = rows[0];
    if (!r) return null;
    return { type: String(r.type), md5: r.md5 === null ? null : String(r.md5), size: Number(r.size) };
  }

  /** actions counts Action rows of one kind whose `column` is one of `values`. */
  async actions(action: string, column: 'path' | 'source', values: string[]): Promise<number> {
    const rows = await this.query(
      `SELECT count(*) AS n FROM actions WHERE action = ? AND ${column} IN (${values.map(() => '?').join(', ')})`,
      [action, ...values],
    );
    return Number(rows[0]!.n);
  }

  /** uploadExists tells whether a multi-step upload's row is still there. */
  async uploadExists(ref: string): Promise<boolean> {
    return (await this.query(`SELECT ref FROM uploads WHERE ref = ?`, [ref])).length > 0;
  }

  /** close ends the connection. */
  close(): Promise<void> {
    return this.end();
  }
}
