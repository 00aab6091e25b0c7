/**
 * Issue 7 seen from every front end: webhooks and e-mail notifications work the same whichever
 * protocol caused the Action. One gateway with every listener, a real webhook receiver and a real
 * SMTP server on loopback; alice (user_root `partners/alice`) uploads, renames and deletes a file
 * with each protocol's real client (lftp, OpenSSH sftp, curl for WebDAV, HTTPS for REST). The
 * receiver must get one signed delivery per Action, with the protocol's `interface` and the SITE
 * path (not alice's chrooted `/name`), and the delivery log must record each as a success. Then
 * uploads over FTP, SFTP and WebDAV in one batching window make one e-mail listing the three.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { In } from 'typeorm';
import { operatorPrincipal } from '../../src/core/index.ts';
import {
  ActionEntity,
  MailChangeEntity,
  UserEntity,
  WebhookAttemptEntity,
  WebhookDeliveryEntity,
  type ActionRow,
} from '../../src/db/entities.ts';
import { dbKind, startTestGateway, type TestGateway } from '../helpers/gateway.ts';
import { startReceiver, type Received, type Receiver } from '../unit/events/receiver.ts';
import { startSmtp, type Smtp } from '../unit/events/smtp.ts';
import { createFtpUser, lftp, PASSWORD } from './ftp/clients.ts';
import { API, login, sessionAuth } from './rest/client.ts';
import { sftpBatch } from './sftp/clients.ts';
import { run } from './webdav/fixture.ts';
import { dbOf } from '../helpers/internals.ts';

const SECRET = 'events-hook-secret';
const ROOT = 'partners/alice';
// The file actions a webhook without an `actions` filter receives (core/events/webhooks.ts).
const FILE_ACTIONS = ['create', 'read', 'update', 'destroy', 'move', 'copy'];
// Long enough for three clients started together to commit on a busy 2-core machine: every
// change inside one window joins the message the first change opened.
const MAIL_WINDOW_SECONDS = 5;

/** WebhookBody is the JSON a webhook receives (core/events/webhooks.ts actionBody). */
interface WebhookBody {
  id: number;
  action: string;
  interface: string;
  path: string;
  source: string;
  destination: string;
  ip: string;
  user_id: number | null;
  username: string;
  when: string;
  size?: number;
}

/** until polls `fn` until it gives a truthy value, or fails naming `what`. */
async function until<T>(
  what: string,
  fn: () => Promise<T | null | undefined | false> | T | null | undefined | false,
  ms = 30_000,
): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** ClientRun is what one protocol's client does: upload `local` as `first`, rename it `second`, delete it. */
interface ClientRun {
  local: string;
  first: string;
  second: string;
}

describe(`webhooks and e-mail from every front end (${dbKind})`, function () {
  this.timeout(180_000);
  let gw: TestGateway;
  let receiver: Receiver;
  let smtp: Smtp;
  let tmp: string;
  let aliceId: number;
  let certFile: string;

  before(async function () {
    this.timeout(120_000);
    receiver = await startReceiver();
    smtp = await startSmtp();
    tmp = mkdtempSync(path.join(os.tmpdir(), 'svc-events-'));
    gw = await startTestGateway({
      ports: { ftp: 0, ftps: 0, sftp: 0, webdav: 0 },
      webhooks: [{ url: `${receiver.url}/hooks`, folder: 'partners', secret: SECRET }],
      events: {
        poll_interval_ms: 25,
        webhook_backoff_seconds: 0.05,
        webhook_timeout_seconds: 2,
        notification_batch_seconds: MAIL_WINDOW_SECONDS,
      },
      smtp: { url: smtp.url, from: 'Gateway <gw@example.test>' },
    });
    certFile = path.join(gw.config.data_dir, 'tls', 'cert.pem');
    // createFtpUser makes partners/alice and gives alice `full` on it, through the core.
    await createFtpUser(gw.core, 'alice', { root: ROOT, fields: { email: 'alice@example.test' } });
    const alice = await dbOf(gw.core).read((em) => em.findOneBy(UserEntity, { username: 'alice' }));
    aliceId = alice!.id;
  });
  after(async () => {
    await gw?.stop();
    await receiver?.close();
    await smtp?.close();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  /** localFile writes `size` random bytes to a new file under the temp dir. */
  const localFile = (name: string, size: number): string => {
    const file = path.join(tmp, name);
    writeFileSync(file, randomBytes(size));
    return file;
  };

  /** davUrl is the WebDAV URL of a name in alice's root (her `/`). */
  const davUrl = (name: string) => `https://localhost:${gw.ports.webdav}/${encodeURIComponent(name)}`;

  /** curlDav runs curl against the WebDAV listener as alice and returns the HTTP status. */
  const curlDav = async (args: string[]): Promise<number> => {
    const r = await run(
      'curl',
      [
        '-sS',
        '--max-time',
        '30',
        '--cacert',
        certFile,
        '-u',
        `alice:${PASSWORD}`,
        '-o',
        '/dev/null',
        '-w',
        '%{http_code}',
        ...args,
      ],
      { timeoutMs: 40_000 },
    );
    expect(r.code, `curl ${args.join(' ')}: ${r.stderr}`).to.equal(0);
    return Number(r.stdout);
  };

  /** restUrl is the /files URL of a site path, percent-encoded segment by segment. */
  const restUrl = (sitePath: string) =>
    `${API}/files/${sitePath.split('/').map(encodeURIComponent).join('/')}`;

  /** restUpload runs SPEC's upload as a REST client does: action=put, the part to upload_uri, action=end. */
  const restUpload = async (auth: Record<string, string>, sitePath: string, data: Buffer): Promise<void> => {
    const url = restUrl(sitePath);
    const start = await gw.request('POST', url, { headers: auth, body: { action: 'put' } });
    expect(start.status, start.text).to.equal(200);
    const upload = start.json as {
      ref: string;
      upload_uri: string;
      http_method: string;
      headers: Record<string, string>;
    };
    const uri = new URL(upload.upload_uri);
    // The local blob store's upload_uri is the gateway's own HTTPS listener.
    expect(uri.port).to.equal(String(gw.port));
    const part = await gw.request(upload.http_method, `${uri.pathname}${uri.search}`, {
      headers: { ...upload.headers, 'Content-Type': 'application/octet-stream' },
      body: data,
    });
    expect(part.status, part.text).to.equal(200);
    const end = await gw.request('POST', url, { headers: auth, body: { action: 'end', ref: upload.ref } });
    expect(end.status, end.text).to.equal(200);
    expect(end.json).to.include({ path: sitePath, size: data.length });
  };

  const protocols: {
    name: string;
    iface: string;
    size: number;
    names: [string, string];
    client: (c: ClientRun) => Promise<void>;
  }[] = [
    {
      name: 'FTP (lftp, explicit TLS)',
      iface: 'ftp',
      size: 1_031,
      names: ['ftp-upload.bin', 'ftp-renamed.bin'],
      client: async ({ local, first, second }) => {
        const r = await lftp(
          gw,
          'explicit',
          'alice',
          `put ${local} -o ${first}; mv ${first} ${second}; rm ${second}`,
          { timeoutMs: 60_000 },
        );
        expect(r.code, `lftp: ${r.stdout}\n${r.stderr}`).to.equal(0);
      },
    },
    {
      name: 'SFTP (OpenSSH sftp)',
      iface: 'sftp',
      size: 70_017,
      names: ['sftp-upload.bin', 'sftp-renamed.bin'],
      client: async ({ local, first, second }) => {
        const r = await sftpBatch(
          gw.ports.sftp!,
          'alice',
          { password: PASSWORD },
          [`put ${local} ${first}`, `rename ${first} ${second}`, `rm ${second}`],
          { timeoutMs: 60_000 },
        );
        expect(r.code, `sftp: ${r.stdout}\n${r.stderr}`).to.equal(0);
      },
    },
    {
      name: 'WebDAV (curl)',
      iface: 'dav',
      size: 2_049,
      names: ['dav upload.bin', 'dav renamed.bin'],
      client: async ({ local, first, second }) => {
        expect(await curlDav(['-T', local, davUrl(first)])).to.equal(201);
        expect(await curlDav(['-X', 'MOVE', '-H', `Destination: ${davUrl(second)}`, davUrl(first)])).to.equal(
          201,
        );
        expect(await curlDav(['-X', 'DELETE', davUrl(second)])).to.equal(204);
      },
    },
    {
      name: 'REST (HTTPS, session of alice)',
      iface: 'restapi',
      size: 4_099,
      names: ['rest upload.bin', 'rest renamed.bin'],
      client: async ({ local, first, second }) => {
        const auth = sessionAuth(await login(gw, 'alice', PASSWORD));
        // The REST API uses site paths (DESIGN "Login gate").
        await restUpload(auth, `${ROOT}/${first}`, readFileSync(local));
        const moved = await gw.request('POST', restUrl(`${ROOT}/${first}`), {
          headers: auth,
          body: { 'move-destination': `${ROOT}/${second}` },
        });
        expect(moved.status, moved.text).to.equal(200);
        const removed = await gw.request('DELETE', restUrl(`${ROOT}/${second}`), { headers: auth });
        expect(removed.status, removed.text).to.equal(200);
      },
    },
  ];

  for (const p of protocols) {
    it(`${p.name}: one signed delivery per Action (create, move, destroy) with interface ${p.iface} and site paths, logged as a success`, async () => {
      const [first, second] = p.names;
      const local = localFile(`${p.iface}.bin`, p.size);
      const created = `${ROOT}/${first}`;
      const moved = `${ROOT}/${second}`;
      await p.client({ local, first, second });

      // The Actions this client caused, as the core recorded them.
      const actions = await dbOf(gw.core).read((em) =>
        em.find(ActionEntity, {
          where: { user_id: aliceId, action: In(FILE_ACTIONS) },
          order: { id: 'ASC' },
        }),
      );
      const mine = actions.filter((a: ActionRow) =>
        [a.path, a.source].some((x) => x === created || x === moved),
      );
      expect(
        mine.map((a) => [a.action, a.interface, a.path, a.source]),
        'Action rows',
      ).to.deep.equal([
        ['create', p.iface, created, ''],
        ['move', p.iface, moved, created],
        ['destroy', p.iface, moved, ''],
      ]);
      const ids = mine.map((a) => a.id);

      // Wait for the delivery log to settle: every delivery of these Actions has succeeded, so
      // nothing more can be sent for them.
      const deliveries = await until('the three deliveries to succeed', async () => {
        const rows = await dbOf(gw.core).read((em) =>
          em.find(WebhookDeliveryEntity, { where: { action_id: In(ids) }, order: { action_id: 'ASC' } }),
        );
        return rows.length === 3 && rows.every((d) => d.status === 'succeeded') ? rows : null;
      });
      expect(deliveries.map((d) => [d.action_id, d.attempts, d.url])).to.deep.equal(
        ids.map((id) => [id, 1, `${receiver.url}/hooks`]),
      );

      // The receiver: exactly one request per Action, signed, with the Action's fields.
      const got = receiver.received
        .map((r: Received) => ({ r, body: JSON.parse(r.body) as WebhookBody }))
        .filter(({ body }) => [body.path, body.source].some((x) => x === created || x === moved))
        .sort((a, b) => a.body.id - b.body.id);
      expect(
        got.map(({ body }) => body.id),
        'one delivery per Action',
      ).to.deep.equal(ids);
      for (const { r, body } of got) {
        expect(r.method).to.equal('POST');
        expect(r.url).to.equal('/hooks');
        expect(r.headers['content-type']).to.equal('application/json');
        expect(r.headers['x-svc-action-id']).to.equal(String(body.id));
        const signature = `sha256=${createHmac('sha256', SECRET).update(r.body).digest('hex')}`;
        expect(r.headers['x-svc-signature'], 'X-Svc-Signature').to.equal(signature);
        expect(body).to.include({ interface: p.iface, username: 'alice', user_id: aliceId });
        expect(body.ip).to.equal('127.0.0.1');
        expect(new Date(body.when).toISOString()).to.equal(body.when);
      }
      const [c, m, d] = got.map(({ body }) => body);
      expect(c).to.include({ action: 'create', path: created, source: '', size: p.size });
      expect(m).to.include({ action: 'move', path: moved, source: created, destination: moved });
      expect(d).to.include({ action: 'destroy', path: moved, source: '' });

      // The delivery log: one successful attempt per delivery.
      const attempts = await dbOf(gw.core).read((em) =>
        em.find(WebhookAttemptEntity, {
          where: { delivery_id: In(deliveries.map((x) => x.id)) },
          order: { delivery_id: 'ASC' },
        }),
      );
      expect(
        attempts.map((a) => [
          a.delivery_id,
          a.success,
          a.status,
          a.request_method,
          a.request_url,
          a.path,
          a.folder,
        ]),
      ).to.deep.equal(
        deliveries.map((x, i) => [
          x.id,
          true,
          200,
          'POST',
          `${receiver.url}/hooks`,
          i === 0 ? created : moved,
          ROOT,
        ]),
      );
      for (const a of attempts) {
        const signature = (JSON.parse(a.request_headers) as Record<string, string>)['X-Svc-Signature'];
        expect(signature).to.match(/^sha256=[0-9a-f]{64}$/);
      }
    });
  }

  it('uploads over FTP, SFTP and WebDAV in one window make ONE e-mail listing the three site paths', async () => {
    await gw.core.notifications.create(operatorPrincipal(), { path: ROOT, user_id: aliceId });
    const before = smtp.received.length;
    const ftpFile = localFile('mail-ftp.txt', 11);
    const sftpFile = localFile('mail-sftp.txt', 22);
    const davFile = localFile('mail-dav.txt', 33);
    // Started together, so the three commits fall in the window the first one opens.
    const [ftp, sftp, dav] = await Promise.all([
      lftp(gw, 'explicit', 'alice', `put ${ftpFile} -o mail-ftp.txt`, { timeoutMs: 60_000 }),
      sftpBatch(gw.ports.sftp!, 'alice', { password: PASSWORD }, [`put ${sftpFile} mail-sftp.txt`], {
        timeoutMs: 60_000,
      }),
      curlDav(['-T', davFile, davUrl('mail-dav.txt')]),
    ]);
    expect(ftp.code, `lftp: ${ftp.stderr}`).to.equal(0);
    expect(sftp.code, `sftp: ${sftp.stderr}`).to.equal(0);
    expect(dav).to.equal(201);

    await until('the e-mail', () => smtp.received.length > before, (MAIL_WINDOW_SECONDS + 30) * 1000);
    // Once the batch is sent its changes are deleted: then no second message can follow.
    await until(
      'the mail queue to empty',
      async () => (await dbOf(gw.core).read((em) => em.count(MailChangeEntity))) === 0,
    );
    const sent = smtp.received.slice(before);
    expect(sent, 'messages').to.have.length(1);
    const msg = sent[0]!;
    expect(msg.from).to.equal('gw@example.test');
    expect(msg.to).to.deep.equal(['alice@example.test']);
    const body = msg.raw.replace(/=\r?\n/g, '');
    expect(body).to.match(/Subject: 3 files changed/);
    for (const name of ['mail-ftp.txt', 'mail-sftp.txt', 'mail-dav.txt'])
      expect(body).to.match(new RegExp(`created  /${ROOT}/${name.replace('.', '\\.')}  \\(`));
  });
});
