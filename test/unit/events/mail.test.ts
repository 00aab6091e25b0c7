/**
 * E-mail notifications (issue 7 item 4) against a real SMTP server on loopback (smtp-server):
 * 20 uploads into a watched folder make ONE message listing the 20 paths; a file the user may not
 * list is left out; without SMTP settings the message is an .eml file under <data_dir>/mail and
 * the log says so.
 */
import { readdirSync, readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { Readable } from 'node:stream';
import { expect } from 'chai';
import { SMTPServer } from 'smtp-server';
import { operatorPrincipal, type Core } from '../../../src/core/index.ts';
import { MailChangeEntity } from '../../../src/db/entities.ts';
import { dbKind, openTestCore, type TestCore } from '../../helpers/gateway.ts';

interface Received {
  from: string;
  to: string[];
  raw: string;
}

async function startSmtp(): Promise<{ url: string; received: Received[]; close: () => Promise<void> }> {
  const received: Received[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onData(stream, session, done) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        received.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks).toString('utf8'),
        });
        done();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.server.address() as AddressInfo).port;
  return {
    url: `smtp://127.0.0.1:${port}`,
    received,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

async function until<T>(what: string, fn: () => Promise<T | null | undefined | false> | T, ms = 10_000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function put(core: Core, p: string, text: string): Promise<void> {
  await core.files.session(operatorPrincipal()).write(p, Readable.from([Buffer.from(text)]));
}

/** watcher makes a user with an e-mail address, `readonly` on `watched/`, subscribed to it. */
async function watcher(core: Core, email: string): Promise<number> {
  const op = operatorPrincipal();
  await core.namespace.mkdir(op, 'watched');
  const user = await core.users.create(op, {
    username: `watcher${Date.now()}`,
    email,
    password: 'pw-123456-x',
  });
  await core.permissions.create(op, { path: 'watched', permission: 'readonly', user_id: user.id });
  await core.notifications.create(op, { path: 'watched', user_id: user.id });
  return user.id;
}

describe(`e-mail notifications (${dbKind})`, function () {
  this.timeout(30_000);
  let t: TestCore | null = null;
  afterEach(async () => {
    await t?.close();
    t = null;
  });

  it('batches 20 uploads into one message listing the 20 paths, sent over SMTP', async () => {
    const smtp = await startSmtp();
    try {
      t = await openTestCore({
        // Long enough for 20 uploads on a slow machine: a later change would open a second window.
        events: { poll_interval_ms: 25, notification_batch_seconds: 4 },
        smtp: { url: smtp.url, from: 'Gateway <gw@example.test>' },
      });
      await watcher(t.core, 'watcher@example.test');
      await t.core.namespace.mkdir(operatorPrincipal(), 'watched/sub');
      for (let i = 0; i < 20; i++) await put(t.core, `watched/sub/f${i}.txt`, `v${i}`);
      // Outside the watched folder: not listed.
      await put(t.core, 'elsewhere.txt', 'x');
      await until('the message', () => smtp.received.length > 0);
      // Nothing more comes: the window closed with the one message.
      await new Promise((r) => setTimeout(r, 300));
      expect(smtp.received).to.have.length(1);
      const msg = smtp.received[0]!;
      expect(msg.from).to.equal('gw@example.test');
      expect(msg.to).to.deep.equal(['watcher@example.test']);
      const body = msg.raw.replace(/=\r?\n/g, '');
      for (let i = 0; i < 20; i++) expect(body).to.include(`/watched/sub/f${i}.txt`);
      expect(body).not.to.include('elsewhere.txt');
      expect(body).to.match(/Subject: 20 files changed/);
      const left = await t.core.db.read((em) => em.count(MailChangeEntity));
      expect(left).to.equal(0);
    } finally {
      await smtp.close();
    }
  });

  it('without SMTP writes the message as an .eml file under <data_dir>/mail and logs it', async () => {
    t = await openTestCore({ events: { poll_interval_ms: 25, notification_batch_seconds: 0.2 } });
    const logged: string[] = [];
    const info = t.core.log.info.bind(t.core.log);
    t.core.log.info = ((msg: string, ...rest: unknown[]) => {
      logged.push(String(msg));
      return (info as (m: string, ...r: unknown[]) => unknown)(msg, ...rest);
    }) as typeof t.core.log.info;
    await watcher(t.core, 'eml@example.test');
    await put(t.core, 'watched/a.txt', 'a');
    await put(t.core, 'watched/a.txt', 'a2');
    const dir = path.join(t.config.data_dir, 'mail');
    const files = await until('an .eml file', () => {
      try {
        const f = readdirSync(dir).filter((n) => n.endsWith('.eml'));
        return f.length ? f : null;
      } catch {
        return null;
      }
    });
    expect(files).to.have.length(1);
    const eml = readFileSync(path.join(dir, files[0]!), 'utf8');
    expect(eml).to.match(/^To: eml@example\.test/m);
    expect(eml).to.include('created  /watched/a.txt').and.include('updated  /watched/a.txt');
    // The log line follows the file's write.
    await until('the log line', () => logged.some((l) => /SMTP is not configured/.test(l)));
  });
});
