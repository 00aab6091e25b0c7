/**
 * The site tree's rows (DESIGN.md "Namespace in the database"): files and folders are rows, the
 * bytes are blobs. Everything here runs inside a caller's unit of work on site paths, with no
 * permission checks: FileSession (session.ts) authorizes, then calls these.
 *
 * Subtrees are selected as the byte range from `folder/` to `folder0` (db/sql.ts inside), which is
 * exact and case-sensitive on SQLite and PostgreSQL alike and seeks the path index (LIKE is
 * case-insensitive on SQLite; a substr test reads every row).
 */
import type { EntityManager, SelectQueryBuilder } from 'typeorm';
import { FileEntity, type FileRow } from '../../db/entities.ts';
import { inside, insideMarked, marks, rowOf, sql, sqlArrays } from '../../db/sql.ts';
import { GatewayError } from '../errors.ts';
import { ancestorsOf, baseName, parentOf } from '../paths.ts';
import { markGarbage, markGarbageInside } from './blobs.ts';

export { markGarbage };

/** Entry is SPEC's file or folder entry, in the path form of the session that asked. */
export interface Entry {
  path: string;
  type: 'file' | 'directory';
  size: number | null;
  mtime: Date;
  crc32: string | null;
  md5: string | null;
}

/** ROOT is the synthetic row of the site root, which always exists. */
export const ROOT: FileRow = {
  id: 0,
  path: '',
  parent: '',
  name: '',
  type: 'directory',
  size: null,
  mtime: new Date(0),
  md5: null,
  crc32: null,
  blob_id: null,
};

/** ListOptions orders and pages a folder listing (SPEC GET /folders). */
export interface ListOptions {
  sort: 'path' | 'size' | 'mtime';
  direction: 'asc' | 'desc';
  /** only names containing this text (case-insensitive) */
  search?: string | undefined;
  offset: number;
  limit: number;
  /**
   * only names after this one (name order ascending only): a page that starts where the last one
   * ended reads just its rows, where an offset would walk every row before it
   */
  after?: string | undefined;
}

const charLength = (s: string) => [...s].length;

/** subtree adds "path is strictly inside `folder`" to a query of the files table. */
export function inSubtree<T extends object>(
  qb: SelectQueryBuilder<T>,
  alias: string,
  folder: string,
): SelectQueryBuilder<T> {
  if (folder === '') return qb.andWhere(`${alias}.path <> ''`);
  return qb.andWhere(...inside(qb, `${alias}.path`, folder));
}

// The files columns as FileRow names them; hand-written (db/sql.ts): these run for every file.
const FILE_COLUMNS = 'id, path, parent, name, type, size, mtime, md5, crc32, blob_id';
type RawFileRow = Record<string, unknown>;
const fileRow = (r: RawFileRow): FileRow => rowOf(FileEntity, r);

/** getRow finds the row of a site path ('' is the root), or null. */
export async function getRow(em: EntityManager, path: string): Promise<FileRow | null> {
  if (path === '') return ROOT;
  const [row] = await sql<RawFileRow>(em, `SELECT ${FILE_COLUMNS} FROM files WHERE path = ?`, [path]);
  return row ? fileRow(row) : null;
}

/**
 * setMtimeOf sets the modification time of the row at a site path (not the root) and returns the
 * row as it now is, or null when there is none: one statement where a read and an UPDATE were two
 * (lftp's mirror, rclone and `sftp put -p` set the time of every file they upload).
 */
export async function setMtimeOf(em: EntityManager, path: string, mtime: Date): Promise<FileRow | null> {
  const [row] = await sql<RawFileRow>(
    em,
    `UPDATE files SET mtime = ? WHERE path = ? RETURNING ${FILE_COLUMNS}`,
    [mtime.getTime(), path],
  );
  return row ? fileRow(row) : null;
}

/** getRows finds the rows of several site paths in one query ('' is the root); a missing path has none. */
export async function getRows(em: EntityManager, paths: readonly string[]): Promise<Map<string, FileRow>> {
  const out = new Map<string, FileRow>();
  const wanted = paths.filter((p) => p !== '');
  if (paths.includes('')) out.set('', ROOT);
  if (wanted.length) {
    const rows = await sql<RawFileRow>(
      em,
      `SELECT ${FILE_COLUMNS} FROM files WHERE path IN (${marks(wanted.length)})`,
      wanted,
    );
    for (const raw of rows) {
      const row = fileRow(raw);
      out.set(row.path, row);
    }
  }
  return out;
}

/** requireFolder returns the folder row of `path`, or throws folder-not-found / folder-must-not-be-a-file. */
export async function requireFolder(
  em: EntityManager,
  path: string,
  missing: GatewayError['type'] = 'not-found/folder-not-found',
  show: (sitePath: string) => string = (p) => p,
): Promise<FileRow> {
  return mustBeFolder(await getRow(em, path), path, missing, show);
}

/** mustBeFolder is requireFolder's verdict on a row already read (null: nothing at `path`). */
export function mustBeFolder(
  row: FileRow | null,
  path: string,
  missing: GatewayError['type'] = 'not-found/folder-not-found',
  show: (sitePath: string) => string = (p) => p,
): FileRow {
  if (!row) throw new GatewayError(missing, `Folder /${show(path)} does not exist`);
  if (row.type !== 'directory') {
    throw new GatewayError('bad-request/folder-must-not-be-a-file', `/${show(path)} is a file, not a folder`);
  }
  return row;
}

/** ListedRow is what a listing reads of each row: what its entry shows, and the name it pages by. */
export type ListedRow = Pick<FileRow, 'path' | 'name' | 'type' | 'size' | 'mtime' | 'md5' | 'crc32'>;

// What a listing reads: fewer columns make a 10,000-entry listing's rows about a third cheaper to
// read (better-sqlite3 builds an object per row).
const LISTED_COLUMNS = 'path, name, type, size, mtime, md5, crc32';

/** listRows reads one page of a folder's children. */
export async function listRows(em: EntityManager, folder: string, opts: ListOptions): Promise<ListedRow[]> {
  const dir = opts.direction === 'desc' ? 'DESC' : 'ASC';
  // No row has the path '' (the root is synthetic), so parent alone selects the children and
  // the (parent, …, name) indexes answer the whole query. Hand-written (db/sql.ts): a listing of
  // thousands of entries spent more in TypeORM's row mapping than in the database.
  let where = 'parent = ?';
  const params: unknown[] = [folder];
  if (opts.search) {
    // ESCAPE makes % and _ in the search text literal on both databases.
    where += " AND lower(name) LIKE ? ESCAPE '\\'";
    params.push(`%${opts.search.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
  }
  // A folder's size is null (SPEC: 0 for a folder): first ascending, last descending, on both
  // databases (SQLite and PostgreSQL disagree about where NULLs sort by default).
  const order =
    opts.sort === 'size'
      ? `size ${dir} NULLS ${dir === 'ASC' ? 'FIRST' : 'LAST'}, name ${dir}`
      : opts.sort === 'mtime'
        ? `mtime ${dir}, name ${dir}`
        : `name ${dir}`;
  let page = 'LIMIT ?';
  params.push(opts.limit);
  if (opts.after !== undefined) {
    if (opts.sort !== 'path' || dir !== 'ASC') throw new Error('listRows: after needs name order, ascending');
    where += ' AND name > ?';
    params.splice(params.length - 1, 0, opts.after);
  } else {
    page += ' OFFSET ?';
    params.push(opts.offset);
  }
  const rows = await sqlArrays(
    em,
    `SELECT ${LISTED_COLUMNS} FROM files WHERE ${where} ORDER BY ${order} ${page}`,
    params,
  );
  return rows.map((r) => ({
    path: r[0] as string,
    name: r[1] as string,
    type: r[2] as FileRow['type'],
    size: r[3] === null ? null : Number(r[3]),
    mtime: new Date(Number(r[4])),
    md5: r[5] as string | null,
    crc32: r[6] as string | null,
  }));
}

/** countRows counts a folder's entries that `search` selects (all of them without). */
export function countRows(em: EntityManager, folder: string, search?: string): Promise<number> {
  return childrenQuery(em, folder, search).getCount();
}

function childrenQuery(em: EntityManager, folder: string, search?: string) {
  // No row has the path '' (the root is synthetic), so parent alone selects the children and
  // the (parent, …, name) indexes answer the whole query.
  const qb = em.getRepository(FileEntity).createQueryBuilder('f').where('f.parent = :folder', { folder });
  if (search) {
    // ESCAPE makes % and _ in the search text literal on both databases.
    const like = `%${search.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    qb.andWhere(`lower(f.name) LIKE :search ESCAPE '\\'`, { search: like });
  }
  return qb;
}

/** hasChildren tells whether a folder holds anything. */
export async function hasChildren(em: EntityManager, folder: string): Promise<boolean> {
  return em.existsBy(FileEntity, { parent: folder });
}

/** insertFolder adds one folder row; its parent must exist. */
export async function insertFolder(em: EntityManager, path: string, mtime = new Date()): Promise<void> {
  await em.insert(FileEntity, folderRow(path, mtime));
}

function folderRow(path: string, mtime: Date): Omit<FileRow, 'id'> {
  return {
    path,
    parent: parentOf(path),
    name: baseName(path),
    type: 'directory',
    size: null,
    mtime,
    md5: null,
    crc32: null,
    blob_id: null,
  };
}

/** ensureFolders creates `path` and any missing ancestors as folders; a file in the way is an error. */
export async function ensureFolders(
  em: EntityManager,
  path: string,
  show: (sitePath: string) => string = (p) => p,
): Promise<void> {
  for (const folder of ancestorsOf(path).slice(1)) {
    const row = await getRow(em, folder);
    if (row?.type === 'file')
      throw new GatewayError(
        'bad-request/folder-must-not-be-a-file',
        `/${show(folder)} is a file, not a folder`,
      );
    if (row) continue;
    // A change below the same ancestor may create it at once (both hold only shared tree locks on
    // it, tree.ts): whoever comes second keeps the first one's folder instead of failing.
    await em
      .createQueryBuilder()
      .insert()
      .into(FileEntity)
      .values(folderRow(folder, new Date()))
      .orIgnore()
      .execute();
    const made = await getRow(em, folder);
    if (made?.type !== 'directory')
      throw new GatewayError(
        'bad-request/folder-must-not-be-a-file',
        `/${show(folder)} is a file, not a folder`,
      );
  }
}

/**
 * deleteTree deletes a row and, for a folder, everything below it; the blobs become garbage. What
 * is below is marked and deleted by statements over its range of paths, never read into memory (a
 * folder of 300,000 files took 90 MiB for its rows' ids and blobs).
 */
export async function deleteTree(em: EntityManager, row: FileRow): Promise<void> {
  if (row.type === 'directory') {
    await markGarbageInside(em, row.path);
    await em
      .getRepository(FileEntity)
      .createQueryBuilder()
      .delete()
      .where(...inside(em, 'path', row.path))
      .execute();
  }
  await em.getRepository(FileEntity).delete({ id: row.id });
  await markGarbage(em, [row.blob_id]);
}

/** moveTree renames a row and, for a folder, every path below it. Bytes do not move. */
export async function moveTree(em: EntityManager, row: FileRow, to: string): Promise<void> {
  const repo = em.getRepository(FileEntity);
  if (row.type === 'directory') {
    const from = `${row.path}/`;
    const n = charLength(from);
    // path and parent of every descendant get the new prefix; parent of direct children is the folder itself.
    await repo
      .createQueryBuilder()
      .update()
      .set({
        path: () => `:toPrefix || substr(path, ${n + 1})`,
        parent: () =>
          `CASE WHEN parent = :fromFolder THEN :toFolder ELSE :toPrefix || substr(parent, ${n + 1}) END`,
      })
      .where(...inside(em, 'path', row.path))
      .setParameters({ toPrefix: `${to}/`, fromFolder: row.path, toFolder: to })
      .execute();
  }
  await repo.update({ id: row.id }, { path: to, parent: parentOf(to), name: baseName(to) });
}

/**
 * copyTree copies a row and, for a folder, everything below it. Copies share the immutable blobs.
 * What is below is copied by one INSERT … SELECT, inside the database: a folder of any size, never
 * its rows in memory (they were read whole, then written back 200 at a time).
 */
export async function copyTree(em: EntityManager, row: FileRow, to: string): Promise<void> {
  await em.getRepository(FileEntity).insert({
    path: to,
    parent: parentOf(to),
    name: baseName(to),
    type: row.type,
    size: row.size,
    mtime: row.mtime,
    md5: row.md5,
    crc32: row.crc32,
    blob_id: row.blob_id,
  });
  if (row.type !== 'directory') return;
  // The new path is the new prefix and the rest of the old one; a direct child's parent is `to`.
  const n = charLength(`${row.path}/`);
  const [test, bounds] = insideMarked(em, 'path', row.path);
  await sql(
    em,
    'INSERT INTO files (path, parent, name, type, size, mtime, md5, crc32, blob_id) ' +
      `SELECT ? || substr(path, ${n + 1}), CASE WHEN parent = ? THEN ? ELSE ? || substr(parent, ${n + 1}) END, ` +
      `name, type, size, mtime, md5, crc32, blob_id FROM files WHERE ${test}`,
    [`${to}/`, row.path, to, `${to}/`, ...bounds],
  );
}

/** toEntry turns a row into an Entry with the path as the session sees it. */
export function toEntry(row: ListedRow, visiblePath: string): Entry {
  return {
    path: visiblePath,
    type: row.type,
    size: row.type === 'directory' ? null : row.size,
    mtime: row.mtime,
    crc32: row.crc32,
    md5: row.md5,
  };
}
