/**
 * The gateway's log lines off a terminal: written in batches (src/log.ts), yet none lost or out of
 * order when the process exits, and none held back while it runs and goes quiet.
 */
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { underStrace } from '../helpers/strace.ts';

const LOG = path.resolve('src/log.ts');

/** script is a module that runs `body` with `log` (createLogger('info')) in scope. */
const script = (body: string) =>
  `import { createLogger } from ${JSON.stringify(LOG)};\nconst log = createLogger('info');\n${body}`;

/** logger starts a node process that runs `body` with `log` (createLogger('info')) in scope. */
function logger(body: string): { child: ChildProcess; lines: string[]; exited: Promise<number | null> } {
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script(body)], {
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

  it('are written once each, and a quiet process writes nothing to stderr (strace)', () => {
    // Two lines, then a second of quiet: the wait for a batch must not go on writing.
    const run = underStrace('write,writev', [
      '--import',
      'tsx',
      '--input-type=module',
      '-e',
      script("log.info('one');\nlog.info('two');\nsetTimeout(() => process.exit(0), 1000);"),
    ]);
    expect(run.status, run.stderr).to.equal(0);
    const toStderr = run.lines.filter((l) => /^\d+ +writev?\(2,/.test(l));
    // sonic-boom's periodic flush wrote an empty string every 50 ms: 20 writes here.
    expect(toStderr, toStderr.join('\n')).to.have.length(1);
    expect(toStderr[0]).to.match(/message\\+":\\+"one.*message\\+":\\+"two/);
    expect(
      run.stderr
        .trim()
        .split('\n')
        .map((l) => (JSON.parse(l) as { message: string }).message),
    ).to.deep.equal(['one', 'two']);
  });
});
