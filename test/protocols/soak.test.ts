/**
 * Issue 19, "A short soak in CI": the soak of test/soak/soak.ts for 3 minutes on PostgreSQL (the
 * pass that sets SVC_TEST_DATABASE_URL; the soak makes its own fresh database on that server),
 * with 4 users, uploads up to 2 MiB and a 30-second quiet spell instead of a minute, so that the
 * whole test stays under 5 minutes on two shared cores. It must end with 0 errors, every file
 * whole, descriptors back to the baseline and RSS after the quiet spell within 60 MiB of the
 * first loaded minute. `npm run soak` runs the long one.
 */
import { expect } from 'chai';
import { TEST_DATABASE_URL, dbKind } from '../helpers/gateway.ts';
import { DESCRIPTOR_SLACK, RSS_LIMIT_MIB, describeSummary, runSoak } from '../soak/soak.ts';

(dbKind === 'postgres' ? describe : describe.skip)('soak, 3 minutes (postgres)', function () {
  // 3 min of load, 30 s quiet, compile, start, setup and verification: about 4 min.
  this.timeout(300_000);

  it('ends with 0 errors, every file whole, descriptors at baseline and RSS back within 60 MiB', async () => {
    const lines: string[] = [];
    const summary = await runSoak({
      minutes: 3,
      users: 4,
      database: TEST_DATABASE_URL,
      maxMiB: 2,
      idleSeconds: 30,
      idleConnections: 6,
      pauseMs: 100,
      print: (line) => lines.push(line),
    });
    const report = [...lines, ...describeSummary(summary)].join('\n');
    // The per-minute table and the margins, passed or not: memory is the check with the least room.
    console.log(lines.filter((l) => l.startsWith('|')).join('\n'));
    console.log(describeSummary(summary).slice(1, 5).join('\n'));
    expect(summary.errors, report).to.equal(0);
    expect(summary.filesVerified, report).to.be.greaterThan(0);
    expect([...summary.lost, ...summary.changed, ...summary.unexpected], report).to.deep.equal([]);
    expect(summary.endDescriptors, report).to.be.at.most(summary.baselineDescriptors + DESCRIPTOR_SLACK);
    expect(summary.idleRssMiB, report).to.be.at.most(summary.firstMinuteRssMiB + RSS_LIMIT_MIB);
    expect(summary.failures, report).to.deep.equal([]);
  });
});
