/**
 * Webhooks (issue 7) against a real HTTP receiver on loopback: the Action body and its signature,
 * filters, success, failure then backoff and retry, timeouts, the delivery log, and a restart that
 * loses nothing. Faults: a target that resets, redirects in a loop, answers 500 or a huge body, and
 * an instance killed with SIGKILL in the middle of deliveries (a core in a child process).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { createCore, operatorPrincipal, type Core } from '../../../src/core/index.ts';
import { WebhookAttemptEntity, WebhookDeliveryEntity } from '../../../src/db/entities.ts';
import { createLogger } from '../../../src/log.ts';
import { dbKind, openTestCore, testConfig, type TestCore } from '../../helpers/gateway.ts';
import { HUGE_BYTES, startReceiver, type Answer, type Receiver, type Received } from './receiver.ts';
import { dbOf } from '../../helpers/internals.ts';

const SECRET = 'hook-secret';
const fast = { poll_interval_ms: 25, webhook_backoff_seconds: 0.05, webhook_timeout_seconds: 1 };
const INSTANCE = fileURLToPath(new URL('./instance.ts', import.meta.url));
const LOST = /^no result recorded: the instance sending this delivery stopped/;
const actionId = (r: Received) => Number(r.headers['x-svc-action-id']);

async function put(core: Core, path: string, text: string): Promise<void> {
  await core.files.session(operatorPrincipal()).write(path, Readable.from([Buffer.from(text)]));
}

async function until<T>(
  what: string,
  fn: () => Promise<T | null | undefined | false>,
  ms = 8000,
): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe(`webhooks (${dbKind})`, function () {
  this.timeout(30_000);
  let receiver: Receiver;
  let t: TestCore | null = null;

  beforeEach(async () => {
    receiver = await startReceiver();
  });
  afterEach(async () => {
    await t?.close();
    t = null;
    await receiver.close();
  });

  const open = (hooks: unknown[], events: Record<string, unknown> = {}) =>
    openTestCore({ webhooks: hooks, events: { ...fast, ...events } });

  it('delivers the Action as signed JSON, and logs the attempt as a success', async () => {
    t = await open([{ url: `${receiver.url}/hook`, secret: SECRET, headers: { 'X-Extra': 'yes' } }]);
    await t.core.namespace.mkdir(operatorPrincipal(), 'docs');
    await put(t.core, 'docs/a.txt', 'hello');
    await receiver.waitFor(2);
    // The first is the folder's create action.
    const got = receiver.received.find((r) => r.body.includes('"docs/a.txt"'));
    expect(got!.method).to.equal('POST');
    expect(got!.url).to.equal('/hook');
    expect(got!.headers['content-type']).to.equal('application/json');
    expect(got!.headers['x-extra']).to.equal('yes');
    const expected = `sha256=${createHmac('sha256', SECRET).update(got!.body).digest('hex')}`;
    expect(got!.headers['x-svc-signature']).to.equal(expected);
    const body = JSON.parse(got!.body) as Record<string, unknown>;
    expect(body).to.include({ action: 'create', path: 'docs/a.txt', interface: 'restapi', size: 5 });
    expect(body).to.have.property('when').that.is.a('string');
    expect(body).to.have.property('id').that.is.a('number');
    const attempt = await until('the attempt row', () =>
      dbOf(t!.core).read((em) => em.findOneBy(WebhookAttemptEntity, { path: 'docs/a.txt' })),
    );
    expect(attempt).to.include({
      status: 200,
      success: true,
      request_method: 'POST',
      request_url: `${receiver.url}/hook`,
      path: 'docs/a.txt',
      folder: 'docs',
    });
    expect(JSON.parse(attempt.request_headers)).to.include({ 'X-Svc-Signature': expected });
    expect(receiver.received).to.have.length(2);
  });

  it('applies folder, path and action filters', async () => {
    t = await open([
      { url: `${receiver.url}/folder`, folder: 'in' },
      { url: `${receiver.url}/path`, path: 'out/x.txt' },
      { url: `${receiver.url}/mkdir`, actions: ['destroy'] },
    ]);
    await t.core.namespace.mkdir(operatorPrincipal(), 'in/deep');
    await t.core.namespace.mkdir(operatorPrincipal(), 'out');
    await put(t.core, 'in/deep/a.txt', 'a');
    await put(t.core, 'out/x.txt', 'x');
    await put(t.core, 'out/y.txt', 'y');
    await put(t.core, 'inside.txt', 'no');
    await receiver.waitFor(2);
    await new Promise((r) => setTimeout(r, 300));
    const seen = receiver.received.map((r) => `${r.url} ${(JSON.parse(r.body) as { path: string }).path}`);
    expect(seen).to.include('/folder in/deep/a.txt');
    expect(seen).to.include('/path out/x.txt');
    expect(seen.filter((s) => s.startsWith('/path'))).to.have.length(1);
    expect(seen.filter((s) => s.startsWith('/mkdir'))).to.have.length(0);
    expect(seen.filter((s) => s.startsWith('/folder')).every((s) => / in(\/|$)/.test(s))).to.equal(true);
  });

  it('retries a failing target with backoff, then gives up; a retry sends it again', async () => {
    t = await open([{ url: `${receiver.url}/h` }], { webhook_max_attempts: 3 });
    receiver.answer = () => 500;
    await put(t.core, 'f.txt', 'x');
    await receiver.waitFor(3);
    const delivery = await until('the delivery to fail', () =>
      dbOf(t!.core).read((em) => em.findOneBy(WebhookDeliveryEntity, { status: 'failed' })),
    );
    expect(delivery.attempts).to.equal(3);
    const attempts = await dbOf(t.core).read((em) => em.find(WebhookAttemptEntity, { order: { id: 'ASC' } }));
    expect(attempts.map((a) => [a.status, a.success])).to.deep.equal([
      [500, false],
      [500, false],
      [500, false],
    ]);
    expect(attempts[0]!.message).to.match(/HTTP 500/);
    await new Promise((r) => setTimeout(r, 200));
    expect(receiver.received).to.have.length(3);

    receiver.answer = () => 204;
    await t.core.events.webhooks.retry(operatorPrincipal(), attempts[2]!.id);
    await receiver.waitFor(4);
    await until('the retried delivery to succeed', () =>
      dbOf(t!.core).read((em) => em.findOneBy(WebhookDeliveryEntity, { status: 'succeeded' })),
    );
    const err = await t.core.events.webhooks
      .retry(operatorPrincipal(), attempts[2]!.id)
      .catch((e: unknown) => e);
    expect(err).to.have.property('type', 'processing-failure/already-completed');
    const missing = await t.core.events.webhooks.retry(operatorPrincipal(), 999999).catch((e: unknown) => e);
    expect(missing).to.have.property('type', 'not-found/action-webhook-failure-not-found');
  });

  it('records a hanging target as a timeout and an unreachable one with status 0', async () => {
    const dead = await startReceiver();
    const deadUrl = dead.url;
    await dead.close();
    t = await open([{ url: `${receiver.url}/hang` }, { url: `${deadUrl}/gone` }], {
      webhook_max_attempts: 1,
      webhook_timeout_seconds: 0.3,
    });
    receiver.answer = () => 'hang';
    await put(t.core, 'f.txt', 'x');
    const attempts = await until('two attempts', async () => {
      const rows = await dbOf(t!.core).read((em) =>
        em.find(WebhookAttemptEntity, { order: { request_url: 'ASC' } }),
      );
      return rows.length === 2 ? rows : null;
    });
    const byUrl = Object.fromEntries(attempts.map((a) => [new URL(a.request_url).pathname, a]));
    expect(byUrl['/hang']).to.include({ status: 0, success: false });
    expect(byUrl['/hang']!.message).to.match(/timed out/);
    expect(byUrl['/gone']).to.include({ status: 0, success: false });
    expect(byUrl['/gone']!.message).to.match(/ECONNREFUSED/);
  });

  it('treats a redirect as a failure and does not follow it', async () => {
    t = await open([{ url: `${receiver.url}/r` }], { webhook_max_attempts: 1 });
    receiver.answer = () => 302;
    await put(t.core, 'f.txt', 'x');
    const a = await until('the attempt', () =>
      dbOf(t!.core).read((em) => em.findOneBy(WebhookAttemptEntity, {})),
    );
    expect(a).to.include({ status: 302, success: false });
    expect(receiver.received).to.have.length(1);
  });

  it('a rolled-back Action queues nothing', async () => {
    t = await open([{ url: `${receiver.url}/h` }]);
    // Writing into a missing folder fails inside the unit of work.
    await put(t.core, 'missing/f.txt', 'x').catch(() => undefined);
    await new Promise((r) => setTimeout(r, 200));
    expect(await dbOf(t.core).read((em) => em.count(WebhookDeliveryEntity))).to.equal(0);
  });

  it('a restart loses nothing: a pending delivery is sent by the next core on the same database', async () => {
    const { config, cleanup } = await testConfig({
      webhooks: [{ url: `${receiver.url}/h`, secret: SECRET }],
      events: fast,
    });
    const log = createLogger('error', { silent: true });
    try {
      const first = await createCore(config, log, { background: false });
      await put(first, 'f.txt', 'x');
      expect(
        await dbOf(first).read((em) => em.countBy(WebhookDeliveryEntity, { status: 'pending' })),
      ).to.equal(1);
      await first.close();
      expect(receiver.received).to.have.length(0);
      const second = await createCore(config, log);
      try {
        const [got] = await receiver.waitFor(1);
        expect(JSON.parse(got!.body)).to.include({ action: 'create', path: 'f.txt' });
        await until('success', () =>
          dbOf(second).read((em) => em.findOneBy(WebhookDeliveryEntity, { status: 'succeeded' })),
        );
      } finally {
        await second.close();
      }
    } finally {
      await cleanup();
    }
  });

  it('two cores on one database never send the same attempt twice', async () => {
    const { config, cleanup } = await testConfig({ webhooks: [{ url: `${receiver.url}/h` }], events: fast });
    const log = createLogger('error', { silent: true });
    try {
      const a = await createCore(config, log, { background: false });
      for (let i = 0; i < 40; i++) await put(a, `f${i}.txt`, 'x');
      await a.close();
      const [c1, c2] = [await createCore(config, log), await createCore(config, log, { migrate: false })];
      try {
        await receiver.waitFor(40);
        await new Promise((r) => setTimeout(r, 300));
        const ids = receiver.received.map((r) => (JSON.parse(r.body) as { id: number }).id);
        expect(new Set(ids).size).to.equal(40);
        expect(ids).to.have.length(40);
      } finally {
        await c1.close();
        await c2.close();
      }
    } finally {
      await cleanup();
    }
  });

  for (const [first, status, says] of [
    ['reset', 0, /no answer: .*(UND_ERR_SOCKET|ECONNRESET|other side closed)/],
    [500, 500, /HTTP 500/],
  ] as const) {
    it(`answered ${first}, then 200: one failed attempt, one success, sent once more only`, async () => {
      t = await open([{ url: `${receiver.url}/h` }]);
      receiver.answer = (): Answer => (receiver.received.length === 1 ? first : 200);
      await put(t.core, 'f.txt', 'x');
      const d = await until('the delivery to succeed', () =>
        dbOf(t!.core).read((em) => em.findOneBy(WebhookDeliveryEntity, { status: 'succeeded' })),
      );
      expect(d).to.include({ attempts: 2, lease: null });
      const attempts = await dbOf(t.core).read((em) =>
        em.find(WebhookAttemptEntity, { order: { id: 'ASC' } }),
      );
      expect(attempts.map((a) => [a.status, a.success])).to.deep.equal([
        [status, false],
        [200, true],
      ]);
      expect(attempts[0]!.message).to.match(says);
      // Succeeded is final, so these two are all the receiver will get.
      expect(receiver.received.map((r) => r.body)).to.deep.equal([d.body, d.body]);
    });
  }

  it('does not follow a redirect loop: each attempt is one request, logged as the redirect', async () => {
    t = await open([{ url: `${receiver.url}/loop` }], { webhook_max_attempts: 3 });
    receiver.answer = () => 'redirect-loop';
    await put(t.core, 'f.txt', 'x');
    const d = await until('the delivery to fail', () =>
      dbOf(t!.core).read((em) => em.findOneBy(WebhookDeliveryEntity, { status: 'failed' })),
    );
    expect(d.attempts).to.equal(3);
    const attempts = await dbOf(t.core).read((em) => em.find(WebhookAttemptEntity, { order: { id: 'ASC' } }));
    expect(attempts.map((a) => [a.status, a.success])).to.deep.equal([
      [302, false],
      [302, false],
      [302, false],
    ]);
    for (const a of attempts) expect(a.message).to.include(`not followed (to ${receiver.url}/loop)`);
    expect(receiver.received).to.have.length(3);
  });

  it('reads only the start of a huge answer and drops the connection: a quick success', async () => {
    t = await open([{ url: `${receiver.url}/big` }], { webhook_timeout_seconds: 10 });
    receiver.answer = () => 'huge';
    await put(t.core, 'f.txt', 'x');
    const [got] = await receiver.waitFor(1);
    const a = await until(
      'the attempt',
      () => dbOf(t!.core).read((em) => em.findOneBy(WebhookAttemptEntity, {})),
      15_000,
    );
    expect(a).to.include({ status: 200, success: true, message: 'delivered (HTTP 200)' });
    expect(a.created_at.getTime() - got!.at, 'ms from request to recorded success').to.be.below(3000);
    // The gateway closed the connection while the receiver still had most of the body to write.
    const end = await until('the answer to end', async () => got!.streamed?.end);
    expect(end).to.equal('closed early');
    expect(got!.streamed!.bytes).to.be.below(HUGE_BYTES / 2);
    expect(receiver.received).to.have.length(1);
  });

  it('records and counts a claim left by a stopped instance, then sends it again or gives up', async () => {
    const { config, cleanup } = await testConfig({
      webhooks: [{ url: `${receiver.url}/h` }],
      events: { ...fast, webhook_max_attempts: 3 },
    });
    const core = await createCore(config, createLogger('error', { silent: true }), { background: false });
    try {
      for (const name of ['again.txt', 'last.txt', 'live.txt']) await put(core, name, 'x');
      // What instances leave in the table: two claims expired (their instance is gone), one live.
      const expired = { lease: 'stopped-instance', locked_until: new Date(Date.now() - 1000) };
      const live = { lease: 'live-instance', locked_until: new Date(Date.now() + 60_000) };
      await dbOf(core).work(async (em) => {
        await em.update(WebhookDeliveryEntity, { path: 'again.txt' }, { ...expired, attempts: 0 });
        await em.update(WebhookDeliveryEntity, { path: 'last.txt' }, { ...expired, attempts: 2 });
        await em.update(WebhookDeliveryEntity, { path: 'live.txt' }, live);
      });
      await core.events.webhooks.tick();
      await core.events.webhooks.settle();

      const rows = await dbOf(core).read((em) => em.find(WebhookDeliveryEntity));
      const attempts = await dbOf(core).read((em) => em.find(WebhookAttemptEntity, { order: { id: 'ASC' } }));
      const byPath = (p: string) => {
        const d = rows.find((r) => r.path === p)!;
        return { d, log: attempts.filter((a) => a.delivery_id === d.id) };
      };
      const again = byPath('again.txt');
      expect(again.d).to.include({ status: 'succeeded', attempts: 2, lease: null });
      expect(again.log.map((a) => [a.status, a.success])).to.deep.equal([
        [0, false],
        [200, true],
      ]);
      expect(again.log[0]!.message)
        .to.match(LOST)
        .and.match(/sending again$/);
      const last = byPath('last.txt');
      expect(last.d).to.include({ status: 'failed', attempts: 3, lease: null });
      expect(last.log.map((a) => [a.status, a.success])).to.deep.equal([[0, false]]);
      expect(last.log[0]!.message)
        .to.match(LOST)
        .and.match(/no attempts left$/);
      const alive = byPath('live.txt');
      expect(alive.d).to.include({ status: 'pending', attempts: 0, lease: 'live-instance' });
      expect(alive.log).to.have.length(0);
      expect(receiver.received.map((r) => (JSON.parse(r.body) as { path: string }).path)).to.deep.equal([
        'again.txt',
      ]);
    } finally {
      await core.close();
      await cleanup();
    }
  });

  it('retry of a delivery whose sender died logs the lost attempt first; one being sent is refused', async () => {
    t = await open([{ url: `${receiver.url}/h` }], { webhook_max_attempts: 2 });
    receiver.answer = () => 500;
    await put(t.core, 'f.txt', 'x');
    const failed = await until('the delivery to fail', () =>
      dbOf(t!.core).read((em) => em.findOneBy(WebhookDeliveryEntity, { status: 'failed' })),
    );
    const [last] = await dbOf(t.core).read((em) =>
      em.find(WebhookAttemptEntity, { where: { delivery_id: failed.id }, order: { id: 'DESC' }, take: 1 }),
    );
    // As an instance sending it would leave it: pending, leased, still live.
    const lease = (until: number) =>
      dbOf(t!.core).work((em) =>
        em.update(
          WebhookDeliveryEntity,
          { id: failed.id },
          // Not due before the retry, so this core's own loop leaves it alone meanwhile.
          {
            status: 'pending',
            lease: 'other-instance',
            locked_until: new Date(until),
            next_attempt_at: new Date(Date.now() + 3_600_000),
          },
        ),
      );
    await lease(Date.now() + 60_000);
    const busy = await t.core.events.webhooks.retry(operatorPrincipal(), last!.id).catch((e: unknown) => e);
    expect(busy).to.have.property('type', 'processing-failure/resource-locked');
    // Its instance died: the retry records that attempt, then sends once more.
    await lease(Date.now() - 1000);
    receiver.answer = () => 200;
    await t.core.events.webhooks.retry(operatorPrincipal(), last!.id);
    const done = await until('the retried delivery to succeed', () =>
      dbOf(t!.core).read((em) => em.findOneBy(WebhookDeliveryEntity, { id: failed.id, status: 'succeeded' })),
    );
    expect(done.lease).to.equal(null);
    const log = await dbOf(t.core).read((em) =>
      em.find(WebhookAttemptEntity, { where: { delivery_id: failed.id }, order: { id: 'ASC' } }),
    );
    expect(log.map((a) => [a.status, a.success])).to.deep.equal([
      [500, false],
      [500, false],
      [0, false],
      [200, true],
    ]);
    expect(log[2]!.message).to.match(LOST);
    expect(receiver.received).to.have.length(3);
  });

  it('an instance killed mid-delivery: each delivery in flight is logged "no result", sent again, none lost', async function () {
    this.timeout(120_000);
    const N = 40;
    // The child's claims expire timeout + grace after it made them; it is killed long before.
    const { config, cleanup } = await testConfig({
      webhooks: [{ url: `${receiver.url}/h` }],
      events: { ...fast, webhook_timeout_seconds: 5, webhook_lease_grace_seconds: 0.5 },
    });
    const log = createLogger('error', { silent: true });
    let child: ChildProcess | null = null;
    let second: Core | null = null;
    try {
      // The Actions are written with no loop running, so the child finds every delivery queued.
      const writer = await createCore(config, log, { background: false });
      let inFlight: number;
      try {
        for (let i = 0; i < N; i++) await put(writer, `f${i}.txt`, 'x');
        receiver.answer = () => 'hang';
        const instance = spawn(process.execPath, ['--import', 'tsx', INSTANCE], {
          env: { ...process.env, SVC_TEST_CORE_CONFIG: JSON.stringify(config) },
          stdio: ['pipe', 'ignore', 'inherit'],
        });
        child = instance;
        const exited = new Promise((resolve) =>
          instance.once('exit', (code, signal) => resolve(signal ?? code)),
        );
        // Once every delivery the child claimed has reached the receiver, all are in flight.
        inFlight = await until(
          "the child's claims at the receiver",
          async () => {
            if (instance.exitCode !== null) throw new Error(`the instance exited (${instance.exitCode})`);
            const leased = await dbOf(writer).read((em) =>
              em.createQueryBuilder(WebhookDeliveryEntity, 'd').where('d.lease IS NOT NULL').getCount(),
            );
            return leased > 0 && receiver.received.length === leased ? leased : null;
          },
          60_000,
        );
        instance.kill('SIGKILL');
        expect(await exited).to.equal('SIGKILL');
        expect(
          await dbOf(writer).read((em) => em.count(WebhookAttemptEntity)),
          'attempts ended before the kill',
        ).to.equal(0);
      } finally {
        await writer.close();
      }

      const firstRound = new Set(receiver.received.map(actionId));
      expect(firstRound.size).to.equal(inFlight);
      receiver.answer = () => 200;
      second = await createCore({ ...config, events: { ...config.events, webhook_timeout_seconds: 1 } }, log);
      const core = second;
      await until(
        'every delivery to succeed',
        async () =>
          (await dbOf(core).read((em) => em.countBy(WebhookDeliveryEntity, { status: 'succeeded' }))) === N,
        60_000,
      );
      const deliveries = await dbOf(core).read((em) => em.find(WebhookDeliveryEntity));
      const attempts = await dbOf(core).read((em) => em.find(WebhookAttemptEntity, { order: { id: 'ASC' } }));
      expect(deliveries).to.have.length(N);
      expect(new Set(receiver.received.map(actionId)).size, 'Actions received').to.equal(N);
      expect(receiver.received).to.have.length(N + inFlight);
      for (const d of deliveries) {
        const trail = attempts.filter((a) => a.delivery_id === d.id);
        const got = receiver.received.filter((r) => actionId(r) === d.action_id);
        if (firstRound.has(d.action_id)) {
          expect(trail.map((a) => [a.status, a.success])).to.deep.equal([
            [0, false],
            [200, true],
          ]);
          expect(trail[0]!.message).to.match(LOST);
          expect(got).to.have.length(2);
        } else {
          expect(trail.map((a) => [a.status, a.success])).to.deep.equal([[200, true]]);
          expect(got).to.have.length(1);
        }
        for (let k = 1; k < got.length; k++) {
          const between = trail.some(
            (a) => a.created_at.getTime() >= got[k - 1]!.at && a.created_at.getTime() <= got[k]!.at,
          );
          expect(between, `an attempt row between two receipts of Action ${d.action_id}`).to.equal(true);
        }
      }
    } finally {
      if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await second?.close();
      await cleanup();
    }
  });
});
