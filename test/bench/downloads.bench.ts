/**
 * Per-download overhead of the core: N small downloads through FileSession.openRead (the stream
 * read to its end and closed), in-process on a fresh core, without any protocol around it. It
 * shows what the core adds to every download (the permission check, the row, the `read` Action,
 * the blob lease and its release), on SQLite, and on PostgreSQL when SVC_TEST_DATABASE_URL names
 * a server.
 *
 *   node --import tsx test/bench/downloads.bench.ts            1,000 downloads
 *   SVC_BENCH_DOWNLOADS=5000 node --import tsx test/bench/downloads.bench.ts
 */
import { Readable } from 'node:stream';
import { operatorPrincipal } from '../../src/core/index.ts';
import { dbKind, openTestCore } from '../helpers/gateway.ts';

const N = Number(process.env.SVC_BENCH_DOWNLOADS ?? 1000);
const ROUNDS = 3;

const t = await openTestCore();
try {
  const session = t.core.files.session(operatorPrincipal());
  await session.write('small.bin', Readable.from([Buffer.alloc(4096, 7)]));
  const run = async (record: boolean) => {
    const t0 = performance.now();
    for (let i = 0; i < N; i++) {
      const d = await session.openRead('small.bin', { record });
      for await (const chunk of d.stream) void chunk;
      // The stream's close (and with it any release) belongs to the download's cost.
      await new Promise<void>((resolve) => (d.stream.closed ? resolve() : d.stream.once('close', resolve)));
    }
    return (performance.now() - t0) / N;
  };
  await run(true);
  for (const record of [true, false]) {
    const times: number[] = [];
    for (let r = 0; r < ROUNDS; r++) times.push(await run(record));
    times.sort((a, b) => a - b);
    console.log(
      `${dbKind}: ${N} downloads of 4 KiB, ${record ? 'with' : 'without'} the read Action: ` +
        `median ${times[1]!.toFixed(3)} ms per download (best ${times[0]!.toFixed(3)})`,
    );
  }
} finally {
  await t.close();
}
