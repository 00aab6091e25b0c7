/**
 * E-mail notifications (issue 7 item 4) against real SMTP peers on loopback (./smtp.ts): batching
 * (20 uploads, then 1,000, make ONE message each), the .eml fallback without SMTP settings, the
 * rule that a user hears only of files they may list, and faults: a closed port, a server that
 * never greets, one that never finishes answering, a rejected recipient. A failed send keeps every
 * change, with its attempts and last error, and tries again after a doubling backoff.
 *
 * Time is advanced by moving the rows' due_at into the past, as the backoff or the window running
 * out would: that keeps the tests quick and independent of how fast the machine writes files.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { expect } from 'chai';
import { operatorPrincipal, type Core } from '../../../src/core/index.ts';
import { MailChangeEntity, PermissionEntity, type MailChangeRow } from '../../../src/db/entities.ts';
import { dbKind, openTestCore, type TestCore } from '../../helpers/gateway.ts';
import { collectGarbage } from '../../helpers/gc.ts';
import { closedPort, startBrokenServer, startSmtp, type Received } from './smtp.ts';
import { dbOf } from '../../helpers/internals.ts';
import { queriesDuring, wholeReads } from '../../helpers/plans.ts';

const MINUTE = 60_000;

/** openMailCore opens a core that mails through `smtpUrl`, with a batch window of `windowS`. */
const openMailCore = (smtpUrl: string, windowS = 0.2) =>
  openTestCore({
    events: { poll_interval_ms: 25, notification_batch_seconds: windowS },
    smtp: { url: smtpUrl, from: 'gw@example.test' },
  });

async function until<T>(what: string, fn: () => Promise<T | null | undefined | false> | T, ms = 20_000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function put(core: Core, p: string, text: string): Promise<void> {
  await core.files.session(operatorPrincipal()).write(p, Readable.from([Buffer.from(text)]));
}

let serial = 0;

/** makeUser creates a user with an e-mail address, subscribed to `watch`, holding `grants`. */
async function makeUser(
  core: Core,
  email: string,
  watch: string,
  grants: Record<string, string> = {},
  siteAdmin = false,
): Promise<{ id: number; username: string }> {
  const op = operatorPrincipal();
  const user = await core.users.create(op, {
    username: `watcher${++serial}x${Date.now() % 100_000}`,
    email,
    password: 'pw-123456-x',
    ...(siteAdmin ? { site_admin: true } : {}),
  });
  for (const [p, permission] of Object.entries(grants)) {
    await core.permissions.create(op, { path: p, permission, user_id: user.id });
  }
  await core.notifications.create(op, { path: watch, user_id: user.id });
  return { id: user.id, username: user.username };
}

/** watcher makes a user with an e-mail address, `readonly` on `watched/`, subscribed to it. */
async function watcher(core: Core, email: string): Promise<{ id: number; username: string }> {
  await core.namespace.mkdir(operatorPrincipal(), 'watched');
  return makeUser(core, email, 'watched', { watched: 'readonly' });
}

const rowsOf = (core: Core): Promise<MailChangeRow[]> =>
  dbOf(core).read((em) => em.find(MailChangeEntity, { order: { id: 'ASC' } }));

/** makeDue moves every queued change's due_at into the past: the window or the backoff ran out. */
async function makeDue(core: Core): Promise<void> {
  await dbOf(core).work((em) =>
    em
      .createQueryBuilder()
      .update(MailChangeEntity)
      .set({ due_at: new Date(Date.now() - 1000) })
      .where('id > 0')
      .execute(),
  );
}

/** failedTimes waits until every queued change has `attempts` failed sends and no lease. */
function failedTimes(core: Core, attempts: number): Promise<MailChangeRow[]> {
  return until(`attempts = ${attempts}`, async () => {
    const rows = await rowsOf(core);
    return rows.length > 0 && rows.every((r) => r.attempts === attempts && r.lease === null) ? rows : null;
  });
}

interface Logged {
  message: string;
  meta: Record<string, unknown>;
}

/** captureWarnings records the core's warn lines (and still logs them). */
function captureWarnings(core: Core): Logged[] {
  const logged: Logged[] = [];
  const warn = core.log.warn.bind(core.log);
  core.log.warn = ((message: string, meta?: Record<string, unknown>) => {
    logged.push({ message: String(message), meta: meta ?? {} });
    return (warn as (m: string, ...r: unknown[]) => unknown)(message, meta);
  }) as typeof core.log.warn;
  return logged;
}

/** bodyOf is a message's text with quoted-printable soft line breaks undone. */
const bodyOf = (m: Received) => m.raw.replace(/=\r?\n/g, '');

describe(`e-mail notifications (${dbKind})`, function () {
  this.timeout(60_000);
  let t: TestCore | null = null;
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    await t?.close();
    t = null;
    for (const c of cleanups.splice(0)) await c();
  });

  it('batches 20 uploads into one message listing the 20 paths, sent over SMTP', async () => {
    const smtp = await startSmtp();
    cleanups.push(smtp.close);
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
    await sleep(300);
    expect(smtp.received).to.have.length(1);
    const msg = smtp.received[0]!;
    expect(msg.from).to.equal('gw@example.test');
    expect(msg.to).to.deep.equal(['watcher@example.test']);
    const body = bodyOf(msg);
    for (let i = 0; i < 20; i++) expect(body).to.include(`/watched/sub/f${i}.txt`);
    expect(body).not.to.include('elsewhere.txt');
    expect(body).to.match(/Subject: 20 files changed/);
    expect(await rowsOf(t.core)).to.have.length(0);
  });

  it("an upload looks its folders' watchers up by path, not by reading every subscription", async () => {
    const opened = await openTestCore({ events: { poll_interval_ms: 25, notification_batch_seconds: 0.2 } });
    t = opened;
    await watcher(opened.core, 'watcher@example.test');
    await opened.core.namespace.mkdir(operatorPrincipal(), 'watched/sub');
    const statements = await queriesDuring(opened.core, () => put(opened.core, 'watched/sub/one.txt', 'v1'));
    expect(statements.some((s) => /FROM notifications/.test(s.query))).to.equal(true);
    const whole = await wholeReads(opened.core, statements, ['notifications']);
    expect(whole, whole.join('\n')).to.deep.equal([]);
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

  it('an unreachable SMTP server: changes are kept with attempts and ECONNREFUSED, then sent once it is up', async () => {
    const port = await closedPort();
    t = await openMailCore(`smtp://127.0.0.1:${port}`);
    const warnings = captureWarnings(t.core);
    const user = await watcher(t.core, 'down@example.test');
    for (let i = 0; i < 3; i++) await put(t.core, `watched/d${i}.txt`, `d${i}`);
    const sentAt = Date.now();
    const failed = await failedTimes(t.core, 1);
    const seen = Date.now();
    expect(failed).to.have.length(3);
    for (const r of failed) {
      expect(r.last_error).to.match(/ECONNREFUSED/);
      expect(r.locked_until).to.equal(null);
      // Due again a minute after the failure (which happened between sentAt and seen).
      expect(r.due_at.getTime()).to.be.within(sentAt + MINUTE - 1000, seen + MINUTE);
    }
    // The log line follows the failure's commit, which the rows above may be read just before.
    await until('a warn line', () => warnings.some((w) => /notification e-mail not sent/.test(w.message)));
    const warning = warnings.find((w) => /notification e-mail not sent/.test(w.message));
    expect(warning!.meta).to.include({ user_id: user.id, username: user.username, changes: 3, attempt: 1 });
    expect(String(warning!.meta.error)).to.match(/ECONNREFUSED/);
    // The backoff holds: the loop (every 25 ms) does not try again before due_at.
    await sleep(500);
    expect((await rowsOf(t.core)).map((r) => r.attempts)).to.deep.equal([1, 1, 1]);

    // The server comes up on that port; the backoff runs out.
    const smtp = await startSmtp({ port });
    cleanups.push(smtp.close);
    await makeDue(t.core);
    await until('the message and the rows gone', async () => {
      return smtp.received.length > 0 && (await rowsOf(t!.core)).length === 0;
    });
    await sleep(300);
    expect(smtp.received).to.have.length(1);
    const body = bodyOf(smtp.received[0]!);
    for (let i = 0; i < 3; i++) expect(body).to.include(`/watched/d${i}.txt`);
    expect(body).to.match(/Subject: 3 files changed/);
  });

  it('a failed batch waits 1, 2, 4 … minutes before its next attempt, never more than an hour', async () => {
    const port = await closedPort();
    t = await openMailCore(`smtp://127.0.0.1:${port}`);
    const warnings = captureWarnings(t.core);
    await watcher(t.core, 'backoff@example.test');
    await put(t.core, 'watched/b.txt', 'b');
    const waits = [1, 2, 4, 8, 16, 32, 60, 60].map((m) => m * MINUTE);
    for (let attempt = 1; attempt <= waits.length; attempt++) {
      const before = Date.now();
      if (attempt > 1) await makeDue(t.core);
      const [row] = await failedTimes(t.core, attempt);
      const after = Date.now();
      expect(row!.due_at.getTime(), `wait after attempt ${attempt}`).to.be.within(
        before + waits[attempt - 1]! - 1000,
        after + waits[attempt - 1]!,
      );
    }
    // The warning follows the row's commit (and, at durability fsync, its sync): the last one may
    // come a moment after the row shows the attempt.
    const attempts = () =>
      warnings.filter((w) => /notification e-mail not sent/.test(w.message)).map((w) => w.meta.attempt);
    await until('the eighth warning', () => attempts().length >= 8, 5_000).catch(() => undefined);
    expect(attempts()).to.deep.equal([1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it('a server that accepts and never greets: the send gives up at the greeting timeout and says so', async () => {
    const silent = await startBrokenServer('silent');
    cleanups.push(silent.close);
    t = await openMailCore(silent.url);
    // connectionMs also bounds the wait for the greeting: it is long here, so greetingMs is what ends it.
    t.core.events.mail.timeouts = { connectionMs: 15_000, greetingMs: 300, socketMs: 15_000, sendMs: 30_000 };
    await watcher(t.core, 'silent@example.test');
    const start = Date.now();
    await put(t.core, 'watched/s.txt', 's');
    const [row] = await failedTimes(t.core, 1);
    // 300 ms plus the window (200 ms) and a slow machine's slack, far below any other bound.
    expect(Date.now() - start).to.be.below(7500);
    expect(row!.last_error).to.match(/Greeting never received/);
    expect(row!.last_error).to.match(/ETIMEDOUT/);
    expect(silent.accepted).to.equal(1);
    // The gateway hung up; it does not leave the connection open.
    await until('the connection closed', () => silent.closed === 1);
  });

  it('a server that never finishes answering is cut off at sendMs, before the lease runs out', async () => {
    const trickle = await startBrokenServer('trickle');
    cleanups.push(trickle.close);
    t = await openMailCore(trickle.url);
    // socketMs is never reached: a line comes every 100 ms.
    t.core.events.mail.timeouts = { connectionMs: 5000, greetingMs: 5000, socketMs: 1000, sendMs: 1500 };
    await watcher(t.core, 'trickle@example.test');
    await put(t.core, 'watched/t.txt', 't');
    const leased = await until('the batch leased', async () => {
      const [r] = await rowsOf(t!.core);
      return r && r.lease !== null ? r : null;
    });
    const leaseEnds = leased.locked_until!.getTime();
    // Garbage collections during the send must not lose its time limit (Node 20 loses an
    // AbortSignal.timeout held only through AbortSignal.any).
    const gc = collectGarbage();
    for (let i = 0; i < 5; i++) {
      await sleep(50);
      gc();
    }
    const [row] = await failedTimes(t.core, 1);
    const failedBy = Date.now();
    expect(row!.last_error).to.match(/took longer than 1500 ms/);
    expect(failedBy).to.be.below(leaseEnds);
    expect(trickle.accepted).to.equal(1);
    await until('the connection closed', () => trickle.closed === 1);
  });

  it('closing the core ends a send to a hanging server at once and hands the batch back uncounted', async () => {
    const trickle = await startBrokenServer('trickle');
    cleanups.push(trickle.close);
    const opened = await openMailCore(trickle.url);
    opened.core.events.mail.timeouts = {
      connectionMs: 60_000,
      greetingMs: 60_000,
      socketMs: 60_000,
      sendMs: 60_000,
    };
    await watcher(opened.core, 'stop@example.test');
    await put(opened.core, 'watched/stop.txt', 's');
    await until('the batch leased', async () => {
      const [r] = await rowsOf(opened.core);
      return r && r.lease !== null ? r : null;
    });
    await until('the SMTP connection', () => trickle.accepted === 1);
    const start = Date.now();
    // Read the rows after the core's loops stop, but before its database closes.
    const db = dbOf(opened.core);
    const rows = new Promise<MailChangeRow[]>((resolve) => {
      const close = db.close.bind(db);
      db.close = async () => {
        resolve(await db.read((em) => em.find(MailChangeEntity)));
        await close();
      };
    });
    await opened.close();
    expect(Date.now() - start, 'ms to close').to.be.below(5000);
    const [row] = await rows;
    expect(row).to.include({ attempts: 0, last_error: '', lease: null, locked_until: null });
    await until('the connection closed', () => trickle.closed === 1);
  });

  it('a recipient rejected with 550 is kept and retried later, and last_error carries the reply', async () => {
    const smtp = await startSmtp({ reject: (a) => a === 'gone@example.test' });
    cleanups.push(smtp.close);
    t = await openMailCore(smtp.url);
    await watcher(t.core, 'gone@example.test');
    await put(t.core, 'watched/r.txt', 'r');
    const sentAt = Date.now();
    const [row] = await failedTimes(t.core, 1);
    expect(row!.last_error)
      .to.match(/550/)
      .and.match(/gone@example\.test/);
    expect(row!.due_at.getTime()).to.be.within(sentAt + MINUTE - 1000, Date.now() + MINUTE);
    expect(smtp.received).to.have.length(0);
  });

  it('tells a user only of files they may list: none on a subfolder hides it; previewonly and site admin see all', async () => {
    const smtp = await startSmtp();
    cleanups.push(smtp.close);
    t = await openMailCore(smtp.url, 600);
    const op = operatorPrincipal();
    for (const dir of ['watched', 'watched/open', 'watched/secret']) await t.core.namespace.mkdir(op, dir);
    // Subscribed to watched/ but with rights on watched/open only: nothing on watched/ itself or secret/.
    await makeUser(t.core, 'limited@example.test', 'watched', { 'watched/open': 'readonly' });
    await makeUser(t.core, 'preview@example.test', 'watched', { watched: 'previewonly' });
    await makeUser(t.core, 'admin@example.test', 'watched', {}, true);
    // writeonly cannot list: no message at all.
    await makeUser(t.core, 'writer@example.test', 'watched', { watched: 'writeonly' });
    const files = ['watched/top.txt', 'watched/open/a.txt', 'watched/secret/s.txt'];
    for (const f of files) await put(t.core, f, f);
    expect(smtp.received, 'nothing before the window ends').to.have.length(0);
    await makeDue(t.core);
    await until('three messages and the rows gone', async () => {
      return smtp.received.length >= 3 && (await rowsOf(t!.core)).length === 0;
    });
    await sleep(300);
    expect(smtp.received.map((m) => m.to[0]).sort()).to.deep.equal([
      'admin@example.test',
      'limited@example.test',
      'preview@example.test',
    ]);
    const to = (addr: string) => bodyOf(smtp.received.find((m) => m.to[0] === addr)!);
    const limited = to('limited@example.test');
    expect(limited).to.include('/watched/open/a.txt');
    expect(limited).not.to.include('/watched/secret/s.txt');
    expect(limited).not.to.include('/watched/top.txt');
    expect(limited).to.match(/Subject: 1 file changed/);
    for (const addr of ['preview@example.test', 'admin@example.test']) {
      for (const f of files) expect(to(addr)).to.include(`/${f}`);
      expect(to(addr)).to.match(/Subject: 3 files changed/);
    }
  });

  it('a right revoked during the window hides those files from the message; all revoked, no message', async () => {
    const smtp = await startSmtp();
    cleanups.push(smtp.close);
    t = await openMailCore(smtp.url, 600);
    const op = operatorPrincipal();
    for (const dir of ['watched/keep', 'watched/lost']) await t.core.namespace.mkdir(op, dir);
    const both = await makeUser(t.core, 'both@example.test', 'watched', {
      'watched/keep': 'readonly',
      'watched/lost': 'readonly',
    });
    const gone = await makeUser(t.core, 'gone@example.test', 'watched', { 'watched/lost': 'readonly' });
    for (const f of ['watched/keep/k.txt', 'watched/lost/l.txt']) await put(t.core, f, f);
    expect(await rowsOf(t.core)).to.have.length(3);
    // Taken away after the changes were queued, before the message goes.
    const lost = await dbOf(t.core).read((em) => em.findBy(PermissionEntity, { path: 'watched/lost' }));
    expect(lost.map((r) => r.user_id).sort()).to.deep.equal([both.id, gone.id].sort());
    for (const r of lost) await t.core.permissions.remove(op, r.id);
    await makeDue(t.core);
    await until('the rows gone', async () => (await rowsOf(t!.core)).length === 0);
    await sleep(300);
    expect(smtp.received.map((m) => m.to[0])).to.deep.equal(['both@example.test']);
    const body = bodyOf(smtp.received[0]!);
    expect(body).to.include('/watched/keep/k.txt');
    expect(body).not.to.include('/watched/lost/l.txt');
    expect(body).to.match(/Subject: 1 file changed/);
  });

  it('1,000 file writes in one window make one message listing the 1,000 paths', async function () {
    this.timeout(300_000);
    const smtp = await startSmtp();
    cleanups.push(smtp.close);
    // The window outlasts the writes however slow the machine; the test then ends it.
    t = await openMailCore(smtp.url, 600);
    await watcher(t.core, 'bulk@example.test');
    await t.core.namespace.mkdir(operatorPrincipal(), 'watched/bulk');
    const n = 1000;
    for (let i = 0; i < n; i++)
      await put(t.core, `watched/bulk/file-${String(i).padStart(4, '0')}.dat`, `${i}`);
    const rows = await rowsOf(t.core);
    expect(rows).to.have.length(n);
    expect(new Set(rows.map((r) => r.due_at.getTime())).size, 'one window').to.equal(1);
    expect(smtp.received).to.have.length(0);
    await makeDue(t.core);
    await until('the message and the rows gone', async () => {
      return smtp.received.length > 0 && (await rowsOf(t!.core)).length === 0;
    });
    await sleep(300);
    expect(smtp.received).to.have.length(1);
    const body = bodyOf(smtp.received[0]!);
    expect(body).to.match(/Subject: 1000 files changed/);
    for (let i = 0; i < n; i++)
      expect(body).to.include(`/watched/bulk/file-${String(i).padStart(4, '0')}.dat`);
    expect(body.match(/^created {2}\/watched\/bulk\//gm)).to.have.length(n);
  });
});
