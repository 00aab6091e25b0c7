/**
 * Mounted drives (issue 18): the gateway mounted as a disk with real clients — sshfs, and rclone
 * mount with an sftp and a webdav remote — runs the everyday workload of workload.sh, and the REST
 * listing afterwards equals what the mount showed (names, sizes, md5; no 0-byte leftovers).
 *
 * The gateway runs as its own process: a FUSE request made by a child of this process must never
 * wait on this process's event loop. The suite runs in the SQLite pass only: what it exercises
 * is the protocol adapters' ordering and the clients, and the PostgreSQL pass runs the raw SFTP
 * ordering tests (test/protocols/sftp/ordering.test.ts).
 */
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { dbKind } from '../../helpers/gateway.ts';
import { serveProcess, stopProcess, type ServedProcess } from '../../helpers/process.ts';
import { run } from '../sftp/clients.ts';

const PASSWORD = 'Mount-admin-pass-7';
const WORKLOAD = path.resolve('test/protocols/mounts/workload.sh');
/**
 * CLIENT_LIMITS are the steps rclone's VFS layer fails on every server, OpenSSH and nginx
 * included (test/bench/results-mounts.md): renaming a folder while a file in it waits to be
 * uploaded ("can't open file - writer failed"), and cp -p's ACL copy (EIO from rclone's setxattr).
 */
const CLIENT_LIMITS: Record<string, string[]> = {
  sshfs: [],
  'rclone-sftp': ['rename-folder', 'cp-p'],
  'rclone-webdav': ['rename-folder', 'cp-p'],
};

/**
 * makeTree writes 600 files of 0–8,000 random bytes in 40 × 7 folders, as a tar at `tar`: every
 * folder and sizes from empty to two pages, in a third of the time 2,000 files took (CI's 25
 * minutes); `npm run bench:mounts` unpacks 2,000 for its figures.
 */
async function makeTree(dir: string, tar: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    const d = path.join(dir, 'tree', `d${i % 40}`, `sub${i % 7}`);
    mkdirSync(d, { recursive: true });
    writeFileSync(path.join(d, `f${i}.txt`), randomBytes((i * 7919) % 8001));
  }
  const r = await run(['tar', '-cf', tar, '-C', dir, 'tree']);
  expect(r.code, r.stderr).to.equal(0);
}

/** Listing maps a relative path to `dir`, or to `<size> <md5>` for a file. */
type Listing = Map<string, string>;

/** listMount walks a mounted folder with find and md5sum (as a user would check a copy). */
async function listMount(dir: string): Promise<Listing> {
  const script =
    'cd "$1" && find . -mindepth 1 -type d -printf "%P\\tdir\\n" && ' +
    'find . -type f -printf "%P\\0" | sort -z | while IFS= read -r -d "" f; do ' +
    'printf "%s\\t%s %s\\n" "$f" "$(stat -c %s "$f")" "$(md5sum <"$f" | cut -d" " -f1)"; done';
  const r = await run(['bash', '-c', script, 'list', dir], '', { timeoutMs: 300_000 });
  expect(r.code, r.stderr).to.equal(0);
  return new Map(
    r.stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => l.split('\t') as [string, string]),
  );
}

/** RestApi is the REST API of the gateway process, signed in as the site admin. */
class RestApi {
  private session = '';
  constructor(
    private readonly port: number,
    private readonly ca: Buffer,
  ) {}

  request(method: string, url: string, body?: unknown): Promise<{ status: number; json: unknown }> {
    return new Promise((resolve, reject) => {
      const data = body === undefined ? undefined : JSON.stringify(body);
      const req = https.request(
        {
          host: '127.0.0.1',
          port: this.port,
          method,
          path: `/api/rest/v1${url}`,
          ca: this.ca,
          servername: 'localhost',
          headers: {
            Accept: 'application/json',
            ...(data ? { 'Content-Type': 'application/json' } : {}),
            ...(this.session ? { 'X-SvcAPI-Auth': this.session } : {}),
          },
        },
        (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, json: text ? JSON.parse(text) : null }));
        },
      );
      req.on('error', reject);
      req.end(data);
    });
  }

  async signIn(): Promise<void> {
    const r = await this.request('POST', '/sessions', { username: 'admin', password: PASSWORD });
    expect(r.status).to.equal(200);
    this.session = (r.json as { id: string }).id;
  }

  /** mtime is the modification time REST shows for a file (a site path), in unix seconds. */
  async mtime(file: string): Promise<number> {
    const encoded = file.split('/').map(encodeURIComponent).join('/');
    const r = await this.request('GET', `/files/${encoded}?action=stat`);
    expect(r.status, `stat ${file}`).to.equal(200);
    return Date.parse((r.json as { mtime: string }).mtime) / 1000;
  }

  /** walk lists `folder` (a site path) and everything below it, relative to `folder`. */
  async walk(folder: string, out: Listing = new Map(), base = folder): Promise<Listing> {
    for (let page = 1; ; page++) {
      const encoded = folder.split('/').map(encodeURIComponent).join('/');
      const r = await this.request('GET', `/folders/${encoded}?per_page=1000&page=${page}`);
      expect(r.status, `GET /folders/${folder}`).to.equal(200);
      const entries = r.json as { path: string; type: string; size: number | null; md5: string | null }[];
      for (const e of entries) {
        const rel = e.path.slice(base.length + 1);
        if (e.type === 'directory') {
          out.set(rel, 'dir');
          await this.walk(e.path, out, base);
        } else out.set(rel, `${e.size ?? 0} ${e.md5 ?? ''}`);
      }
      if (entries.length < 1000) return out;
    }
  }
}

/** Mount is one mounted client: its folder and how to end it. */
interface Mount {
  dir: string;
  /** settle resolves once the client has sent the server everything it holds */
  settle(): Promise<void>;
  /** unmount unmounts and waits until the client has exited */
  unmount(): Promise<void>;
}

async function waitMounted(dir: string, child: ChildProcess | null): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const r = await run(['mountpoint', '-q', dir]);
    if (r.code === 0) return;
    if (child && child.exitCode !== null) throw new Error(`the mount client exited with ${child.exitCode}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${dir} was not mounted within 10 s`);
}

async function mountSshfs(dir: string, port: number): Promise<Mount> {
  const options = 'password_stdin,StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null';
  const r = await run(
    ['sshfs', '-p', String(port), '-o', options, 'admin@127.0.0.1:/', dir],
    `${PASSWORD}\n`,
  );
  expect(r.code, `sshfs: ${r.stderr}`).to.equal(0);
  await waitMounted(dir, null);
  return {
    dir,
    // sshfs sends each request as it happens: a closed file is on the server.
    settle: () => Promise.resolve(),
    async unmount() {
      await run(['fusermount3', '-uz', dir]);
    },
  };
}

/** freePort asks the system for a loopback port nothing listens on. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

/**
 * mountRclone mounts with rclone's VFS cache in its default write-back (uploads start 5 s after
 * a file is closed, so a save-then-rename is one upload, as users run it). rclone's remote control
 * tells when every upload is done; only then is the mount's view compared with the server's.
 */
async function mountRclone(dir: string, remote: string, extra: string[]): Promise<Mount> {
  const rc = `127.0.0.1:${await freePort()}`;
  const child = spawn(
    'rclone',
    [
      'mount',
      remote,
      dir,
      '--config',
      '/dev/null',
      '--vfs-cache-mode',
      'writes',
      '--rc',
      '--rc-addr',
      rc,
      '--rc-no-auth',
      ...extra,
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let log = '';
  child.stderr!.on('data', (c: Buffer) => (log = (log + c.toString()).slice(-4000)));
  await waitMounted(dir, child).catch((err: Error) => {
    throw new Error(`${err.message}: ${log}`);
  });
  return {
    dir,
    async settle() {
      for (let i = 0; i < 600; i++) {
        const r = await run(['rclone', 'rc', '--url', `http://${rc}/`, 'vfs/stats']);
        const cache = (
          JSON.parse(r.stdout || '{}') as { diskCache?: { uploadsInProgress: number; uploadsQueued: number } }
        ).diskCache;
        if (cache && cache.uploadsInProgress + cache.uploadsQueued === 0) return;
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
      throw new Error(`rclone still uploading after 5 minutes: ${log}`);
    },
    async unmount() {
      const exited = new Promise<void>((resolve) =>
        child.exitCode !== null ? resolve() : child.once('exit', () => resolve()),
      );
      await run(['fusermount3', '-uz', dir]);
      const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

(dbKind === 'sqlite' ? describe : describe.skip)('mounted drives: sshfs and rclone mount', function () {
  this.timeout(600_000);
  let work: string;
  let gw: ServedProcess;
  let rest: RestApi;
  let obscured: string;
  let certFile: string;
  const tar = () => path.join(work, 'tree.tar');

  before(async () => {
    if (!existsSync('/dev/fuse'))
      throw new Error('the mount tests need /dev/fuse (FUSE) on this machine, with sshfs, rclone and fuse3');
    work = mkdtempSync(path.join(os.tmpdir(), 'svc-mounts-'));
    await makeTree(path.join(work, 'src'), tar());
    gw = await serveProcess(path.join(work, 'data'), {
      SVC_ADMIN_PASSWORD: PASSWORD,
      SVC_FTP_PORT: 'off',
      SVC_FTPS_PORT: 'off',
    });
    certFile = path.join(work, 'data', 'tls', 'cert.pem');
    rest = new RestApi(gw.ports.https!, readFileSync(certFile));
    await rest.signIn();
    obscured = (await run(['rclone', 'obscure', PASSWORD])).stdout.trim();
  });

  after(async () => {
    if (!work) return;
    // Nothing may still be mounted when the folder is removed: rm would reach through a mount.
    for (const name of readdirSync(work).filter((n) => n.startsWith('mnt-'))) {
      const dir = path.join(work, name);
      if ((await run(['mountpoint', '-q', dir])).code === 0) await run(['fusermount3', '-uz', dir]);
    }
    const code = gw ? await stopProcess(gw) : 0;
    rmSync(work, { recursive: true, force: true, maxRetries: 5 });
    expect(code, 'the gateway stopped cleanly').to.equal(0);
  });

  const kinds: [string, () => Promise<Mount>][] = [
    ['sshfs', () => mountSshfs(mkdtempSync(path.join(work, 'mnt-')), gw.ports.sftp!)],
    [
      'rclone-sftp',
      () =>
        mountRclone(
          mkdtempSync(path.join(work, 'mnt-')),
          `:sftp,host=127.0.0.1,port=${gw.ports.sftp},user=admin,pass=${obscured}:`,
          [],
        ),
    ],
    [
      'rclone-webdav',
      () =>
        mountRclone(
          mkdtempSync(path.join(work, 'mnt-')),
          `:webdav,url='https://127.0.0.1:${gw.ports.webdav}/',vendor=owncloud,user=admin,pass=${obscured}:`,
          ['--ca-cert', certFile],
        ),
    ],
  ];

  for (const [kind, mount] of kinds) {
    describe(kind, () => {
      let m: Mount | null = null;
      let seen: Listing | null = null;
      after(async () => {
        await m?.unmount();
      });

      it('passes every step of the everyday workload', async () => {
        m = await mount();
        const argv = ['bash', WORKLOAD, path.join(m.dir, kind), path.join(work, `local-${kind}`), tar()];
        const r = await run(argv, '', { timeoutMs: 480_000 });
        const steps = r.stdout.split('\n').filter((l) => l.startsWith('STEP '));
        expect(steps, r.stderr).to.have.length(13);
        // Shown, not asserted: a later rclone may lift its own limits.
        for (const l of steps.filter((l) => !l.endsWith(' ok'))) console.log(`        ${kind}: ${l}`);
        const failed = steps.filter(
          (l) => !l.endsWith(' ok') && !CLIENT_LIMITS[kind]!.includes(l.split(' ')[1]!),
        );
        expect(failed, r.stderr).to.deep.equal([]);
        await m.settle();
        seen = await listMount(path.join(m.dir, kind));
      });

      it('leaves the REST listing equal to what the mount showed: names, sizes, md5, no leftovers', async () => {
        expect(seen, 'the workload ran').to.not.equal(null);
        await m!.unmount();
        m = null;
        const listed = await rest.walk(kind);
        const diff = (a: Listing, b: Listing) =>
          [...a].filter(([k, v]) => b.get(k) !== v).map(([k, v]) => `${k}: ${v} / ${b.get(k) ?? 'missing'}`);
        expect(diff(seen!, listed), 'on the mount, not so in REST').to.deep.equal([]);
        expect(diff(listed, seen!), 'in REST, not so on the mount').to.deep.equal([]);
        expect(seen!.size).to.be.greaterThan(600 + 280); // the tree's files and folders, and the rest of the workload
        // Kept by the server, not only in the client's cache: `touch -d '2019-01-01 00:00:00'`.
        expect(await rest.mtime(`${kind}/touched`)).to.equal(1546300800);
      });
    });
  }
});
