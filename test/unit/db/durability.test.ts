/**
 * storage.durability (issue 13): `fsync` puts a file's bytes, its name and the database commit on
 * disk before the client hears success; `os` leaves them to the page cache. Checked where it
 * shows: the database's own setting, and the fsync calls the kernel sees (strace) for a blob put.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { dbKind, openTestCore } from '../../helpers/gateway.ts';
import { dbOf } from '../../helpers/internals.ts';

/**
 * syncsUnderStrace runs the script `source(dir)` (a module in a temp dir) under strace and returns
 * its sync calls, each line naming the descriptor's file (strace -y).
 */
function syncsUnderStrace(source: (dir: string) => string): string[] {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-durability-'));
  try {
    const script = path.join(dir, 'script.mts');
    writeFileSync(script, source(dir));
    const trace = path.join(dir, 'trace');
    const run = spawnSync(
      'strace',
      [
        '-f',
        '-qq',
        '-y',
        '-e',
        'trace=fsync,fdatasync,sync_file_range',
        '-o',
        trace,
        process.execPath,
      ].concat(['--import', 'tsx', script]),
      { encoding: 'utf8', env: { ...process.env, SVC_TEST_DATABASE_URL: '' } },
    );
    if (run.error)
      throw new Error(`strace is needed for this test (Debian package strace): ${run.error.message}`);
    expect(run.status, run.stderr).to.equal(0);
    return readFileSync(trace, 'utf8')
      .split('\n')
      .filter((line) => /\b(fsync|fdatasync|sync_file_range)\(/.test(line));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** fsyncsForPuts runs `count` LocalBlobStore puts in a child under strace and returns its sync calls. */
function fsyncsForPuts(durability: 'fsync' | 'os', count: number): string[] {
  const local = path.resolve('src/core/files/blobstores/local.ts');
  return syncsUnderStrace(
    (dir) => `import { Readable } from 'node:stream';
import { randomBytes } from 'node:crypto';
import { LocalBlobStore } from ${JSON.stringify(local)};
const store = new LocalBlobStore(${JSON.stringify(path.join(dir, 'blobs'))}, ${JSON.stringify(durability)});
for (let i = 0; i < ${count}; i++) {
  await store.put(randomBytes(16).toString('hex'), Readable.from([Buffer.alloc(4096, i)]));
}
`,
  );
}

/**
 * walSyncsForUploads writes `count` 4 KiB files through a SQLite core in a child under strace and
 * counts the syncs of the database's WAL.
 */
function walSyncsForUploads(count: number, together = false): number {
  const helpers = path.resolve('test/helpers/gateway.ts');
  const core = path.resolve('src/core/index.ts');
  return syncsUnderStrace(
    () => `import { Readable } from 'node:stream';
import { openTestCore } from ${JSON.stringify(helpers)};
import { operatorPrincipal } from ${JSON.stringify(core)};
const { core, close } = await openTestCore({ storage: { durability: 'fsync' } });
const files = core.files.session(operatorPrincipal());
const one = (i: number) => files.write('f' + i, Readable.from([Buffer.alloc(4096, i)]));
if (${together}) await Promise.all(Array.from({ length: ${count} }, (_, i) => one(i)));
else for (let i = 0; i < ${count}; i++) await one(i);
await close();
`,
  ).filter((line) => /\(\d+<[^>]*-wal>/.test(line)).length;
}

describe(`storage.durability (${dbKind})`, () => {
  it('fsync: every blob and the folder naming it are synced; os: no sync at all', function () {
    this.timeout(60_000);
    // Each blob under its final name, and the folder that names it: two per blob.
    const syncs = fsyncsForPuts('fsync', 10);
    const named = (re: RegExp) => new Set(syncs.map((l) => re.exec(l)?.[1]).filter(Boolean)).size;
    expect(named(/<([^>]*\/blobs\/[0-9a-f]{2}\/[0-9a-f]{32})>/), syncs.join('\n')).to.equal(10);
    expect(
      syncs.filter((l) => /\/blobs\/[0-9a-f]{2}>/.test(l)),
      syncs.join('\n'),
    ).to.have.length(10);
    expect(fsyncsForPuts('os', 10)).to.deep.equal([]);
  });

  for (const durability of ['fsync', 'os'] as const) {
    it(`${durability}: the database's own setting (SQLite: NORMAL, the gateway syncs; PostgreSQL: synchronous_commit)`, async () => {
      const t = await openTestCore({ storage: { durability } });
      try {
        const source = dbOf(t.core).source;
        if (dbKind === 'sqlite') {
          const [row] = (await source.query('PRAGMA synchronous')) as { synchronous: number }[];
          // 1 = NORMAL: SQLite syncs the WAL at checkpoints only; at `fsync` the gateway syncs it
          // after each durable commit (counted below), never inside COMMIT on the event loop.
          expect(row!.synchronous).to.equal(1);
        } else {
          const [row] = (await source.query('SHOW synchronous_commit')) as { synchronous_commit: string }[];
          expect(row!.synchronous_commit).to.equal(durability === 'fsync' ? 'on' : 'off');
        }
      } finally {
        await t.close();
      }
    });
  }

  (dbKind === 'sqlite' ? it : it.skip)('fsync: an upload syncs the database once (SQLite)', function () {
    this.timeout(120_000);
    // The difference of two runs leaves out what starting and stopping the core sync.
    const extra = walSyncsForUploads(15) - walSyncsForUploads(5);
    // One commit per upload is synced; the new blob's record rides on it (Database.work durable:false).
    expect(extra).to.equal(10);
  });

  (dbKind === 'sqlite' ? it : it.skip)(
    'fsync: uploads that commit together share syncs (SQLite)',
    function () {
      this.timeout(120_000);
      // 40 uploads at once: a commit that comes while a sync runs waits for the next one, which
      // covers every commit before it, so there are fewer syncs than uploads.
      const together = walSyncsForUploads(40, true) - walSyncsForUploads(0);
      expect(together).to.be.above(0);
      expect(together).to.be.below(30);
    },
  );

  it('an unknown value is refused by name', async () => {
    let error: unknown;
    try {
      await openTestCore({ storage: { durability: 'sometimes' } });
    } catch (err) {
      error = err;
    }
    expect(String(error)).to.match(/storage\.durability/);
  });
});
