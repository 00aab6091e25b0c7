import { expect } from 'chai';
import { operatorPrincipal } from '../../../src/core/index.ts';
import { dbKind, openTestCore, type TestCore } from '../../helpers/gateway.ts';
import { expectError } from './fixtures.ts';

describe(`lockout under simultaneous failures (${dbKind})`, () => {
  let t: TestCore;
  before(async () => {
    t = await openTestCore();
  });
  after(async () => t.close());

  it('counts every one of 5 wrong passwords sent at once, so the user is locked', async () => {
    await t.core.users.create(operatorPrincipal(), { username: 'racer', password: 'right-password' });
    const attempt = (password: string) =>
      t.core.gate.login({ interface: 'restapi', ip: '10.9.9.9', username: 'racer', password });
    const results = await Promise.allSettled(Array.from({ length: 5 }, () => attempt('wrong-password')));
    expect(results.every((r) => r.status === 'rejected')).to.equal(true);
    await expectError(attempt('right-password'), 'not-authenticated/locked-out');
  });
});
