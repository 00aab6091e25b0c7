/**
 * The gateway's log lines off a terminal: written in batches (src/log.ts), yet none lost or out of
 * order when the process exits, and none held back while it runs and goes quiet.
 */
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';

const LOG = path.resolve('src/log.ts');

/** logger starts a node process that runs `body` with `log` (createLogger('info')) in scope. */
function logger(body: string): { child: ChildProcess; lines: string[]; exited: Promise<number | null> } {
  const script = `import { createLogger } from ${JSON.stringify(LOG)};\nconst log = createLogger('info');\n${body}`;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const lines: string[] = [];
  createInterface({ input: child.stderr! }).on('line', (l) => lines.push(l));
  const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
  return { child, lines, exited };
}

describe('log lines', function () {
  this.timeout(30_000);

  it('reach stderr whole and in order when the process exits at once after logging them', async () => {
    const { lines, exited } = logger(
      "for (let i = 0; i < 5000; i++) log.info('line', { i, pad: 'x'.repeat(100) });\nprocess.exit(3);",
    );
    expect(await exited).to.equal(3);
    const numbers = lines.map((l) => (JSON.parse(l) as { i: number }).i);
    expect(numbers).to.have.length(5000);
    expect(
      numbers.every((n, k) => n === k),
      'in order',
    ).to.equal(true);
  });

  it('reach stderr while the process runs on, quiet, after a few lines', async () => {
    const { child, lines, exited } = logger(
      "log.info('alone', { n: 1 });\nsetInterval(() => undefined, 1000);",
    );
    try {
      for (let waited = 0; lines.length === 0 && waited < 10_000; waited += 20)
        await new Promise((r) => setTimeout(r, 20));
      expect(child.exitCode, 'still running').to.equal(null);
      expect(lines.map((l) => (JSON.parse(l) as { message: string }).message)).to.deep.equal(['alone']);
    } finally {
      child.kill('SIGKILL');
      await exited;
    }
  });
});
