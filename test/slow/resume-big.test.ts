/**
 * Issue 20, past 4 GiB: a 5 GiB upload by each real client killed with SIGKILL once the gateway has
 * more than 4 GiB of it, then the client's own resume command: lftp `put -c` (REST past 2^32 then
 * STOR), OpenSSH `reput` (stat, then WRITEs from the pending size), curl over WebDAV (`-C n`: PUT
 * with Content-Range). Only the rest goes over the wire (lftp: the REST offset in its log; sftp and
 * curl: the bytes a counting relay saw) and the file's md5 is the source's. Slow (it writes about
 * 10 GiB to disk per client), so it runs on SQLite and local storage only: the database plays no
 * part in the size arithmetic, which is what this checks. The source is a sparse file with an
 * offset stamp every MiB, cheap to make, and any shifted or repeated piece changes its md5. Not in
 * `npm test` (test/slow/ is outside its globs): run it with
 * `node test/run.js test/slow/resume-big.test.ts`.
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
import { countingRelay, startKilled } from '../helpers/cut-resume.ts';
import { principalFor } from '../unit/core/fixtures.ts';
import { authArgs, SSH_OPTIONS } from '../protocols/sftp/clients.ts';

const MiB = 1024 * 1024;
const SIZE = 5120 * MiB; // 5 GiB
const CUT_AFTER = 4 * 1024 * MiB + 64 * MiB;
const PASSWORD = 'resume-password-1';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function md5Of(stream: Readable): Promise<string> {
  const h = createHash('md5');
  for await (const c of stream) h.update(c as Buffer);
  return h.digest('hex');
}

/**
 * biggestWrite is the size of the biggest file being written under the data dir: a blob's
 * `.partial` (FTP, WebDAV) or a staging file's `.part` (SFTP).
 */
function biggestWrite(dir: string): number {
  let most = 0;
  for (const name of readdirSync(dir, { recursive: true }) as string[]) {
    // Only writes in progress: a finished blob of an earlier test must not trigger the cut.
    if (!name.endsWith('.partial') && !name.endsWith('.part')) continue;
    const stats = statSync(path.join(dir, name), { throwIfNoEntry: false });
    if (stats?.isFile()) most = Math.max(most, stats.size);
  }
  return most;
}

/** finish runs a client to its end and gives its exit code, its last output and how long it took. */
function finish(argv: string[], input = ''): Promise<{ code: number | null; stderr: string; ms: number }> {
  const started = Date.now();
  return new Promise((resolve) => {
    const c = spawn(argv[0]!, argv.slice(1), { stdio: ['pipe', 'ignore', 'pipe'] });
    let stderr = '';
    c.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-20_000)));
    c.stdin.on('error', () => undefined);
    c.stdin.end(input);
    c.on('close', (code) => resolve({ code, stderr, ms: Date.now() - started }));
  });
}

(dbKind === 'sqlite' ? describe : describe.skip)(
  'a cut upload past 4 GiB resumes (sqlite, slow)',
  function () {
    this.timeout(1_200_000);
    let gw: TestGateway;
    let alice: Principal;
    let dir: string;
    let source: string;
    let sourceMd5: string;

    before(async () => {
      gw = await startTestGateway({ ports: { ftp: 0, sftp: 0, webdav: 0 } });
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
      sourceMd5 = await md5Of(createReadStream(source));
    });
    after(async () => {
      await gw.stop();
      rmSync(dir, { recursive: true, force: true });
    });

    /**
     * cut starts `argv` uploading the source as `name`, kills it whole once the gateway holds more
     * than 4 GiB of it, and gives the pending size alice then sees (past 2^32, short of the whole).
     */
    const cut = async (name: string, argv: string[], input = '') => {
      const client = startKilled(argv, input);
      const started = Date.now();
      while (biggestWrite(gw.config.data_dir) < CUT_AFTER) {
        if (client.child.exitCode !== null) throw new Error(`${argv[0]} ended before the cut`);
        if (Date.now() - started > 900_000) throw new Error('the upload did not pass 4 GiB in 15 minutes');
        await sleep(200);
      }
      await client.kill();
      let pending: number | null = null;
      for (let i = 0; i < 600 && !(pending && pending > 2 ** 32); i++) {
        await sleep(500);
        pending = await gw.core.files
          .session(alice)
          .stat(name)
          .then((e) => e.size)
          .catch(() => null);
      }
      expect(pending)
        .to.be.greaterThan(2 ** 32)
        .and.lessThan(SIZE);
      return pending!;
    };

    /** complete checks the resumed file: whole, and the source's md5 as the core recorded it. */
    const complete = async (name: string) => {
      const entry = await gw.core.files.session(alice).stat(name);
      expect(entry.size).to.equal(SIZE);
      expect(entry.md5).to.equal(sourceMd5);
      const read = await gw.core.files.session(alice).openRead(name, { record: false });
      expect(await md5Of(read.stream)).to.equal(sourceMd5);
    };

    const report = (client: string, sent: number, pending: number, ms: number) =>
      console.log(
        `      ${client} past 4 GiB: re-sent ${(sent / MiB).toFixed(0)} MiB (missing ${((SIZE - pending) / MiB).toFixed(0)} MiB of ${SIZE / MiB} MiB), ${ms} ms`,
      );

    /**
     * resumeCounted runs the resume through a relay to `port` that counts what the client sends:
     * about the missing part (the protocol's framing and the login add a little), never 5 GiB.
     */
    const resumeCounted = async (
      client: string,
      port: number,
      pending: number,
      resume: (port: number) => ReturnType<typeof finish>,
    ) => {
      const relay = await countingRelay(port);
      try {
        const resumed = await resume(relay.port);
        expect(resumed.code, resumed.stderr.slice(-2000)).to.equal(0);
        const missing = SIZE - pending;
        expect(relay.sent).to.be.within(missing, missing * 1.05 + 256 * 1024);
        report(client, relay.sent, pending, resumed.ms);
        return resumed;
      } finally {
        await relay.close();
      }
    };

    it('lftp killed past 4 GiB, then put -c sends only the rest; md5 equal', async () => {
      const lftp = (script: string) => [
        'lftp',
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
      const pending = await cut('lftp.bin', lftp(`put ${source} -o lftp.bin`));
      const [cmd, ...args] = lftp(`put -c ${source} -o lftp.bin`);
      const resumed = await finish([cmd!, '-d', ...args]);
      expect(resumed.code, resumed.stderr.slice(-2000)).to.equal(0);
      // lftp's debug log names the offset it resumed at; the data connection carries the rest.
      expect(resumed.stderr).to.include(`REST ${pending}`);
      report('lftp put -c', SIZE - pending, pending, resumed.ms);
      await complete('lftp.bin');
    });

    it('OpenSSH sftp killed past 4 GiB, then reput sends only the rest; md5 equal', async () => {
      const sftp = (port: number) => {
        const { prefix, args } = authArgs({ password: PASSWORD });
        return [...prefix, 'sftp', ...args, ...SSH_OPTIONS, '-b', '-', '-P', String(port), 'alice@127.0.0.1'];
      };
      const pending = await cut('sftp.bin', sftp(gw.ports.sftp!), `put ${source} sftp.bin\n`);
      await resumeCounted('OpenSSH sftp reput', gw.ports.sftp!, pending, (port) =>
        finish(sftp(port), `reput ${source} sftp.bin\n`),
      );
      await complete('sftp.bin');
    });

    it('curl over WebDAV killed past 4 GiB, then PUT -C n sends only the rest; md5 equal', async () => {
      const curl = ['curl', '-sS', '-k', '-u', `alice:${PASSWORD}`, '-T', source];
      const url = (port: number) => `https://127.0.0.1:${port}/dav.bin`;
      const pending = await cut('dav.bin', [...curl, url(gw.ports.webdav!)]);
      const resumed = await resumeCounted('curl WebDAV PUT -C n', gw.ports.webdav!, pending, (port) =>
        finish([...curl, '-v', '-C', String(pending), url(port)]),
      );
      expect(resumed.stderr).to.include(`Content-Range: bytes ${pending}-${SIZE - 1}/${SIZE}`);
      await complete('dav.bin');
    });
  },
);
