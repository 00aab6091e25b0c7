// Whether dist/ holds a build of the current sources. bin/svc-gateway.js runs the compiled server
// only then; the tests that need a build (the soak, the browser suites) make one only then, so test
// runs side by side (CI runs SQLite's and PostgreSQL's at once) never rewrite files another loads.
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** ROOT is the project's folder. */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** newestFile is the latest modification time (ms) of the files under `dir` that `take` accepts. */
function newestFile(dir, take) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestFile(full, take));
    else if (take(entry.name)) newest = Math.max(newest, statSync(full).mtimeMs);
  }
  return newest;
}

/** builtAfter tells whether `file` exists and is at least as new as every source it is made from. */
function builtAfter(file, sources) {
  return existsSync(file) && statSync(file).mtimeMs >= Math.max(...sources());
}

/** serverBuildIsFresh: `npm run compile` ran after the last change to a .ts file of the server. */
export function serverBuildIsFresh() {
  const ts = (name) => name.endsWith('.ts');
  return builtAfter(path.join(ROOT, 'dist', '.built'), () => [
    newestFile(path.join(ROOT, 'src'), ts),
    newestFile(path.join(ROOT, 'protocols'), ts),
  ]);
}

/** webBuildIsFresh: the web interface's bundle (dist/web) is newer than its browser code. */
export function webBuildIsFresh() {
  const web = path.join(ROOT, 'protocols', 'web');
  return builtAfter(path.join(ROOT, 'dist', 'web', 'manifest.json'), () => [
    newestFile(path.join(web, 'client'), () => true),
    statSync(path.join(web, 'build.js')).mtimeMs,
  ]);
}
