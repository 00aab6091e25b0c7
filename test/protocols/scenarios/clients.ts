/**
 * The cross-protocol scenarios' client (STYLE.md §5 and §10): one small interface, what a user
 * does with a file client, and four implementations over the real clients the protocol tests
 * already drive: REST over node's https (rest/files-fixture.ts), FTP with lftp (ftp/clients.ts),
 * SFTP with OpenSSH sftp in batch mode (sftp/clients.ts) and WebDAV with curl. Each answer is
 * normalized to what the user sees (ok, denied, not-found, exists, locked, login-refused) and keeps
 * the protocol's raw reply for the assertion messages. A scenario is written once against
 * `Client` and run with each `PROTOCOLS` entry.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { FindOptionsWhere } from 'typeorm';
import type { ActionRow } from '../../../src/db/entities.ts';
import { lftp, run as runProgram } from '../ftp/clients.ts';
import { API, keyAuth, unique } from '../rest/client.ts';
import { enc, FilesFixture, type UploadObject } from '../rest/files-fixture.ts';
import { sftpBatch } from '../sftp/clients.ts';
import { hrefs } from '../webdav/fixture.ts';
import type { Response } from '../../helpers/gateway.ts';

/** Protocol is a front end, named by the `interface` its Actions carry. */
export type Protocol = 'restapi' | 'ftp' | 'sftp' | 'dav';
/** PROTOCOLS are the four front ends every scenario runs against. */
export const PROTOCOLS: readonly Protocol[] = ['restapi', 'ftp', 'sftp', 'dav'];

/**
 * Outcome is what a user notices of an operation: it worked, they may not, it is not there, it is
 * there already, someone holds a lock on it, the login itself was refused; `failed` is anything
 * else (the raw reply tells what).
 */
export type Outcome = 'ok' | 'denied' | 'not-found' | 'exists' | 'locked' | 'login-refused' | 'failed';

/** Result is one operation's outcome, its value when it worked, and the protocol's own reply. */
export interface Result<T = undefined> {
  outcome: Outcome;
  value?: T;
  raw: string;
}

/** Account is a user made for a scenario; `root` is its user_root as a site path (no slashes around). */
export interface Account {
  id: number;
  username: string;
  password: string;
  root: string;
}

/** ClientOptions change how a client connects: another password, a source address, a WebDAV lock token. */
export interface ClientOptions {
  password?: string;
  /** the client's source address (127.0.0.2 for allowed_ips) */
  bind?: string;
  /** submitted in WebDAV's If header on writes; the other protocols have no way to send one */
  lockToken?: string;
}

/**
 * Client is what the scenarios do, in the user's own view: paths are relative to the user's
 * root (what FTP, SFTP and WebDAV show as `/`; the REST client adds user_root itself, as a REST
 * user whose files live there would). `copy` is null where the protocol has no copy (FTP).
 */
export interface Client {
  readonly protocol: Protocol;
  /** login authenticates and does nothing else; any answer but a refusal of the login is ok */
  login(): Promise<Result>;
  /** list names a folder's entries */
  list(dir: string): Promise<Result<string[]>>;
  stat(file: string): Promise<Result>;
  upload(file: string, data: string): Promise<Result>;
  download(file: string): Promise<Result<string>>;
  mkdir(dir: string): Promise<Result>;
  move(from: string, to: string): Promise<Result>;
  copy: ((from: string, to: string) => Promise<Result>) | null;
  /** remove deletes a file */
  remove(file: string): Promise<Result>;
  /** rmdir deletes an empty folder */
  rmdir(dir: string): Promise<Result>;
}

/**
 * Scenario is one gateway with all four listeners (users made through the REST API with the
 * site-wide key), a scratch folder for the command-line clients, and the clients.
 */
export class Scenario {
  readonly fx = new FilesFixture('local');
  dir = '';

  /** hooks registers the before/after hooks that start and stop the gateway in the current describe. */
  static hooks(settings: Record<string, unknown> = {}): Scenario {
    const s = new Scenario();
    before(async function () {
      this.timeout(60_000);
      s.dir = mkdtempSync(path.join(os.tmpdir(), 'svc-scenario-'));
      await s.fx.start({
        ...settings,
        ports: { ftp: 0, sftp: 0, webdav: 0 },
        // Every scenario logs in and fails to log in from 127.0.0.1 many times over; the per-IP
        // limit across usernames is not what they test.
        lockout: { ip_max_failures: 100_000, ...((settings.lockout as object | undefined) ?? {}) },
      });
    });
    after(async () => {
      await s.fx.stop();
      if (s.dir) rmSync(s.dir, { recursive: true, force: true });
    });
    return s;
  }

  /** site is the site-wide key's header. */
  get site(): Record<string, string> {
    return keyAuth(this.fx.gw.siteKey);
  }

  /** admin calls the REST API with the site-wide key, expecting `status`. */
  async admin(method: string, rest: string, body?: unknown, status = 200): Promise<Response> {
    const r = await this.fx.gw.request(method, `${API}${rest}`, {
      headers: this.site,
      ...(body === undefined ? {} : { body }),
    });
    if (r.status !== status) throw new Error(`${method} ${rest}: ${r.status} ${r.text}`);
    return r;
  }

  /**
   * account makes a user through the REST API: its user_root home/<name>/ created first (as SPEC
   * asks), `permission` on it unless null, and any other User `fields`.
   */
  async account(permission: string | null = 'full', fields: Record<string, unknown> = {}): Promise<Account> {
    const username = unique('sc');
    const root = `home/${username}`;
    const password = 'Scenario-password-1';
    await this.admin('POST', `/folders/${enc(root)}`, undefined, 201);
    const user = await this.admin(
      'POST',
      '/users',
      { username, password, user_root: `${root}/`, ...fields },
      201,
    );
    if (permission)
      await this.admin('POST', '/permissions', { path: root, user_id: user.json.id, permission }, 201);
    return { id: user.json.id as number, username, password, root };
  }

  /** put writes a file (site path) through the REST API with the site-wide key. */
  async put(sitePath: string, data: string): Promise<void> {
    await this.fx.upload(sitePath, Buffer.from(data));
  }

  /** exists tells whether a site path exists, asked with the site-wide key. */
  exists(sitePath: string): Promise<boolean> {
    return this.fx.exists(sitePath);
  }

  /** actions are the Action rows matching `where`, oldest first. */
  actions(where: FindOptionsWhere<ActionRow>): Promise<ActionRow[]> {
    return this.fx.actions(where);
  }

  /** client is `account`'s client of `protocol`. */
  client(protocol: Protocol, account: Account, opts: ClientOptions = {}): Client {
    const login = { ...account, password: opts.password ?? account.password };
    switch (protocol) {
      case 'restapi':
        return new RestClient(this.fx, login, opts);
      case 'ftp':
        return new FtpClient(this, login, opts);
      case 'sftp':
        return new SftpClient(this, login, opts);
      case 'dav':
        return new DavClient(this, login, opts);
    }
  }

  /** scratch is a new file name in the scratch folder. */
  scratch(name: string): string {
    return path.join(this.dir, unique(`${name}-`));
  }
}

const result = <T>(outcome: Outcome, raw: string, value?: T): Result<T> =>
  value === undefined ? { outcome, raw } : { outcome, raw, value };

/** httpOutcome reads a REST or WebDAV status as the user's outcome. */
function httpOutcome(status: number, text: string): Outcome {
  if (status >= 200 && status < 300) return 'ok';
  if (status === 401) return 'login-refused';
  if (status === 403) return 'denied';
  if (status === 404) return 'not-found';
  if (status === 423) return 'locked';
  // WebDAV: MKCOL on an existing name is 405, Overwrite: F onto one 412; REST says the type.
  if (status === 405 || status === 412 || /destination-exists/.test(text)) return 'exists';
  return 'failed';
}

/** RestClient is a REST API user: POST /sessions, then the session header on every request. */
class RestClient implements Client {
  readonly protocol = 'restapi';
  private session: string | null = null;

  constructor(
    private readonly fx: FilesFixture,
    private readonly account: Account,
    private readonly opts: ClientOptions,
  ) {}

  private site(p: string): string {
    return p ? `${this.account.root}/${p}` : this.account.root;
  }

  async login(): Promise<Result> {
    const r = await this.fx.gw.request('POST', `${API}/sessions`, {
      body: { username: this.account.username, password: this.account.password },
      ...(this.opts.bind ? { localAddress: this.opts.bind } : {}),
    });
    if (r.status === 200) this.session = r.json.id as string;
    return result(httpOutcome(r.status, r.text), `${r.status} ${r.text}`);
  }

  /** call sends one request in the session, logging in first; a refused login is the answer. */
  private async call(method: string, rest: string, body?: unknown): Promise<Response | Result<never>> {
    if (!this.session) {
      const l = await this.login();
      if (l.outcome !== 'ok') return { outcome: l.outcome, raw: l.raw };
    }
    return this.fx.gw.request(method, `${API}${rest}`, {
      headers: { 'X-SvcAPI-Auth': this.session! },
      ...(body === undefined ? {} : { body }),
      ...(this.opts.bind ? { localAddress: this.opts.bind } : {}),
    });
  }

  private async simple(method: string, rest: string, body?: unknown): Promise<Result> {
    const r = await this.call(method, rest, body);
    if ('outcome' in r) return r;
    return result(httpOutcome(r.status, r.text), `${r.status} ${r.text}`);
  }

  async list(dir: string): Promise<Result<string[]>> {
    const r = await this.call('GET', this.fx.folders(this.site(dir)));
    if ('outcome' in r) return r;
    const names =
      r.status === 200 ? (r.json as { path: string }[]).map((e) => e.path.split('/').pop()!) : undefined;
    return result(httpOutcome(r.status, r.text), `${r.status} ${r.text}`, names);
  }

  stat(file: string): Promise<Result> {
    return this.simple('GET', this.fx.files(this.site(file), '?action=stat'));
  }

  /** upload is SPEC's three steps: action=put, the part to its upload_uri, action=end. */
  async upload(file: string, data: string): Promise<Result> {
    const url = this.fx.files(this.site(file));
    const start = await this.call('POST', url, { action: 'put' });
    if ('outcome' in start) return start;
    if (start.status !== 200)
      return result(httpOutcome(start.status, start.text), `${start.status} ${start.text}`);
    const upload = start.json as UploadObject;
    const { method, headers } = this.fx.partRequest(upload, Buffer.from(data));
    const part = await this.fx.transfer(upload.upload_uri, { method, headers, body: Buffer.from(data) });
    const partText = part.body.toString();
    if (part.status !== 200)
      return result(httpOutcome(part.status, partText), `part: ${part.status} ${partText}`);
    return this.simple('POST', url, { action: 'end', ref: upload.ref });
  }

  /** download is GET /files/<path> (the `read` Action), then its download_uri. */
  async download(file: string): Promise<Result<string>> {
    const r = await this.call('GET', this.fx.files(this.site(file)));
    if ('outcome' in r) return r;
    if (r.status !== 200) return result(httpOutcome(r.status, r.text), `${r.status} ${r.text}`);
    const got = await this.fx.transfer(r.json.download_uri as string);
    const body = got.body.toString();
    return result(
      httpOutcome(got.status, body),
      `download_uri: ${got.status}`,
      got.status === 200 ? body : undefined,
    );
  }

  mkdir(dir: string): Promise<Result> {
    return this.simple('POST', this.fx.folders(this.site(dir)));
  }

  move(from: string, to: string): Promise<Result> {
    return this.simple('POST', this.fx.files(this.site(from)), { 'move-destination': this.site(to) });
  }

  copy = (from: string, to: string): Promise<Result> =>
    this.simple('POST', this.fx.files(this.site(from)), { 'copy-destination': this.site(to) });

  remove(file: string): Promise<Result> {
    return this.simple('DELETE', this.fx.files(this.site(file)));
  }

  rmdir(dir: string): Promise<Result> {
    return this.simple('DELETE', this.fx.files(this.site(dir)));
  }
}

/** ftpOutcome reads lftp's exit and error line: 530 refused the login, 450 a lock, 550 the rest. */
function ftpOutcome(code: number, stderr: string): Outcome {
  if (code === 0) return 'ok';
  if (/\b530\b|Login (incorrect|failed)/i.test(stderr)) return 'login-refused';
  if (/\b450\b/.test(stderr)) return 'locked';
  if (/\b55\d\b.*(no such|not found|does not exist)/i.test(stderr)) return 'not-found';
  if (/\b55\d\b.*exist/i.test(stderr)) return 'exists';
  if (/\b55\d\b/.test(stderr)) return 'denied';
  return 'failed';
}

/** q makes a user path absolute and quotes it for an lftp script or an sftp batch line. */
const q = (p: string) => `"/${p.replace(/(["\\])/g, '\\$1')}"`;

/** FtpClient runs one lftp session (plain FTP) per operation, as a user's script would. */
class FtpClient implements Client {
  readonly protocol = 'ftp';

  constructor(
    private readonly s: Scenario,
    private readonly account: Account,
    private readonly opts: ClientOptions,
  ) {}

  private async lftp(script: string): Promise<{ outcome: Outcome; raw: string; stdout: string }> {
    const r = await lftp(this.s.fx.gw, 'plain', this.account.username, script, {
      password: this.account.password,
      // One login attempt per operation: a retried wrong password would count twice toward the lockout.
      // debug 3 prints the server's replies: lftp takes a 4xx (450 for a lock) as transient, retries,
      // and then reports only "max-retries exceeded", without the reply that caused it.
      extra: `set net:max-retries 1; set net:persist-retries 0; debug 3${
        this.opts.bind ? `; set net:socket-bind-ipv4 ${this.opts.bind}` : ''
      }`,
    });
    const lines = r.stderr.split('\n');
    const errors = lines
      .filter((l) => !/^(<---|--->|---- |\*\*\*\*|Connecting to)/.test(l.trim()))
      .join('\n');
    const replies = lines.filter((l) => /^<--- \d{3} /.test(l.trim()));
    const last = replies[replies.length - 1]?.trim().slice(5) ?? '';
    const text = /max-retries exceeded/.test(errors) && /^4\d\d /.test(last) ? last : errors;
    return { outcome: ftpOutcome(r.code, text), raw: `exit ${r.code}: ${text}`, stdout: r.stdout };
  }

  async login(): Promise<Result> {
    const r = await this.lftp('quote NOOP');
    return result(r.outcome, r.raw);
  }

  async list(dir: string): Promise<Result<string[]>> {
    const r = await this.lftp(`cls -1 ${q(dir)}`);
    const names = r.stdout
      .split('\n')
      .map((l) => l.trim().replace(/\/$/, ''))
      .filter(Boolean)
      .map((l) => l.split('/').pop()!);
    return result(r.outcome, r.raw, r.outcome === 'ok' ? names : undefined);
  }

  async stat(file: string): Promise<Result> {
    // MLST is FTP's stat of one entry (RFC 3659); lftp's quote prints the reply and exits 0 whatever it was.
    const r = await this.lftp(`quote MLST ${q(file)}`);
    if (r.outcome !== 'ok') return result(r.outcome, r.raw);
    return result(/^2\d\d/.test(r.stdout) ? 'ok' : ftpOutcome(1, r.stdout), `reply: ${r.stdout}`);
  }

  async upload(file: string, data: string): Promise<Result> {
    const local = this.s.scratch('up');
    writeFileSync(local, data);
    const r = await this.lftp(`put ${local} -o ${q(file)}`);
    return result(r.outcome, r.raw);
  }

  async download(file: string): Promise<Result<string>> {
    const local = this.s.scratch('down');
    const r = await this.lftp(`get ${q(file)} -o ${local}`);
    const body = r.outcome === 'ok' && existsSync(local) ? readFileSync(local, 'utf8') : undefined;
    return result(r.outcome, r.raw, body);
  }

  async mkdir(dir: string): Promise<Result> {
    return result(...outcomeOf(await this.lftp(`mkdir ${q(dir)}`)));
  }

  async move(from: string, to: string): Promise<Result> {
    return result(...outcomeOf(await this.lftp(`mv ${q(from)} ${q(to)}`)));
  }

  // FTP has no copy command (RFC 959 and its extensions): a user downloads and uploads again.
  copy = null;

  async remove(file: string): Promise<Result> {
    return result(...outcomeOf(await this.lftp(`rm ${q(file)}`)));
  }

  async rmdir(dir: string): Promise<Result> {
    return result(...outcomeOf(await this.lftp(`rmdir ${q(dir)}`)));
  }
}

const outcomeOf = (r: { outcome: Outcome; raw: string }): [Outcome, string] => [r.outcome, r.raw];

/**
 * sftpOutcome reads OpenSSH sftp's exit and messages: ssh's own "Permission denied (password)" or
 * a closed connection is a refused login, the rest are the SFTP status texts it prints.
 */
function sftpOutcome(code: number | null, stderr: string): Outcome {
  // sshpass exits 5 when the server asks for the password again: it was refused.
  if (code === 5) return 'login-refused';
  if (/Permission denied \(|Connection closed|Authentication failed|Too many authentication/i.test(stderr))
    return 'login-refused';
  if (/lock/i.test(stderr)) return 'locked';
  if (/No such file|not found/i.test(stderr)) return 'not-found';
  if (/exist/i.test(stderr)) return 'exists';
  if (/Permission denied/i.test(stderr)) return 'denied';
  return code === 0 && stderr.trim() === '' ? 'ok' : 'failed';
}

/** SftpClient runs one OpenSSH sftp batch (password through sshpass) per operation. */
class SftpClient implements Client {
  readonly protocol = 'sftp';

  constructor(
    private readonly s: Scenario,
    private readonly account: Account,
    private readonly opts: ClientOptions,
  ) {}

  /**
   * batch runs one command. OpenSSH's ls and get glob the path first and print any refused stat
   * as `not found`: when the path does exist (asked with the site-wide key), the server refused it.
   */
  private async batch(
    command: string,
    globbed?: string,
  ): Promise<{ outcome: Outcome; raw: string; stdout: string }> {
    const r = await this.run(command);
    if (
      globbed !== undefined &&
      r.outcome === 'not-found' &&
      /(Can't ls: |File )".*" not found/.test(r.raw) &&
      (await this.s.exists(globbed ? `${this.account.root}/${globbed}` : this.account.root))
    )
      return { ...r, outcome: 'denied', raw: `${r.raw} (it exists: OpenSSH's glob hid a refusal)` };
    return r;
  }

  private async run(command: string): Promise<{ outcome: Outcome; raw: string; stdout: string }> {
    const r = await sftpBatch(
      this.s.fx.gw.ports.sftp!,
      this.account.username,
      { password: this.account.password },
      [command],
      {
        cwd: this.s.dir,
        // One password attempt per login: after a refused password OpenSSH would go on to
        // keyboard-interactive, and whether sshpass answers that second prompt is a race.
        options: ['KbdInteractiveAuthentication=no'],
        ...(this.opts.bind ? { bind: this.opts.bind } : {}),
      },
    );
    return { outcome: sftpOutcome(r.code, r.stderr), raw: `exit ${r.code}: ${r.stderr}`, stdout: r.stdout };
  }

  async login(): Promise<Result> {
    return result(...outcomeOf(await this.batch('pwd')));
  }

  async list(dir: string): Promise<Result<string[]>> {
    const r = await this.batch(`ls -1a ${q(dir)}`, dir);
    const names = r.stdout
      .split('\n')
      .filter((l) => !l.startsWith('sftp>'))
      .map((l) => l.trim().split('/').pop()!)
      .filter((n) => n && n !== '.' && n !== '..');
    return result(r.outcome, r.raw, r.outcome === 'ok' ? names : undefined);
  }

  async stat(file: string): Promise<Result> {
    return result(...outcomeOf(await this.batch(`ls -l ${q(file)}`, file)));
  }

  async upload(file: string, data: string): Promise<Result> {
    const local = this.s.scratch('up');
    writeFileSync(local, data);
    return result(...outcomeOf(await this.batch(`put ${local} ${q(file)}`)));
  }

  async download(file: string): Promise<Result<string>> {
    const local = this.s.scratch('down');
    const r = await this.batch(`get ${q(file)} ${local}`, file);
    // OpenSSH's get stats first, and a refused stat does not fail its batch: the file tells.
    const outcome = r.outcome === 'ok' && !existsSync(local) ? 'failed' : r.outcome;
    return result(outcome, r.raw, outcome === 'ok' ? readFileSync(local, 'utf8') : undefined);
  }

  async mkdir(dir: string): Promise<Result> {
    return result(...outcomeOf(await this.batch(`mkdir ${q(dir)}`)));
  }

  async move(from: string, to: string): Promise<Result> {
    return result(...outcomeOf(await this.batch(`rename ${q(from)} ${q(to)}`)));
  }

  // OpenSSH sftp >= 9.0 `cp` sends copy-data, which the gateway serves as a core copy.
  copy = async (from: string, to: string): Promise<Result> =>
    result(...outcomeOf(await this.batch(`cp ${q(from)} ${q(to)}`)));

  async remove(file: string): Promise<Result> {
    return result(...outcomeOf(await this.batch(`rm ${q(file)}`)));
  }

  async rmdir(dir: string): Promise<Result> {
    return result(...outcomeOf(await this.batch(`rmdir ${q(dir)}`)));
  }
}

/** DavClient sends one curl request per operation, with HTTP Basic, trusting the gateway's certificate. */
class DavClient implements Client {
  readonly protocol = 'dav';

  constructor(
    private readonly s: Scenario,
    private readonly account: Account,
    private readonly opts: ClientOptions,
  ) {}

  private url(p: string): string {
    return `https://127.0.0.1:${this.s.fx.gw.ports.webdav}/${enc(p)}`;
  }

  /** curl runs one request and returns its status and body. */
  async curl(
    method: string,
    p: string,
    args: string[] = [],
  ): Promise<{ status: number; body: string; outcome: Outcome; raw: string }> {
    const out = this.s.scratch('body');
    const cert = path.join(this.s.fx.gw.config.data_dir, 'tls', 'cert.pem');
    const r = await runProgram('curl', [
      '-sS',
      '--cacert',
      cert,
      '-u',
      `${this.account.username}:${this.account.password}`,
      ...(this.opts.bind ? ['--interface', this.opts.bind] : []),
      '-X',
      method,
      '-o',
      out,
      '-w',
      '%{http_code}',
      ...args,
      this.url(p),
    ]);
    const status = Number(r.stdout.trim());
    const body = existsSync(out) ? readFileSync(out, 'utf8') : '';
    return {
      status,
      body,
      outcome: r.code === 0 ? httpOutcome(status, body) : 'failed',
      raw: `${method} ${status} ${r.stderr}${body.slice(0, 500)}`,
    };
  }

  /** lock takes an exclusive write lock (WebDAV LOCK, 10 minutes) and returns its token. */
  async lock(file: string): Promise<{ token: string | null; raw: string }> {
    const headers = this.s.scratch('headers');
    const body =
      '<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope>' +
      '<D:locktype><D:write/></D:locktype><D:owner><D:href>scenarios</D:href></D:owner></D:lockinfo>';
    const r = await this.curl('LOCK', file, [
      '-D',
      headers,
      '-H',
      'Timeout: Second-600',
      '--data-binary',
      body,
    ]);
    const token = existsSync(headers)
      ? /^lock-token:\s*<([^>]+)>/im.exec(readFileSync(headers, 'utf8'))?.[1]
      : undefined;
    return { token: r.outcome === 'ok' ? (token ?? null) : null, raw: r.raw };
  }

  /** unlock releases a lock by its token. */
  async unlock(file: string, token: string): Promise<Result> {
    return result(...outcomeOf(await this.curl('UNLOCK', file, ['-H', `Lock-Token: <${token}>`])));
  }

  private ifHeader(): string[] {
    return this.opts.lockToken ? ['-H', `If: (<${this.opts.lockToken}>)`] : [];
  }

  async login(): Promise<Result> {
    const r = await this.curl('PROPFIND', '', ['-H', 'Depth: 0']);
    // Authenticated but not allowed to list the root is still a login.
    return result(r.outcome === 'login-refused' ? r.outcome : 'ok', r.raw);
  }

  async list(dir: string): Promise<Result<string[]>> {
    const r = await this.curl('PROPFIND', dir ? `${dir}/` : '', ['-H', 'Depth: 1']);
    const self = `/${dir ? `${enc(dir)}/` : ''}`;
    const names = hrefs(r.body)
      .filter((h) => h !== self)
      .map((h) => decodeURIComponent(h.replace(/\/$/, '').split('/').pop()!));
    return result(r.outcome, r.raw, r.outcome === 'ok' ? names : undefined);
  }

  async stat(file: string): Promise<Result> {
    return result(...outcomeOf(await this.curl('PROPFIND', file, ['-H', 'Depth: 0'])));
  }

  async upload(file: string, data: string): Promise<Result> {
    const local = this.s.scratch('up');
    writeFileSync(local, data);
    return result(...outcomeOf(await this.curl('PUT', file, ['-T', local, ...this.ifHeader()])));
  }

  async download(file: string): Promise<Result<string>> {
    const r = await this.curl('GET', file);
    return result(r.outcome, r.raw, r.outcome === 'ok' ? r.body : undefined);
  }

  async mkdir(dir: string): Promise<Result> {
    return result(...outcomeOf(await this.curl('MKCOL', dir)));
  }

  async move(from: string, to: string): Promise<Result> {
    return result(
      ...outcomeOf(await this.curl('MOVE', from, ['-H', `Destination: ${this.url(to)}`, ...this.ifHeader()])),
    );
  }

  copy = async (from: string, to: string): Promise<Result> =>
    result(...outcomeOf(await this.curl('COPY', from, ['-H', `Destination: ${this.url(to)}`])));

  async remove(file: string): Promise<Result> {
    return result(...outcomeOf(await this.curl('DELETE', file, this.ifHeader())));
  }

  async rmdir(dir: string): Promise<Result> {
    return result(...outcomeOf(await this.curl('DELETE', `${dir}/`, this.ifHeader())));
  }
}

/** davClient is `client('dav', …)` typed as the curl client, for WebDAV-only steps (LOCK, UNLOCK). */
export function davClient(s: Scenario, account: Account, opts: ClientOptions = {}): DavClient {
  return s.client('dav', account, opts) as DavClient;
}
