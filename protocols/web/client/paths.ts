/** Site paths as the page handles them, and how sizes and dates are shown. */

export const nameOf = (path: string) => path.slice(path.lastIndexOf('/') + 1);
export const parentOf = (path: string) => (path.includes('/') ? path.slice(0, path.lastIndexOf('/')) : '');
export const join = (folder: string, name: string) => (folder ? `${folder}/${name}` : name);

/** folderFromHash reads the folder of the address (#/a/b); a page's address (#users) is none. */
export function folderFromHash(home = ''): string {
  if (!location.hash.startsWith('#/')) return home;
  const raw = location.hash.replace(/^#\/?/, '');
  try {
    return decodeURIComponent(raw).replace(/^\/+|\/+$/g, '');
  } catch {
    return '';
  }
}

export function formatSize(size: number | null): string {
  if (size === null) return '';
  if (size < 1024) return `${size} B`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let v = size / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

export const dateFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });
