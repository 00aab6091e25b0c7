/**
 * Issue 20, past 4 GiB: an lftp upload of a 4.5 GiB file killed with SIGKILL once the gateway has
 * more than 4 GiB of it, then `put -c`: only the rest goes over the wire (lftp's REST offset is past
 * 2^32) and the file's md5 is the source's. Slow (it writes about 9 GiB to disk), so it runs on
 * SQLite and local storage only: the database plays no part in the size arithmetic, which is what
 * this checks. The source is a sparse file with an offset stamp every MiB, cheap to make, and any
 * shifted or repeated piece changes its md5. Not in `npm test` (test/slow/ is outside its globs):
 * run it with `node test/run.js test/slow/resume-big.test.ts`.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  closeSync,
  createReadStream,
  mkdtempSync,
  openSync,
  readdirSync,
  rmSync,
  statSync,
  writeSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { expect } from 'chai';
import { operatorPrincipal, type Principal } from '../../src/core/index.ts';
import { dbKind, startTestGateway, type TestGateway } from '../helpers/gateway.ts';
import { principalFor } from '../unit/core/fixtures.ts';

const MiB = 1024 * 1024;
const SIZE = 4608 * MiB; // 4.5 GiB
const CUT_AFTER = 4 * 1024 * MiB + 64 * MiB;
const PASSWORD = 'resume-password-1';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function md5Of(stream: Readable): Promise<string> {
  const h = createHash('md5');
  for await (const c of stream) h.update(c as Buffer);
  return h.digest('hex');
}

/** partialBytes is the size of the biggest blob being written (`<id>.<owner>.partial`) under `dir`. */
function partialBytes(dir: string): number {
  let most = 0;
  let names: string[];
  try {
    names = readdirSync(dir, { recursive: true }) as string[];
  } catch {
    return 0; // no blob written yet
  }
  for (const name of names)
    if (name.endsWith('.partial')) {
      const size = statSync(path.join(dir, name), { throwIfNoEntry: false })?.size ?? 0;
      most = Math.max(most, size);
    }
  return most;
}

(dbKind === 'sqlite' ? describe : describe.skip)(
  'a cut upload past 4 GiB resumes (sqlite, slow)',
  function () {
    this.timeout(1_200_000);
    let gw: TestGateway;
    let alice: Principal;
    let dir: string;
    let source: string;

    before(async () => {
      gw = await startTestGateway({ ports: { ftp: 0 } });
      const op = operatorPrincipal();
      await gw.core.namespace.mkdir(op, 'big');
      const u = await gw.core.users.create(op, { username: 'alice', password: PASSWORD, user_root: 'big/' });
      await gw.core.permissions.create(op, { username: 'alice', path: 'big', permission: 'full' });
      alice = await principalFor(gw.core, u.id, 'ftp');
      dir = mkdtempSync(path.join(os.tmpdir(), 'svc-resume-big-'));
      source = path.join(dir, 'big.bin');
      const fd = openSync(source, 'w');
      const stamp = Buffer.alloc(8);
      for (let at = 0; at < SIZE; at += MiB) {
        stamp.writeBigUInt64LE(BigInt(at) * 2654435761n);
        writeSync(fd, stamp, 0, 8, at);
      }
      writeSync(fd, Buffer.from('end'), 0, 3, SIZE - 3);
      closeSync(fd);
    });
    after(async () => {
      await gw.stop();
      rmSync(dir, { recursive: true, force: true });
    });

    it('lftp killed past 4 GiB, then put -c sends only the rest; md5 equal', async () => {
      const lftp = (script: string) => [
        '-c',
        [
          'set cmd:fail-exit yes',
          'set net:max-retries 1',
          'set net:timeout 30',
          'set ftp:passive-mode yes',
          'set ftp:ssl-allow no',
          `open -u alice,${PASSWORD} ftp://127.0.0.1:${gw.ports.ftp}`,
          script,
        ].join('; '),
      ];
      const client = spawn('lftp', lftp(`put ${source} -o big.bin`), { stdio: 'ignore', detached: true });
      const blobs = path.join(gw.config.data_dir, 'blobs');
      const started = Date.now();
      while (partialBytes(blobs) < CUT_AFTER) {
        if (client.exitCode !== null) throw new Error('lftp ended before the cut');
        if (Date.now() - started > 900_000) throw new Error('the upload did not pass 4 GiB in 15 minutes');
        await sleep(200);
      }
      process.kill(-client.pid!, 'SIGKILL');
      let pending: number | null = null;
      for (let i = 0; i < 600 && !(pending && pending > 2 ** 32); i++) {
        await sleep(500);
        pending = await gw.core.files
          .session(alice)
          .stat('big.bin')
          .then((e) => e.size)
          .catch(() => null);
      }
      expect(pending)
        .to.be.greaterThan(2 ** 32)
        .and.lessThan(SIZE);
      const resumedAt = Date.now();
      const resumed = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
        const c = spawn('lftp', ['-d', ...lftp(`put -c ${source} -o big.bin`)], {
          stdio: ['ignore', 'ignore', 'pipe'],
        });
        let stderr = '';
        c.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-20_000)));
        c.on('close', (code) => resolve({ code, stderr }));
      });
      const ms = Date.now() - resumedAt;
      expect(resumed.code, resumed.stderr.slice(-2000)).to.equal(0);
      expect(resumed.stderr).to.include(`REST ${pending}`);
      console.log(
        `      lftp put -c past 4 GiB: re-sent ${((SIZE - pending!) / MiB).toFixed(0)} MiB of ${SIZE / MiB} MiB, ${ms} ms`,
      );
      const entry = await gw.core.files.session(alice).stat('big.bin');
      expect(entry.size).to.equal(SIZE);
      expect(entry.md5).to.equal(await md5Of(createReadStream(source)));
    });
  },
);
