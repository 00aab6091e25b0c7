#!/usr/bin/env node
// The svc-gateway command. It runs the compiled JavaScript in dist/ (made by `npm run compile`,
// which `npm install` runs) when that is at least as new as every source file: compiled, the
// process starts faster and takes about 40 MiB less memory than with the TypeScript loader.
// Otherwise (a source file changed since) it runs the TypeScript sources through tsx.
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const built = path.join(root, 'dist', '.built');

function newestSource(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(full));
    else if (entry.name.endsWith('.ts')) newest = Math.max(newest, statSync(full).mtimeMs);
  }
  return newest;
}

const fresh =
  existsSync(built) &&
  statSync(built).mtimeMs >=
    Math.max(newestSource(path.join(root, 'src')), newestSource(path.join(root, 'protocols')));

if (fresh) {
  await import('../dist/src/cli.js');
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../src/cli.ts');
}
