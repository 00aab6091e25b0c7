/**
 * Retention (issue 7 item 6): Actions and delivery records older than `retention_days` are
 * pruned; newer ones and pending deliveries stay.
 */
import { expect } from 'chai';
import { ActionEntity, WebhookAttemptEntity, WebhookDeliveryEntity } from '../../../src/db/entities.ts';
import { dbKind, openTestCore, type TestCore } from '../../helpers/gateway.ts';
import { dbOf } from '../../helpers/internals.ts';
import { queriesDuring, wholeReads } from '../../helpers/plans.ts';

const DAY = 86_400_000;

describe(`retention (${dbKind})`, function () {
  this.timeout(30_000);
  let t: TestCore;
  before(async () => {
    t = await openTestCore({ events: { retention_days: 10 } });
  });
  after(() => t.close());

  it('prunes Actions, attempts and finished deliveries older than retention_days', async () => {
    const now = Date.now();
    const old = new Date(now - 11 * DAY);
    const recent = new Date(now - 9 * DAY);
    await dbOf(t.core).work(async (em) => {
      await em.createQueryBuilder().delete().from(ActionEntity).execute();
      const action = (when: Date, path: string) => ({ when, action: 'create', path, targets: '[]' });
      await em.insert(ActionEntity, [action(old, 'old.txt'), action(recent, 'recent.txt')]);
      const delivery = (created_at: Date, status: string, path: string) => ({
        action_id: 1,
        created_at,
        url: 'http://127.0.0.1:9/',
        method: 'POST',
        request_headers: '{}',
        body: '{}',
        path,
        folder: '',
        status: status as 'pending',
        attempts: 1,
        // Not due: the webhooks loop of this core must not send it during the test.
        next_attempt_at: new Date(now + DAY),
        locked_until: null,
        lease: null,
      });
      await em.insert(WebhookDeliveryEntity, [
        delivery(old, 'succeeded', 'old-done'),
        delivery(old, 'failed', 'old-failed'),
        delivery(old, 'pending', 'old-pending'),
        delivery(recent, 'succeeded', 'recent-done'),
      ]);
      const attempt = (created_at: Date, path: string) => ({
        delivery_id: 1,
        created_at,
        status: 200,
        message: 'delivered (HTTP 200)',
        success: true,
        request_headers: '{}',
        request_method: 'POST',
        request_url: 'http://127.0.0.1:9/',
        path,
        folder: '',
      });
      await em.insert(WebhookAttemptEntity, [attempt(old, 'old-attempt'), attempt(recent, 'recent-attempt')]);
    });
    expect(await t.core.events.retention.tick()).to.equal(false);
    const left = await dbOf(t.core).read(async (em) => ({
      actions: (await em.find(ActionEntity, { order: { id: 'ASC' } })).map((r) => r.path),
      deliveries: (await em.find(WebhookDeliveryEntity, { order: { id: 'ASC' } })).map((r) => r.path),
      attempts: (await em.find(WebhookAttemptEntity, { order: { id: 'ASC' } })).map((r) => r.path),
    }));
    expect(left).to.deep.equal({
      actions: ['recent.txt'],
      deliveries: ['old-pending', 'recent-done'],
      attempts: ['recent-attempt'],
    });
  });

  it('finds what to prune through indexes on time, not by reading the tables whole', async () => {
    // Ordered by id, a batch with nothing old enough went through every row of the table: the
    // whole Action log once a minute on most sites.
    const statements = await queriesDuring(t.core, () => t.core.events.retention.tick());
    expect(statements.length).to.be.greaterThan(0);
    const whole = await wholeReads(t.core, statements, ['actions', 'webhook_attempts', 'webhook_deliveries']);
    expect(whole, whole.join('\n')).to.deep.equal([]);
  });
});
