// Bundles the web interface's browser code (protocols/web/client/) with esbuild into dist/web/:
// index.html plus assets named by content hash, so they can be cached for a year and the page
// (revalidated on every load) picks up a new build at once. Run by `npm run compile` (npm's
// `prepare`, so `npm ci` and `npm install` build it); nothing generated is committed.
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import * as esbuild from 'esbuild';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const out = path.join(root, 'dist', 'web');

const result = await esbuild.build({
  entryPoints: [path.join(here, 'client', 'main.tsx')],
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['es2022'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  entryNames: 'app-[hash]',
  chunkNames: '[name]-[hash]',
  assetNames: '[name]-[hash]',
  // The admin pages are a chunk of their own, loaded when a site or Folder Admin opens one, so
  // everyone else's first load stays small.
  splitting: true,
  outdir: path.join(out, 'assets'),
  absWorkingDir: root,
  metafile: true,
  write: false,
  legalComments: 'none',
  logLevel: 'warning',
});

rmSync(out, { recursive: true, force: true });
mkdirSync(path.join(out, 'assets'), { recursive: true });
const names = {};
// The first load is the entry's script and style sheet and the chunks it imports statically;
// chunks reached only by import() (the admin pages) are not part of it.
const firstLoad = new Set();
for (const [file, meta] of Object.entries(result.metafile.outputs)) {
  // import() targets are entry points of their own in the metafile: only main.tsx is the page's.
  if (meta.entryPoint !== 'protocols/web/client/main.tsx') continue;
  const base = path.basename(file);
  names[path.extname(base)] = base;
  firstLoad.add(path.resolve(root, file));
  if (meta.cssBundle) {
    names['.css'] = path.basename(meta.cssBundle);
    firstLoad.add(path.resolve(root, meta.cssBundle));
  }
  for (const imp of meta.imports)
    if (imp.kind === 'import-statement') firstLoad.add(path.resolve(root, imp.path));
}
let gzipped = 0;
for (const file of result.outputFiles) {
  writeFileSync(file.path, file.contents);
  if (firstLoad.has(file.path)) gzipped += gzipSync(file.contents).length;
}
const template = readFileSync(path.join(here, 'client', 'index.html'), 'utf8');
const html = template
  .replace('%SCRIPT%', `/assets/${names['.js']}`)
  .replace('%STYLE%', `/assets/${names['.css']}`);
writeFileSync(path.join(out, 'index.html'), html);
gzipped += gzipSync(html).length;
writeFileSync(
  path.join(out, 'manifest.json'),
  JSON.stringify({ script: names['.js'], style: names['.css'], first_load_gzip_bytes: gzipped }, null, 2),
);
const digest = createHash('sha256').update(html).digest('hex').slice(0, 12);
console.log(
  `web interface built in dist/web (${digest}): first load ${(gzipped / 1024).toFixed(1)} KiB gzipped`,
);
