/**
 * The production shape (issue 16): three gateway processes (`svc-gateway serve`, the compiled
 * build) on one PostgreSQL database and one S3-compatible bucket, sharing SVC_SECRET, the TLS
 * certificate and the SSH host key, behind HAProxy from Debian in TCP mode with PROXY protocol v2
 * on every listener. Each instance binds its own loopback address (127.0.1.1-3) and has its own
 * FTP passive range; HAProxy (127.0.0.1, the balancer's address every PASV names) forwards each
 * range to its instance, and fronts the S3 store as SVC_S3_PUBLIC_ENDPOINT. Real clients from
 * 127.0.0.2 drive every protocol through it; then one instance is killed with SIGKILL in the middle
 * of an lftp and an rclone upload, and restarted.
 *
 * PostgreSQL only: several instances need one shared database, which SQLite is not.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { expect } from 'chai';
import pg from 'pg';
import { freshDatabase, type FreshDatabase } from '../helpers/database.ts';
import { dbKind, TEST_DATABASE_URL } from '../helpers/gateway.ts';
import { serveProcess, type ServedProcess } from '../helpers/process.ts';
import { startS3, type S3TestServer } from '../helpers/s3.ts';
import { run, type RunResult } from './sftp/clients.ts';

const CLIENT = '127.0.0.2';
const BALANCER = '127.0.0.1';
const INSTANCES = ['127.0.1.1', '127.0.1.2', '127.0.1.3'];
const PASV_PORTS = 8;
const ADMIN_PASSWORD = 'cluster-admin-password-1';
const PASSWORD = 'cluster-password-1';
const API = '/api/rest/v1';
const LISTENERS = ['https', 'webdav', 'ftp', 'ftps', 'sftp'] as const;
type Listener = (typeof LISTENERS)[number];

const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** freePort asks the system for a free loopback port (the balancer's listeners). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, BALANCER, () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Instance is one gateway process and what it needs to start again as itself. */
interface Instance {
  name: string;
  address: string;
  pasv: { first: number; last: number };
  env: Record<string, string>;
  served: ServedProcess | null;
}

(dbKind === 'postgres' ? describe : describe.skip)(
  'a balanced cluster: three gateways behind HAProxy (PostgreSQL only: the instances share one database)',
  function () {
    this.timeout(180_000);
    let work: string;
    let db: FreshDatabase;
    let s3: S3TestServer;
    let haproxy: ChildProcess;
    /** HAProxy's log: one `client frontend server` line per connection, when it is made */
    const balancerLog: string[] = [];
    const instances: Instance[] = [];
    const front = {} as Record<Listener | 's3', number>;
    let certFile: string;
    let knownHosts: string;
    let adminSession: string;
    let statsSocket: string;

    before(async function () {
      this.timeout(120_000);
      if (spawnSync('haproxy', ['-v']).status !== 0)
        throw new Error('the cluster test needs haproxy: apt-get install haproxy');
      work = mkdtempSync(path.join(os.tmpdir(), 'svc-cluster-'));
      db = await freshDatabase(TEST_DATABASE_URL, 'svc_cluster');
      s3 = await startS3();

      // What the instances share: the certificate (for localhost, the name clients use), the SSH
      // host key, the secret.
      certFile = path.join(work, 'cert.pem');
      const keyFile = path.join(work, 'key.pem');
      const cert = spawnSync('openssl', [
        ...['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'],
        ...['-days', '2', '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1'],
        ...['-keyout', keyFile, '-out', certFile],
      ]);
      expect(cert.status, cert.stderr.toString()).to.equal(0);
      const hostKey = path.join(work, 'ssh_host_ed25519_key');
      expect(spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', hostKey]).status).to.equal(0);

      for (const name of [...LISTENERS, 's3'] as const) front[name] = await freePort();
      knownHosts = path.join(work, 'known_hosts');
      writeFileSync(knownHosts, `[${BALANCER}]:${front.sftp} ${readFileSync(`${hostKey}.pub`, 'utf8')}`);

      // Passive ranges below the ephemeral ports (32768+) and the other tests' fixed ranges (20000+),
      // one per instance, side by side.
      const base = 12_000 + Math.floor(Math.random() * 300) * INSTANCES.length * PASV_PORTS;
      const shared: Record<string, string> = {
        SVC_DATABASE_URL: db.url,
        SVC_STORAGE: 's3',
        SVC_S3_BUCKET: s3.bucket,
        SVC_S3_ENDPOINT: s3.endpoint,
        SVC_S3_PUBLIC_ENDPOINT: `http://${BALANCER}:${front.s3}`,
        SVC_S3_REGION: s3.region,
        SVC_S3_FORCE_PATH_STYLE: 'true',
        AWS_ACCESS_KEY_ID: s3.accessKeyId,
        AWS_SECRET_ACCESS_KEY: s3.secretAccessKey,
        AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
        SVC_SECRET: randomBytes(24).toString('base64url'),
        SVC_TLS_CERT: certFile,
        SVC_TLS_KEY: keyFile,
        SVC_SSH_HOST_KEY: hostKey,
        SVC_PUBLIC_URL: `https://localhost:${front.https}`,
        SVC_TRUSTED_PROXIES: BALANCER,
        SVC_FTP_PASV_ADDRESS: BALANCER,
        SVC_ADMIN_PASSWORD: ADMIN_PASSWORD,
        SVC_SHUTDOWN_GRACE_SECONDS: '2',
        SVC_LOG_LEVEL: 'info',
      };
      INSTANCES.forEach((address, i) => {
        const pasv = { first: base + i * PASV_PORTS, last: base + (i + 1) * PASV_PORTS - 1 };
        const env = {
          ...shared,
          SVC_BIND: address,
          SVC_FTP_PASV_PORTS: `${pasv.first}-${pasv.last}`,
        };
        instances.push({ name: `gw${i + 1}`, address, pasv, env, served: null });
      });
      // The first one migrates the fresh database; the others then start side by side.
      await start(instances[0]!);
      await Promise.all(instances.slice(1).map(start));

      statsSocket = path.join(work, 'haproxy.sock');
      const cfg = path.join(work, 'haproxy.cfg');
      writeFileSync(cfg, haproxyConfig());
      const check = spawnSync('haproxy', ['-c', '-f', cfg]);
      expect(check.status, check.stdout.toString() + check.stderr.toString()).to.equal(0);
      haproxy = spawn('haproxy', ['-db', '-f', cfg], { stdio: ['ignore', 'pipe', 'pipe'] });
      createInterface({ input: haproxy.stdout! }).on('line', (l) => balancerLog.push(l));
      createInterface({ input: haproxy.stderr! }).on('line', (l) => balancerLog.push(`stderr ${l}`));
      await waitFor(
        async () => (await curl(['-o', '/dev/null', '-w', '%{http_code}', url('/healthz')])).stdout === '200',
      );
      await waitFor(async () => (await serversUp()) === 3 * LISTENERS.length);

      const r = await api('POST', '/sessions', { body: { username: 'admin', password: ADMIN_PASSWORD } });
      expect(r.status, r.text).to.equal(200);
      adminSession = (r.json as { id: string }).id;
    });

    after(async () => {
      if (haproxy && haproxy.exitCode === null) {
        haproxy.kill('SIGTERM');
        await new Promise((r) => haproxy.once('exit', r));
      }
      await Promise.all(
        instances.map(async (i) => {
          const child = i.served?.child;
          if (!child || child.exitCode !== null || child.signalCode !== null) return;
          child.kill('SIGTERM');
          await new Promise((r) => child.once('exit', r));
        }),
      );
      await s3?.stop();
      await db?.drop();
      if (work) rmSync(work, { recursive: true, force: true });
    });

    /** start runs one instance; the first start picks its ports, a restart takes the same ones. */
    async function start(instance: Instance): Promise<void> {
      const ports = instance.served?.ports;
      const portEnv = Object.fromEntries(
        LISTENERS.map((l) => [`SVC_${l.toUpperCase()}_PORT`, String(ports?.[l] ?? 0)]),
      );
      const dataDir = path.join(work, instance.name);
      mkdirSync(dataDir, { recursive: true });
      instance.served = await serveProcess(dataDir, { ...instance.env, ...portEnv });
    }

    /** haproxyConfig is the balancer: TCP mode, PROXY v2 to each instance, one passive range each. */
    function haproxyConfig(): string {
      const lines = [
        'global',
        '  log stdout format raw local0',
        `  stats socket ${statsSocket} mode 600 level admin`,
        'defaults',
        '  mode tcp',
        '  log global',
        // One line per connection when it reaches its server: which instance served which client.
        '  option logasap',
        '  log-format "%ci %ft %s"',
        '  timeout connect 2s',
        '  timeout client 120s',
        '  timeout server 120s',
        // A connection to a dead instance is tried again on another one.
        '  retries 3',
        '  option redispatch 1',
        '  default-server inter 300ms fall 2 rise 2',
      ];
      for (const listener of LISTENERS) {
        lines.push(
          `frontend ${listener}`,
          `  bind ${BALANCER}:${front[listener]}`,
          `  default_backend ${listener}_gw`,
        );
        lines.push(`backend ${listener}_gw`, '  balance roundrobin');
        for (const i of instances)
          lines.push(`  server ${i.name} ${i.address}:${i.served!.ports[listener]} send-proxy-v2 check`);
      }
      for (const i of instances) {
        // The passive range as it comes, no PROXY header, to the one instance that named it.
        lines.push(`frontend pasv_${i.name}`, `  bind ${BALANCER}:${i.pasv.first}-${i.pasv.last}`);
        lines.push(
          `  default_backend pasv_${i.name}`,
          `backend pasv_${i.name}`,
          `  server ${i.name} ${i.address}`,
        );
      }
      lines.push(`frontend s3`, `  bind ${BALANCER}:${front.s3}`, '  default_backend s3');
      lines.push('backend s3', `  server store ${new URL(s3.endpoint).host}`);
      return `${lines.join('\n')}\n`;
    }

    /** stats sends one command to HAProxy's runtime API and returns its answer. */
    function stats(command: string): Promise<string> {
      return new Promise((resolve, reject) => {
        const socket = net.connect(statsSocket);
        let out = '';
        socket.on('data', (d: Buffer) => (out += d.toString()));
        socket.on('error', reject);
        socket.on('end', () => resolve(out));
        socket.end(`${command}\n`);
      });
    }

    /** serversUp counts the instances' listeners HAProxy's health checks see up. */
    async function serversUp(): Promise<number> {
      const state = await stats('show servers state');
      // Columns: be_id be_name srv_id srv_name srv_addr srv_op_state (2: running) …
      return state
        .split('\n')
        .filter((l) => /_gw /.test(l))
        .filter((l) => l.split(' ')[5] === '2').length;
    }

    /** waitFor polls `ok` until it holds (20 s at most). */
    async function waitFor(ok: () => Promise<boolean>, what = 'condition'): Promise<void> {
      const until = Date.now() + 20_000;
      while (!(await ok().catch(() => false))) {
        if (Date.now() > until)
          throw new Error(`${what} not reached within 20 s; haproxy: ${balancerLog.slice(-5).join(' | ')}`);
        await sleep(200);
      }
    }

    /** servedBy lists the instances that served `client`'s connections to `frontend` since log line `from`. */
    function servedBy(frontend: string, from: number, client = CLIENT): string[] {
      return balancerLog
        .slice(from)
        .map((l) => l.split(' '))
        .filter(([ci, ft]) => ci === client && ft === frontend)
        .map(([, , server]) => server!);
    }

    const url = (p: string) => `https://localhost:${front.https}${p}`;

    /** curl runs curl from the client's address, trusting the shared certificate. */
    function curl(args: string[]): Promise<RunResult> {
      const base = ['-sS', '--max-time', '60', '--interface', CLIENT, '--cacert', certFile];
      return run(['curl', ...base, '--resolve', `localhost:${front.https}:${BALANCER}`, ...args]);
    }

    /** api calls the REST API through the balancer with curl, as admin unless `session` says otherwise. */
    async function api(
      method: string,
      p: string,
      opts: { body?: unknown; session?: string } = {},
    ): Promise<{ status: number; text: string; json: unknown }> {
      const session = opts.session ?? adminSession;
      const args = ['-X', method, '-w', '\n%{http_code}', '-H', 'Accept: application/json'];
      if (session) args.push('-H', `X-SvcAPI-Auth: ${session}`);
      if (opts.body !== undefined)
        args.push('-H', 'Content-Type: application/json', '--data-binary', JSON.stringify(opts.body));
      const r = await curl([...args, url(`${API}${p}`)]);
      const at = r.stdout.lastIndexOf('\n');
      const text = r.stdout.slice(0, at);
      let json: unknown = null;
      try {
        json = JSON.parse(text);
      } catch {
        // not JSON
      }
      return { status: Number(r.stdout.slice(at + 1)), text: text || r.stderr, json };
    }

    /** makeUser creates a user whose user_root is a fresh folder, through the balancer. */
    async function makeUser(name: string): Promise<void> {
      const folder = await api('POST', `/folders/home/${name}`);
      expect(folder.status, folder.text).to.equal(201);
      const user = await api('POST', '/users', {
        body: { username: name, password: PASSWORD, user_root: `home/${name}/`, grant_permission: 'full' },
      });
      expect(user.status, user.text).to.equal(201);
    }

    /** download reads a file through REST (its signed download_uri) and returns its md5. */
    async function downloadMd5(sitePath: string): Promise<string> {
      const entry = await api('GET', `/files/${sitePath}`);
      expect(entry.status, entry.text).to.equal(200);
      const file = path.join(work, `download-${randomBytes(4).toString('hex')}`);
      const r = await curl(['-f', '-o', file, (entry.json as { download_uri: string }).download_uri]);
      expect(r.code, r.stderr).to.equal(0);
      return md5(readFileSync(file));
    }

    /** localFile writes `bytes` random bytes to a file under the work dir. */
    function localFile(name: string, bytes: number): { file: string; md5: string } {
      const data = randomBytes(bytes);
      const file = path.join(work, name);
      writeFileSync(file, data);
      return { file, md5: md5(data) };
    }

    /** lftp runs lftp from the client's address through the balancer's FTP or FTPS listener. */
    function lftp(
      listener: 'ftp' | 'ftps',
      user: string,
      commands: string,
      extra: string[] = [],
    ): Promise<RunResult> {
      const settings = [
        'set cmd:fail-exit yes',
        'set net:timeout 10',
        `set net:socket-bind-ipv4 ${CLIENT}`,
        `set ssl:ca-file ${certFile}`,
        'set ssl:check-hostname no',
        'set ftp:passive-mode yes',
        'set ftp:prefer-epsv no',
        listener === 'ftps' ? 'set ftp:ssl-protect-data yes' : 'set ftp:ssl-allow no',
        ...extra,
      ];
      const target = `${listener}://${BALANCER}:${front[listener]}`;
      return run(
        ['lftp', '-c', `${settings.join('; ')}; open -u '${user}','${PASSWORD}' ${target}; ${commands}`],
        '',
        {
          timeoutMs: 120_000,
        },
      );
    }

    /** sftp runs OpenSSH sftp from the client's address, checking the one host key strictly. */
    function sftp(user: string, commands: string[]): Promise<RunResult> {
      const options = [
        'StrictHostKeyChecking=yes',
        `UserKnownHostsFile=${knownHosts}`,
        'GlobalKnownHostsFile=/dev/null',
        `BindAddress=${CLIENT}`,
        'BatchMode=no',
        'PubkeyAuthentication=no',
        'NumberOfPasswordPrompts=1',
        'LogLevel=ERROR',
      ];
      return run(
        [
          'sshpass',
          '-p',
          PASSWORD,
          'sftp',
          ...options.flatMap((o) => ['-o', o]),
          '-b',
          '-',
          '-P',
          String(front.sftp),
          `${user}@${BALANCER}`,
        ],
        `${commands.join('\n')}\n`,
        { timeoutMs: 60_000 },
      );
    }

    /** rclone runs rclone against the balancer's WebDAV listener from the client's address. */
    async function rclone(user: string, args: string[], extra: string[] = []): Promise<RunResult> {
      const pass = (await run(['rclone', 'obscure', PASSWORD])).stdout.trim();
      const flags = [
        ...[
          '--webdav-url',
          `https://localhost:${front.webdav}/`,
          '--webdav-user',
          user,
          '--webdav-pass',
          pass,
        ],
        ...['--ca-cert', certFile, '--config', '/dev/null', '--bind', CLIENT],
      ];
      // rclone has no --resolve: localhost is 127.0.0.1, the balancer, already.
      return run(['rclone', ...args, ...flags, ...extra], '', { timeoutMs: 120_000 });
    }

    /** logins are a user's login Actions as `interface ip`, read from the shared database. */
    async function logins(username: string): Promise<string[]> {
      const client = new pg.Client({ connectionString: db.url });
      await client.connect();
      try {
        const r = await client.query<{ interface: string; ip: string }>(
          `SELECT DISTINCT interface, ip FROM actions WHERE username = $1 AND action = 'login' ORDER BY interface`,
          [username],
        );
        return r.rows.map((row) => `${row.interface} ${row.ip}`);
      } finally {
        await client.end();
      }
    }

    it('REST: a multi-step upload whose steps land on different instances, parts through SVC_S3_PUBLIC_ENDPOINT', async () => {
      await makeUser('rest1');
      const login = await api('POST', '/sessions', {
        session: '',
        body: { username: 'rest1', password: PASSWORD },
      });
      expect(login.status, login.text).to.equal(200);
      const session = (login.json as { id: string }).id;
      const first = localFile('part1', 5 * 1024 * 1024);
      const second = localFile('part2', 300 * 1024);
      const from = balancerLog.length;

      type Upload = { ref: string; upload_uri: string; headers: Record<string, string> };
      const put = async (body: Record<string, unknown>) => {
        // REST paths are the site's; user_root is where FTP, SFTP and WebDAV sessions start.
        const r = await api('POST', '/files/home/rest1/big.bin', {
          session,
          body: { action: 'put', ...body },
        });
        expect(r.status, r.text).to.equal(200);
        return r.json as Upload;
      };
      const send = async (upload: Upload, file: string) => {
        expect(new URL(upload.upload_uri).host).to.equal(`${BALANCER}:${front.s3}`);
        const headers = Object.entries(upload.headers).flatMap(([k, v]) => ['-H', `${k}: ${v}`]);
        const r = await curl(['-f', '-X', 'PUT', ...headers, '--data-binary', `@${file}`, upload.upload_uri]);
        expect(r.code, r.stderr).to.equal(0);
      };
      const upload = await put({});
      await send(upload, first.file);
      await send(await put({ ref: upload.ref, part: 2 }), second.file);
      const end = await api('POST', '/files/home/rest1/big.bin', {
        session,
        body: { action: 'end', ref: upload.ref },
      });
      expect(end.status, end.text).to.equal(200);

      const steps = servedBy('https', from);
      expect(steps, 'the REST steps went to every instance').to.have.members(['gw1', 'gw2', 'gw3']);
      expect(servedBy('s3', from), 'parts went through the public S3 endpoint').to.have.length(2);
      const whole = md5(Buffer.concat([readFileSync(first.file), readFileSync(second.file)]));
      expect(await downloadMd5('home/rest1/big.bin')).to.equal(whole);
      expect(await logins('rest1')).to.deep.equal([`restapi ${CLIENT}`]);
    });

    it('FTP, FTPS, SFTP and WebDAV through the balancer with real clients, Actions naming the client', async () => {
      await makeUser('files1');
      const from = balancerLog.length;
      for (const listener of ['ftp', 'ftps'] as const) {
        const f = localFile(`${listener}.bin`, 256 * 1024);
        const back = path.join(work, `${listener}.back`);
        // Three sessions: each lands on another instance, and its data connections on that one's range.
        for (let n = 0; n < 3; n++) {
          const r = await lftp(
            listener,
            'files1',
            `put ${f.file} -o ${listener}${n}.bin; get ${listener}${n}.bin -o ${back}; cls -1`,
          );
          expect(r.code, `${listener}: ${r.stderr}`).to.equal(0);
          expect(md5(readFileSync(back))).to.equal(f.md5);
          rmSync(back);
        }
      }
      const s = localFile('sftp.bin', 256 * 1024);
      for (let n = 0; n < 3; n++) {
        // One known_hosts entry for the balancer's address: every instance shows the same key.
        const r = await sftp('files1', [`put ${s.file} sftp${n}.bin`, `get sftp${n}.bin ${s.file}.back`]);
        expect(r.code, r.stderr).to.equal(0);
        expect(md5(readFileSync(`${s.file}.back`))).to.equal(s.md5);
      }
      const d = localFile('dav.bin', 256 * 1024);
      const up = await rclone('files1', ['copyto', d.file, ':webdav:dav.bin']);
      expect(up.code, up.stderr).to.equal(0);
      const down = await rclone('files1', ['copyto', ':webdav:dav.bin', `${d.file}.back`]);
      expect(down.code, down.stderr).to.equal(0);
      expect(md5(readFileSync(`${d.file}.back`))).to.equal(d.md5);

      for (const listener of ['ftp', 'ftps', 'sftp'] as const)
        expect(new Set(servedBy(listener, from)), `${listener} sessions`).to.have.property('size', 3);
      // Passive data connections reached the instance whose range PASV named.
      for (const i of instances) expect(servedBy(`pasv_${i.name}`, from)).to.not.be.empty;
      expect(await logins('files1')).to.deep.equal([`dav ${CLIENT}`, `ftp ${CLIENT}`, `sftp ${CLIENT}`]);
    });

    it('kill -9 of one instance during lftp and rclone uploads: they finish whole, the others serve, it rejoins', async () => {
      await makeUser('kill1');
      const size = 6 * 1024 * 1024;
      const ftpFile = localFile('kill-ftp.bin', size);
      const davFile = localFile('kill-dav.bin', size);
      // Steer both uploads to gw2: the others take no new FTP or WebDAV connections for now.
      const victim = instances[1]!;
      const steer = async (state: 'drain' | 'ready') => {
        for (const listener of ['ftp', 'webdav'])
          for (const other of [instances[0]!, instances[2]!])
            await stats(`set server ${listener}_gw/${other.name} state ${state}`);
      };
      await steer('drain');
      const from = balancerLog.length;
      const t0 = performance.now();
      const retrying = [
        'set net:max-retries 10',
        'set net:reconnect-interval-base 1',
        'set net:reconnect-interval-multiplier 1',
        'set net:limit-rate 1500000',
      ];
      const ftpRun = lftp('ftp', 'kill1', `put ${ftpFile.file} -o kill-ftp.bin`, retrying);
      const davRun = rclone(
        'kill1',
        ['copyto', davFile.file, ':webdav:kill-dav.bin'],
        [
          ...['--bwlimit', '1500k', '--retries', '10', '--retries-sleep', '1s', '--low-level-retries', '10'],
          ...['--timeout', '10s', '--contimeout', '5s'],
        ],
      );
      await waitFor(
        async () => servedBy('ftp', from).length > 0 && servedBy('webdav', from).length > 0,
        'both uploads started',
      );
      expect(servedBy('ftp', from)).to.include(victim.name);
      expect(servedBy('webdav', from)).to.include(victim.name);
      await steer('ready');
      await sleep(1500);
      const killed = victim.served!.child;
      const exited = new Promise((resolve) => killed.once('exit', resolve));
      killed.kill('SIGKILL');
      const killedAt = performance.now();
      // A request the dying process had accepted goes down with it; from its exit on, none may fail.
      await exited;

      // While the clients retry: the others keep serving, and nobody sees half a file.
      const seen: string[] = [];
      let served = 0;
      const clientsDone = Promise.all([ftpRun, davRun]);
      let finished = false;
      void clientsDone.then(() => (finished = true));
      while (!finished) {
        const list = await api('GET', '/folders/home/kill1');
        expect(list.status, `a listing while ${victim.name} is down: ${list.text}`).to.equal(200);
        served++;
        for (const e of list.json as { path: string; size: number }[]) {
          seen.push(`${path.basename(e.path)} ${e.size}`);
          expect(e.size, `${e.path} as listed after the kill`).to.equal(size);
        }
        await sleep(300);
      }
      const [ftpResult, davResult] = await clientsDone;
      expect(ftpResult.code, `lftp: ${ftpResult.stderr}`).to.equal(0);
      expect(davResult.code, `rclone: ${davResult.stderr}`).to.equal(0);
      const retried = (performance.now() - killedAt) / 1000;
      expect(served).to.be.greaterThan(0);
      expect(await downloadMd5('home/kill1/kill-ftp.bin')).to.equal(ftpFile.md5);
      expect(await downloadMd5('home/kill1/kill-dav.bin')).to.equal(davFile.md5);
      const names = ((await api('GET', '/folders/home/kill1')).json as { path: string }[]).map((e) =>
        path.basename(e.path),
      );
      expect(names.sort()).to.deep.equal(['kill-dav.bin', 'kill-ftp.bin']);
      // After the kill, the uploads were finished by the instances still running.
      const after = balancerLog.slice(from).join('\n');
      console.log(
        `      (uploads ${((killedAt - t0) / 1000).toFixed(1)} s in when ${victim.name} was killed; clients done ${retried.toFixed(1)} s later; ${served} listings served meanwhile; ${new Set(seen).size} states seen)`,
      );
      expect(after).to.match(/ ftp gw[13]/);
      expect(after).to.match(/ webdav gw[13]/);

      // The instance comes back on its ports and HAProxy sends it connections again.
      await start(victim);
      await waitFor(
        async () => (await serversUp()) === 3 * LISTENERS.length,
        'the restarted instance up in HAProxy',
      );
      const rejoin = balancerLog.length;
      for (let n = 0; n < 3; n++) expect((await api('GET', '/folders/home/kill1')).status).to.equal(200);
      expect(servedBy('https', rejoin)).to.include(victim.name);
      const r = await lftp('ftp', 'kill1', 'cls -1');
      expect(r.code, r.stderr).to.equal(0); // The instances that stayed up saw clients cut off elsewhere, nothing of their own to report.
      for (const i of [instances[0]!, instances[2]!])
        expect(i.served!.stderr.filter((l) => l.includes('"level":"error"'))).to.deep.equal([]);
    });
  },
);
