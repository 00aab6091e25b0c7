/**
 * README's examples run as written (issue 16, item 7): every ```sh and ```bash block of README.md,
 * in order and in one shell state (a variable set in one block is there in the next), against a
 * fresh gateway process on a temp data dir that the blocks see as `data/`, with the real clients
 * (curl, jq, lftp, rclone). curl fails on HTTP errors (--fail-with-body) and lftp on a failed
 * command (cmd:fail-exit), so an example that answers an error fails here, naming its README line,
 * the command and its output. A block preceded by `<!-- readme-test: skip (reason) -->` is not run;
 * the test names each one. The default ports in the blocks are replaced by the free ones the
 * gateway got. SQLite only: it checks the documentation, not the database.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { dbKind } from '../helpers/gateway.ts';
import { serveProcess, stopProcess, type ServedProcess } from '../helpers/process.ts';

/** Block is one shell block of README.md. */
interface Block {
  /** the 1-based line of its opening fence */
  fence: number;
  /** the section it is in */
  heading: string;
  code: string;
  /** why it is not run, from its marker */
  skip: string | null;
}

const README = path.resolve('README.md');
const MARKER = /^<!--\s*readme-test:\s*skip\s*\((.+)\)\s*-->\s*$/;

/** readmeBlocks reads README's shell blocks with their line numbers and skip markers. */
function readmeBlocks(lines: string[]): Block[] {
  const blocks: Block[] = [];
  let heading = '';
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (/^#{1,6} /.test(line)) heading = line.replace(/^#+ /, '');
    const open = /^```(\w*)\s*$/.exec(line);
    if (!open) continue;
    let end = i + 1;
    while (end < lines.length && !/^```\s*$/.test(lines[end]!)) end++;
    if (open[1] === 'sh' || open[1] === 'bash') {
      const marker = MARKER.exec(lines[i - 1] ?? '');
      blocks.push({
        fence: i + 1,
        heading,
        code: lines.slice(i + 1, end).join('\n'),
        skip: marker?.[1] ?? null,
      });
    }
    i = end;
  }
  return blocks;
}

/** commandAt is the whole command around `line`, its continuation lines (`\`) included. */
function commandAt(lines: string[], line: number, fence: number): string {
  let first = line;
  while (first - 1 > fence && /\\$/.test(lines[first - 2]!)) first--;
  let last = line;
  while (last < lines.length && /\\$/.test(lines[last - 1]!)) last++;
  return lines
    .slice(first - 1, last)
    .map((l) => `  ${l}`)
    .join('\n');
}

// The README's default ports, and the listener that has each.
const DEFAULT_PORTS: Record<string, string> = {
  '8443': 'https',
  '8444': 'webdav',
  '2121': 'ftp',
  '9990': 'ftps',
  '2222': 'sftp',
};

const ADMIN_PASSWORD = 'readme-admin-password';
const HEADER = [
  'set -a',
  '[ -f "$README_STATE" ] && source "$README_STATE"',
  'cd "$README_WORK"',
  'set -eo pipefail',
  'trap \'echo "README_FAILED_AT=$LINENO" >&2\' ERR',
];

/** RunResult is a block's exit code, output, and the script line that failed (if any). */
interface RunResult {
  code: number | null;
  output: string;
  failedAt: number | null;
}

(dbKind === 'sqlite' ? describe : describe.skip)('README examples run as written', function () {
  this.timeout(600_000);
  const lines = readFileSync(README, 'utf8').split('\n');
  const blocks = readmeBlocks(lines);
  let work: string;
  let gw: ServedProcess;
  let env: Record<string, string>;
  let failed: string | null = null;

  before(async function () {
    const missing = ['curl', 'jq', 'lftp', 'rclone', 'sftp', 'sshpass'].filter(
      (c) => !(process.env.PATH ?? '').split(':').some((d) => existsSync(path.join(d, c))),
    );
    if (missing.length)
      throw new Error(
        `the README test needs ${missing.join(', ')} (Debian: apt-get install jq lftp rclone openssh-client sshpass curl)`,
      );
    if (!existsSync('dist/.built'))
      throw new Error('the README test runs the compiled build: run npm run compile first');
    work = mkdtempSync(path.join(os.tmpdir(), 'svc-readme-'));
    const home = path.join(work, 'home');
    mkdirSync(home);
    // An HTTP error fails curl, and a failed command lftp, so an example that answers one fails.
    writeFileSync(
      path.join(home, '.curlrc'),
      'fail-with-body\nshow-error\nno-progress-meter\nmax-time = 120\n',
    );
    writeFileSync(
      path.join(home, '.lftprc'),
      'set cmd:fail-exit yes\nset net:max-retries 2\nset net:timeout 20\n',
    );
    // `npx svc-gateway …` runs this checkout's command (on the data dir above, as from a checkout).
    const bin = path.join(work, 'node_modules', '.bin');
    mkdirSync(bin, { recursive: true });
    writeFileSync(
      path.join(bin, 'svc-gateway'),
      `#!/bin/sh\nexec '${process.execPath}' '${path.resolve('bin/svc-gateway.js')}' "$@"\n`,
      { mode: 0o755 },
    );
    // OpenSSH reads ~/.ssh from the passwd entry, not $HOME: without this the examples' pinned host
    // key would go to the real user's known_hosts, where an earlier gateway on the same port left
    // another key (CI failed so: "REMOTE HOST IDENTIFICATION HAS CHANGED"). A user of this home
    // runs the same command against a fresh known_hosts, as a first-time reader does.
    const tools = path.join(work, 'tools');
    mkdirSync(tools);
    mkdirSync(path.join(home, '.ssh'), { mode: 0o700 });
    for (const client of ['sftp', 'scp', 'ssh'])
      writeFileSync(
        path.join(tools, client),
        `#!/bin/sh\nexec /usr/bin/${client} -o UserKnownHostsFile="$HOME/.ssh/known_hosts" "$@"\n`,
        { mode: 0o755 },
      );
    // The files the examples send.
    writeFileSync(path.join(work, 'q3.pdf'), '%PDF-1.4 a quarterly report\n');
    writeFileSync(path.join(work, 'report.pdf'), '%PDF-1.4 a report\n');
    for (const [dir, files] of [
      ['reports', ['january.csv', 'february.csv']],
      ['photos', ['beach.jpg', 'hills.jpg']],
    ] as const) {
      mkdirSync(path.join(work, dir));
      for (const f of files) writeFileSync(path.join(work, dir, f), `${f}\n`.repeat(100));
    }
    const passive = 20000 + Math.floor(Math.random() * 12000);
    gw = await serveProcess(path.join(work, 'data'), {
      SVC_ADMIN_PASSWORD: ADMIN_PASSWORD,
      SVC_FTP_PASV_PORTS: `${passive}-${passive + 19}`,
      SVC_LOG_LEVEL: 'info',
    });
    env = {
      PATH: `${tools}:${process.env.PATH ?? '/usr/bin:/bin'}`,
      HOME: home,
      LANG: 'C.UTF-8',
      SVC_ADMIN_PASSWORD: ADMIN_PASSWORD,
      README_WORK: work,
      README_STATE: path.join(work, 'state.sh'),
    };
  });

  after(async () => {
    if (gw) await stopProcess(gw);
    if (work) rmSync(work, { recursive: true, force: true });
  });

  /** run runs one block's code after the header, then saves the shell's variables for the next. */
  function run(code: string): Promise<RunResult> {
    const script = path.join(work, 'block.sh');
    writeFileSync(script, `${HEADER.join('\n')}\n${code}\nset +e; trap - ERR\nexport -p > "$README_STATE"\n`);
    return new Promise((resolve) => {
      const child = spawn('bash', [script], {
        cwd: work,
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true,
      });
      let output = '';
      child.stdout.on('data', (c: Buffer) => (output += c.toString()));
      child.stderr.on('data', (c: Buffer) => (output += c.toString()));
      const timer = setTimeout(() => {
        output += '\n(timed out after 180 s)';
        // The block's own process group: bash and the clients it started.
        process.kill(-child.pid!, 'SIGKILL');
      }, 180_000);
      child.once('close', (code) => {
        clearTimeout(timer);
        const at = /README_FAILED_AT=(\d+)/.exec(output);
        resolve({
          code,
          output: output.replace(/README_FAILED_AT=\d+\n?/g, ''),
          failedAt: at ? Number(at[1]) : null,
        });
      });
    });
  }

  const withPorts = (code: string) =>
    code.replace(/\b(8443|8444|2121|9990|2222)\b/g, (p) => String(gw.ports[DEFAULT_PORTS[p]!]));

  for (const block of blocks) {
    const title = `README.md:${block.fence} (${block.heading}): ${block.code.split('\n')[0]!.slice(0, 60)}`;
    if (block.skip) {
      it.skip(`${title} — skipped: ${block.skip}`);
      continue;
    }
    it(title, async function () {
      if (failed) this.skip();
      const r = await run(withPorts(block.code));
      if (r.code === 0) return;
      const line = r.failedAt !== null ? block.fence + r.failedAt - HEADER.length : null;
      failed = `README.md:${line ?? block.fence}`;
      const where =
        line !== null
          ? `README.md:${line} failed (exit ${r.code}):\n${commandAt(lines, line, block.fence)}`
          : `the block at README.md:${block.fence} failed (exit ${r.code})`;
      expect.fail(`${where}\n--- output ---\n${r.output.slice(-4000)}`);
    });
  }

  it('names its skipped blocks, each with a reason', () => {
    const skipped = blocks.filter((b) => b.skip);
    console.log(
      `      README: ${blocks.length - skipped.length} blocks run, ${skipped.length} skipped:\n` +
        skipped.map((b) => `        README.md:${b.fence} (${b.heading}): ${b.skip}`).join('\n'),
    );
    expect(blocks.length - skipped.length, 'blocks run').to.be.greaterThan(5);
  });
});
