/**
 * Uploads the page has begun and not finished, kept in localStorage so they outlive a reload, a
 * closed tab or a lost connection: the upload's ref, its part size and the parts the server has
 * confirmed. A file is recognised by its destination, name, size and modification time (a browser
 * gives a page no path on disk); the server keeps an unfinished upload for a day.
 */

const KEY = 'svc-web-uploads';
// The server drops an unfinished upload after 24 hours; a little sooner here, so a ref we offer works.
const LIFETIME_MS = 23 * 3600 * 1000;

/** Remembered is one unfinished upload. */
export interface Remembered {
  ref: string;
  partSize: number;
  /** part numbers the server has confirmed */
  done: number[];
  /** bytes the server has (for the notice after a reload) */
  sent: number;
}

/** Interrupted describes an unfinished upload for the page's notice. */
export interface Interrupted {
  path: string;
  size: number;
  sent: number;
}

interface Stored extends Remembered {
  /** the user who began it: another user of the same browser neither sees nor resumes it */
  owner: number;
  path: string;
  size: number;
  modified: number;
  at: number;
}

function readAll(): Record<string, Stored> {
  try {
    const all = JSON.parse(localStorage.getItem(KEY) ?? '{}') as Record<string, Stored>;
    const now = Date.now();
    for (const [k, v] of Object.entries(all)) if (now - v.at > LIFETIME_MS) delete all[k];
    return all;
  } catch {
    return {};
  }
}

function writeAll(all: Record<string, Stored>): void {
  try {
    localStorage.setItem(KEY, JSON.stringify(all));
  } catch {
    // storage full or disabled: the upload still works, it just cannot resume after a reload
  }
}

let owner = 0;

/** setOwner names the signed-in user, whose uploads the functions below see. */
export function setOwner(userId: number): void {
  owner = userId;
}

const keyOf = (path: string, file: File) => `${owner}\n${path}\n${file.size}\n${file.lastModified}`;

/** recalled is the unfinished upload of this file to `path`, if the page remembers one. */
export function recalled(path: string, file: File): Remembered | null {
  const s = readAll()[keyOf(path, file)];
  return s ? { ref: s.ref, partSize: s.partSize, done: s.done.slice(), sent: s.sent } : null;
}

/** rememberUpload records (or updates) an unfinished upload. */
export function rememberUpload(path: string, file: File, m: Remembered): void {
  const all = readAll();
  const key = keyOf(path, file);
  // `at` is when the upload began: the server's day counts from then.
  const at = all[key]?.ref === m.ref ? all[key].at : Date.now();
  all[key] = { ...m, owner, path, size: file.size, modified: file.lastModified, at };
  writeAll(all);
}

/** forgetUpload drops an upload that finished or can no longer be resumed. */
export function forgetUpload(path: string, file: File): void {
  const all = readAll();
  delete all[keyOf(path, file)];
  writeAll(all);
}

/** forgetPath drops every unfinished upload to `path` (the user gave it up). */
export function forgetPath(path: string): void {
  const all = readAll();
  for (const [k, v] of Object.entries(all)) if (v.owner === owner && v.path === path) delete all[k];
  writeAll(all);
}

/** interruptedIn lists the unfinished uploads into `folder` (directly or below it). */
export function interruptedIn(folder: string): Interrupted[] {
  return Object.values(readAll())
    .filter((s) => s.owner === owner && (folder === '' || s.path.startsWith(`${folder}/`)))
    .map((s) => ({ path: s.path, size: s.size, sent: s.sent }));
}
