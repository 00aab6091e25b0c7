/**
 * What the user chose to upload, as relative paths: files from the picker (a folder picked with
 * `webkitdirectory` gives each file its `webkitRelativePath`) or dropped on the page (a dropped
 * folder is walked through the File System entries API, `webkitGetAsEntry`, empty folders too).
 */

/** Chosen is what to upload: files with their paths relative to the target, and folders to create. */
export interface Chosen {
  files: { file: File; path: string }[];
  /** relative folder paths to create, parents before children (empty folders included) */
  folders: string[];
}

function foldersOf(paths: string[], extra: string[] = []): string[] {
  const all = new Set(extra);
  for (const p of paths) {
    const parts = p.split('/');
    for (let i = 1; i < parts.length; i++) all.add(parts.slice(0, i).join('/'));
  }
  return [...all].sort((a, b) => a.split('/').length - b.split('/').length || (a < b ? -1 : 1));
}

/** fromPicker reads an <input type=file> selection, with or without folders. */
export function fromPicker(list: FileList | null): Chosen {
  const files = [...(list ?? [])].map((file) => ({ file, path: file.webkitRelativePath || file.name }));
  return { files, folders: foldersOf(files.map((f) => f.path)) };
}

// The entries API, typed here: lib.dom names it, but not every TypeScript lib version alike.
interface FsEntry {
  isFile: boolean;
  isDirectory: boolean;
  name: string;
}
interface FsFileEntry extends FsEntry {
  file(ok: (f: File) => void, fail: (e: unknown) => void): void;
}
interface FsDirEntry extends FsEntry {
  createReader(): { readEntries(ok: (e: FsEntry[]) => void, fail: (e: unknown) => void): void };
}

async function walk(entry: FsEntry, prefix: string, out: Chosen): Promise<void> {
  const path = prefix ? `${prefix}/${entry.name}` : entry.name;
  if (entry.isFile) {
    const file = await new Promise<File>((ok, fail) => (entry as FsFileEntry).file(ok, fail));
    out.files.push({ file, path });
    return;
  }
  if (!entry.isDirectory) return;
  out.folders.push(path);
  const reader = (entry as FsDirEntry).createReader();
  // readEntries answers in batches (100 in Chromium) until an empty one.
  for (;;) {
    const batch = await new Promise<FsEntry[]>((ok, fail) => reader.readEntries(ok, fail));
    if (batch.length === 0) break;
    for (const child of batch) await walk(child, path, out);
  }
}

/** fromDrop reads a drop: files as they are, folders walked with everything in them. */
export async function fromDrop(dt: DataTransfer | null): Promise<Chosen> {
  const out: Chosen = { files: [], folders: [] };
  if (!dt) return out;
  // The entries must be taken before the first await: the drop's data is gone after the event.
  const items = [...dt.items].filter((i) => i.kind === 'file');
  const entries = items.map((i) => (i.webkitGetAsEntry?.() as FsEntry | null) ?? null);
  if (entries.length === 0 || entries.some((e) => e === null)) {
    // No entries API (or a synthetic drop): the plain files.
    return { files: [...dt.files].map((file) => ({ file, path: file.name })), folders: [] };
  }
  for (const e of entries) await walk(e!, '', out);
  return {
    files: out.files,
    folders: foldersOf(
      out.files.map((f) => f.path),
      out.folders,
    ),
  };
}
