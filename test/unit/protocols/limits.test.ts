/**
 * The arithmetic of the connection limits (protocols/shared/limits.ts), without sockets: reading the
 * open-file limit, the automatic defaults, and the counting. The wire-level proof is
 * test/protocols/limits.test.ts.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import {
  ConnectionLimits,
  isRefusal,
  readOpenFileLimit,
  resolveLimits,
  type LimitSettings,
} from '../../../protocols/shared/limits.ts';
import { createLogger } from '../../../src/log.ts';

const AUTO: LimitSettings = {
  max_connections: 0,
  max_connections_per_address: 0,
  max_sessions_per_user: 32,
  passive_listeners_per_user: 0,
  passive_range_size: 100,
};

describe('connection limits', () => {
  it('reads the soft and hard open-file limits from a /proc limits file, unlimited included', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-limits-unit-'));
    try {
      const file = path.join(dir, 'limits');
      writeFileSync(
        file,
        [
          'Limit                     Soft Limit           Hard Limit           Units     ',
          'Max processes             63451                63451                processes ',
          'Max open files            1024                 unlimited            files     ',
        ].join('\n'),
      );
      expect(readOpenFileLimit(file)).to.deep.equal({
        soft: 1024,
        hard: Number.POSITIVE_INFINITY,
        source: '/proc/self/limits',
      });
      expect(readOpenFileLimit(path.join(dir, 'missing'))).to.deep.equal({
        soft: 1024,
        hard: 1024,
        source: 'assumed',
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('keeps the automatic limits well under the open-file limit, and takes the settings as given', () => {
    const at = (soft: number) => resolveLimits(AUTO, { soft, hard: soft, source: '/proc/self/limits' });
    expect(at(1024)).to.include({ maxConnections: 231, maxConnectionsPerAddress: 57 });
    expect(at(256)).to.include({ maxConnections: 39, maxConnectionsPerAddress: 9 });
    expect(at(1_048_576)).to.include({ maxConnections: 4096, maxConnectionsPerAddress: 256 });
    expect(at(Number.POSITIVE_INFINITY)).to.include({ maxConnections: 4096 });
    expect(at(64)).to.include({ maxConnections: 8, maxConnectionsPerAddress: 2 });
    expect(at(1024).passiveListenersPerUser).to.equal(25);
    const small = resolveLimits(
      { ...AUTO, passive_range_size: 10 },
      { soft: 1024, hard: 1024, source: 'assumed' },
    );
    expect(small.passiveListenersPerUser).to.equal(4);
    const given = resolveLimits(
      { ...AUTO, max_connections: 10, max_connections_per_address: 50, passive_listeners_per_user: 3 },
      { soft: 1024, hard: 1024, source: 'assumed' },
    );
    // A per-address limit above the total is the total.
    expect(given).to.include({
      maxConnections: 10,
      maxConnectionsPerAddress: 10,
      passiveListenersPerUser: 3,
    });
  });

  it('counts per address, in total, per user and per user’s passive listeners, and gives places back once', () => {
    const limits = new ConnectionLimits(
      { maxConnections: 3, maxConnectionsPerAddress: 2, maxSessionsPerUser: 1, passiveListenersPerUser: 1 },
      createLogger('error', { silent: true }),
    );
    const a1 = limits.admit('10.0.0.1');
    const a2 = limits.admit('10.0.0.1');
    const a3 = limits.admit('10.0.0.1');
    expect(isRefusal(a1) || isRefusal(a2)).to.be.false;
    expect(a3).to.include({ refused: 'max_connections_per_address' });
    const b1 = limits.admit('10.0.0.2');
    expect(isRefusal(b1)).to.be.false;
    expect(limits.admit('10.0.0.3')).to.include({ refused: 'max_connections' });
    if (isRefusal(a1)) throw new Error('unreachable');
    a1.release();
    a1.release();
    expect(limits.connections).to.equal(2);
    expect(isRefusal(limits.admit('10.0.0.3'))).to.be.false;

    const s = limits.openSession('user:1');
    expect(limits.openSession('user:1')).to.include({ refused: 'max_sessions_per_user' });
    expect(isRefusal(limits.openSession('user:2'))).to.be.false;
    if (isRefusal(s)) throw new Error('unreachable');
    s.release();
    expect(isRefusal(limits.openSession('user:1'))).to.be.false;

    expect(isRefusal(limits.holdPassive('user:1'))).to.be.false;
    expect(limits.holdPassive('user:1')).to.include({ refused: 'passive_listeners_per_user' });
  });
});
