/**
 * The operator's command line beside a running gateway (issue 16, item 5): `svc-gateway users
 * delete|passwd|unlock`, `api-keys list|revoke` and `permissions list|grant|revoke`, each run as its
 * own process on the same data dir and database as a served gateway, and each checked by what a
 * client of that gateway then meets over HTTPS.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { TEST_DATABASE_URL, dbKind } from '../helpers/gateway.ts';
import { freshDatabase } from '../helpers/database.ts';
import { serveProcess, stopProcess, type ServedProcess } from '../helpers/process.ts';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

describe(`the svc-gateway command line beside a running gateway (${dbKind})`, function () {
  this.timeout(180_000);
  let dir: string;
  let env: Record<string, string>;
  let dropDb: (() => Promise<void>) | null = null;
  let gw: ServedProcess;
  let ca: Buffer;

  /** cli runs one `svc-gateway` command to its end, with `input` on its stdin. */
  function cli(args: string[], input = ''): Promise<Run> {
    const child = spawn(process.execPath, ['bin/svc-gateway.js', ...args], {
      env: { ...process.env, SVC_DATA_DIR: dir, SVC_LOG_LEVEL: 'warn', ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.stdin.end(input);
    return new Promise((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr })));
  }

  async function ok(args: string[], input = ''): Promise<string> {
    const r = await cli(args, input);
    expect(r.code, `${args.join(' ')}: ${r.stderr}`).to.equal(0);
    return r.stdout;
  }

  /** api sends one REST request and answers its status and parsed JSON body. */
  function api(
    method: string,
    route: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<{ status: number; json: Record<string, unknown> }> {
    return new Promise((resolve, reject) => {
      const req = https.request(
        {
          host: '127.0.0.1',
          port: gw.ports.https,
          method,
          path: `/api/rest/v1${route}`,
          ca,
          servername: 'localhost',
          headers: { 'content-type': 'application/json', ...headers },
        },
        (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString()));
          res.on('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              json: text ? (JSON.parse(text) as Record<string, unknown>) : {},
            }),
          );
        },
      );
      req.on('error', reject);
      req.end(body === undefined ? undefined : JSON.stringify(body));
    });
  }

  const signIn = (username: string, password: string) => api('POST', '/sessions', { username, password });

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'svc-cli-'));
    env = {};
    if (TEST_DATABASE_URL) {
      const db = await freshDatabase(TEST_DATABASE_URL, 'svc_cli');
      env.SVC_DATABASE_URL = db.url;
      dropDb = db.drop;
    }
    gw = await serveProcess(dir, env);
    ca = readFileSync(path.join(dir, 'tls', 'cert.pem'));
  });
  after(async () => {
    if (gw) await stopProcess(gw);
    await dropDb?.();
    rmSync(dir, { recursive: true, force: true });
  });

  it('users unlock ends a lockout: the right password works again at once', async () => {
    await ok(['users', 'create', '--username', 'carol', '--password', 'Carol-pass-1']);
    expect((await signIn('carol', 'Carol-pass-1')).status).to.equal(200);
    for (let i = 0; i < 5; i++) expect((await signIn('carol', 'wrong-password')).status).to.equal(401);
    const locked = await signIn('carol', 'Carol-pass-1');
    expect(locked.status).to.equal(401);
    expect(locked.json.type).to.equal('not-authenticated/locked-out');

    expect(await ok(['users', 'unlock', 'CAROL'])).to.match(/^unlocked user \d+ carol$/m);
    expect((await signIn('carol', 'Carol-pass-1')).status).to.equal(200);
  });

  it('users passwd sets a password from stdin (or --password): the old one stops working', async () => {
    expect(await ok(['users', 'passwd', 'carol'], 'Carol-pass-2\n')).to.match(
      /set the password of user \d+ carol/,
    );
    expect((await signIn('carol', 'Carol-pass-1')).json.type).to.equal(
      'not-authenticated/invalid-username-or-password',
    );
    expect((await signIn('carol', 'Carol-pass-2')).status).to.equal(200);

    await ok(['users', 'passwd', 'carol', '--password', 'Carol-pass-3']);
    expect((await signIn('carol', 'Carol-pass-3')).status).to.equal(200);

    const empty = await cli(['users', 'passwd', 'carol'], '');
    expect(empty.code).to.equal(2);
    expect(empty.stderr).to.include('give --password or one line on stdin');
    expect((await signIn('carol', 'Carol-pass-3')).status, 'an empty stdin changes nothing').to.equal(200);
  });

  it('permissions grant, list and revoke: what the user may read follows', async () => {
    const key = (await ok(['api-keys', 'create', '--site-wide', '--name', 'cli-test'])).trim();
    const site = { 'X-SvcAPI-Key': key };
    expect((await api('POST', '/folders/projects', {}, site)).status).to.equal(201);
    const session = (await signIn('carol', 'Carol-pass-3')).json.id as string;
    const asCarol = { 'X-SvcAPI-Auth': session };
    expect((await api('GET', '/folders/projects', undefined, asCarol)).status).to.equal(403);

    // `grant carol …` as a shell would split it
    const grant = (more: string) =>
      cli(['permissions', 'grant', '--path', 'projects', '--user', 'carol', ...more.split(' ')]);
    const granted = await grant('--permission readonly');
    expect(granted.code, granted.stderr).to.equal(0);
    const id = /granted permission (\d+): readonly on \/projects to user carol/.exec(granted.stdout)?.[1];
    expect(id, granted.stdout).to.be.a('string');
    expect(await ok(['permissions', 'list', '--user', 'carol'])).to.include(
      `${id}\t/projects\treadonly\tuser carol`,
    );
    expect((await api('GET', '/folders/projects', undefined, asCarol)).status).to.equal(200);

    await ok(['permissions', 'revoke', id!]);
    expect(await ok(['permissions', 'list', '--user', 'carol'])).to.equal('');
    expect((await api('GET', '/folders/projects', undefined, asCarol)).status).to.equal(403);

    expect((await grant('--group g --permission full')).code).to.equal(2);
    const badLevel = await grant('--permission all');
    expect(badLevel.code).to.equal(1);
    expect(badLevel.stderr).to.include('Permission must be one of full, readonly');
    expect(badLevel.stderr).to.not.include('    at ');
  });

  it('api-keys list shows a key without its secret; revoke ends it within the credential cache time', async () => {
    const key = (await ok(['api-keys', 'create', '--site-wide', '--name', 'to-revoke'])).trim();
    const site = { 'X-SvcAPI-Key': key };
    expect((await api('GET', '/users', undefined, site)).status).to.equal(200);
    const listed = await ok(['api-keys', 'list']);
    expect(listed).to.not.include(key);
    const line = listed.split('\n').find((l) => l.split('\t')[1] === 'to-revoke');
    expect(line, listed).to.be.a('string');
    await ok(['api-keys', 'revoke', line!.split('\t')[0]!]);
    // The running gateway may keep a verified key for credential_cache_seconds (5).
    const deadline = Date.now() + 10_000;
    let status = 200;
    while (Date.now() < deadline && status === 200) {
      status = (await api('GET', '/users', undefined, site)).status;
      if (status === 200) await new Promise((r) => setTimeout(r, 500));
    }
    expect(status).to.equal(401);
  });

  it('users delete ends the account; a second delete names the missing user in one line', async () => {
    expect(await ok(['users', 'delete', 'carol'])).to.match(/^deleted user \d+ carol$/m);
    expect((await signIn('carol', 'Carol-pass-3')).json.type).to.equal(
      'not-authenticated/invalid-username-or-password',
    );
    const again = await cli(['users', 'delete', 'carol']);
    expect(again.code).to.equal(1);
    expect(again.stderr.trim()).to.equal('svc-gateway: not-found/user-not-found: User carol not found');
  });

  it('a file that cannot be read, or an id that is not one, is told in one line, no stack', async () => {
    const missing = await cli(['billing', 'import', path.join(dir, 'no-such-file.csv')]);
    expect(missing.code).to.equal(1);
    expect(missing.stderr).to.match(
      /^svc-gateway: ENOENT: no such file or directory, open '.*no-such-file\.csv'\n$/,
    );
    const notAnId = await cli(['api-keys', 'revoke', 'first']);
    expect(notAnId.code).to.equal(2);
    expect(notAnId.stderr).to.include('api-keys revoke: give the id (a number)');
  });
});
