/**
 * The summary of `npm run bench` (test/bench/all.ts): issue 13's table, gateway figure, best peer
 * figure, ratio and aim per row, at both durability settings, read from the figures the protocol
 * benchmarks write beside their tables (results-<name>[-os].json), and written to
 * test/bench/results-summary.md.
 *
 *   node --import tsx test/bench/summary.ts      (rewrite the summary from the JSON files there)
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Durability, Figure } from './lib.ts';

const DIR = path.join('test', 'bench');
export const PROTOCOLS = ['ftp', 'sftp', 'webdav'] as const;
export type Protocol = (typeof PROTOCOLS)[number];
export const SETTINGS: Durability[] = ['fsync', 'os'];

/** Results is one results-<name>[-os].json. */
interface Results {
  bench: Protocol;
  durability: Durability;
  quick: boolean;
  date: string;
  /** the cores and processor model the figures were measured on (absent in files written before 2026-11-30) */
  machine?: string;
  sizeLabel?: string;
  smallFiles?: number;
  figures: Figure[];
}

/** BenchRun is how one benchmark process of `npm run bench` ended. */
export interface BenchRun {
  bench: Protocol;
  durability: Durability;
  code: number | null;
  seconds: number;
}

/** resultsFile is where a benchmark writes its figures at a durability setting. */
export const resultsFile = (bench: Protocol, durability: Durability) =>
  path.join(DIR, `results-${bench}${durability === 'os' ? '-os' : ''}.json`);

/** Part is one figure of a row: a benchmark's key ('rss' rows have no peer). */
type Part = [Protocol, string];

interface SummaryRow {
  label: (size: string, small: string) => string;
  parts: Part[];
  aim: string;
}

const ROWS: SummaryRow[] = [
  { label: (b) => `FTP upload ${b} (lftp)`, parts: [['ftp', 'stor.plain']], aim: '≥ 1.0' },
  { label: (b) => `FTP download ${b}`, parts: [['ftp', 'retr.plain']], aim: '≥ 1.0' },
  {
    label: (b) => `FTPS upload / download ${b}`,
    parts: [
      ['ftp', 'stor.tls'],
      ['ftp', 'retr.tls'],
    ],
    aim: '≥ 1.0',
  },
  {
    label: (_, n) => `FTP ${n} × 4 KiB up / down (lftp mirror)`,
    parts: [
      ['ftp', 'small.up.plain'],
      ['ftp', 'small.down.plain'],
    ],
    aim: '≥ 0.8 (`fsync`: ≥ 0.4)',
  },
  {
    label: (_, n) => `FTPS ${n} × 4 KiB up / down, TLS 1.3`,
    parts: [
      ['ftp', 'small.up.tls1.3'],
      ['ftp', 'small.down.tls1.3'],
    ],
    aim: '≥ 0.8 (`fsync`: ≥ 0.4)',
  },
  {
    label: (b) => `SFTP put / get ${b} (OpenSSH sftp)`,
    parts: [
      ['sftp', 'put.default'],
      ['sftp', 'get.default'],
    ],
    aim: '≥ 1.0',
  },
  {
    label: (_, n) => `SFTP ${n} × 4 KiB put -r / get -r`,
    parts: [
      ['sftp', 'small.up'],
      ['sftp', 'small.down'],
    ],
    aim: '≥ 0.8 (`fsync`: ≥ 0.4)',
  },
  {
    label: (b) => `WebDAV PUT / GET ${b} (curl)`,
    parts: [
      ['webdav', 'put'],
      ['webdav', 'get'],
    ],
    aim: '≥ 1.0',
  },
  {
    label: (_, n) => `WebDAV ${n} × 4 KiB PUT / GET (curl keep-alive)`,
    parts: [
      ['webdav', 'small.put'],
      ['webdav', 'small.get'],
    ],
    aim: '≥ 0.8 (`fsync`: ≥ 0.4)',
  },
  {
    label: () => 'listing of 10,000 entries incl. login: FTP LIST / SFTP ls -l / WebDAV PROPFIND allprop, ms',
    parts: [
      ['ftp', 'list.list'],
      ['sftp', 'list.long'],
      ['webdav', 'list.allprop'],
    ],
    aim: '≤ 1.0 (WebDAV ≤ 2.0), time',
  },
  {
    label: () => 'connect + login + empty listing: FTP / SFTP / WebDAV, ms',
    parts: [
      ['ftp', 'login.empty'],
      ['sftp', 'login.empty'],
      ['webdav', 'login.empty'],
    ],
    aim: '≤ 1.0, time',
  },
  {
    label: (b) => `peak RSS during the ${b} transfers: FTP / SFTP / WebDAV, MiB`,
    parts: [
      ['ftp', 'rss.transfer'],
      ['sftp', 'rss.transfer'],
      ['webdav', 'rss.transfer'],
    ],
    aim: '≤ 150 MiB',
  },
];

const n0 = (x: number) => x.toLocaleString('en-US', { maximumFractionDigits: 0 });

function load(bench: Protocol, durability: Durability): Results | null {
  const file = resultsFile(bench, durability);
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Results) : null;
}

/** cells renders a row's gateway, peer and ratio cells from the figures of one durability setting. */
function cells(parts: Part[], results: Map<Protocol, Results | null>): [string, string, string] {
  const figs = parts.map(([bench, key]) => results.get(bench)?.figures.find((f) => f.key === key));
  const gateway = figs.map((f) => (f ? n0(f.gateway) : '—')).join(' / ');
  if (figs.every((f) => !f || f.peer === null)) return [gateway, '—', '—'];
  const names = new Set(figs.map((f) => f?.peerName));
  const peer = figs
    .map((f, i) => {
      if (!f || f.peer === null) return '—';
      const name = names.size > 1 || i === 0 ? `${f.peerName} ` : '';
      const synced = f.peerWithFsync === undefined ? '' : `; ${n0(f.peerWithFsync)} with fsync`;
      return `${name}${n0(f.peer)}${f.peerFsyncs === false ? ` (no fsync${synced})` : ''}`;
    })
    .join(' / ');
  const ratio = figs
    .map((f) => {
      if (!f || f.peer === null) return '—';
      const synced = f.peerWithFsync === undefined ? '' : ` (${(f.gateway / f.peerWithFsync).toFixed(2)})`;
      return `${(f.gateway / f.peer).toFixed(2)}${synced}`;
    })
    .join(' / ');
  return [gateway, peer, ratio];
}

/** summaryText renders results-summary.md from the JSON files; `runs` says how the processes ended. */
export function summaryText(runs: BenchRun[] = [], totalSeconds?: number): string {
  const all = new Map<Durability, Map<Protocol, Results | null>>();
  for (const d of SETTINGS) all.set(d, new Map(PROTOCOLS.map((p) => [p, load(p, d)])));
  const found = [...all.values()].flatMap((m) => [...m.values()]).filter((r): r is Results => r !== null);
  const size = found.find((r) => r.sizeLabel)?.sizeLabel ?? '1 GiB';
  const small = (found.find((r) => r.smallFiles)?.smallFiles ?? 1000).toLocaleString('en-US');
  const quick = found.some((r) => r.quick);
  const lines = [
    `# Benchmark summary (\`npm run bench\`)${quick ? ' — QUICK smoke run: figures not comparable' : ''}`,
    '',
    `Written ${new Date().toISOString()}, ${process.version}, ${os.cpus().length} cores, ` +
      `${os.cpus()[0]?.model ?? ''}, load average (1 min) ${os.loadavg()[0]!.toFixed(1)} at the end` +
      (totalSeconds === undefined ? '' : `; total ${n0(totalSeconds)} s`) +
      '. The rows of issue 13, from the figures each protocol benchmark wrote beside its table ' +
      '(test/bench/results-<protocol>[-os].md and .json; `-os` is the run at `SVC_DURABILITY=os`). ' +
      'Gateway: `svc-gateway serve` from the compiled dist/, SQLite, local blob store. Peers from Debian, ' +
      'side by side in the same benchmark process, transfers interleaved, best of the repetitions kept: ' +
      'vsftpd (FTP, FTPS), OpenSSH sftp-server (SFTP), nginx dav + dav-ext (WebDAV). Ratio = gateway / peer ' +
      '(throughput; time or memory where the aim says so). "no fsync": the peer answered an upload before its ' +
      'bytes were on disk, which the gateway does at `fsync` and does not at `os`.',
    '',
    // The protocols may come from different runs (`npm run bench -- webdav` rewrites only its own
    // figures), and runs on different days may be on different machines: each says which.
    `Figures measured: ${SETTINGS.flatMap((d) =>
      PROTOCOLS.flatMap((p) => {
        const r = all.get(d)!.get(p);
        return r
          ? [`${p} at ${d} ${r.date.slice(0, 16).replace('T', ' ')} UTC${r.machine ? ` (${r.machine})` : ''}`]
          : [];
      }),
    ).join('; ')}.`,
    '',
    `| row | aim | \`fsync\` gateway | \`fsync\` best peer | \`fsync\` ratio | \`os\` gateway | \`os\` best peer | \`os\` ratio |`,
    '|---|---|---:|---|---:|---:|---|---:|',
    ...ROWS.map((row) => {
      const [fg, fp, fr] = cells(row.parts, all.get('fsync')!);
      const [og, op, or] = cells(row.parts, all.get('os')!);
      return `| ${row.label(size, small)} | ${row.aim} | ${fg} | ${fp} | ${fr} | ${og} | ${op} | ${or} |`;
    }),
    '',
    'REST (key-authenticated requests/s, 3-step uploads/s) is not in this run: `npm run bench:rest` and ' +
      '`npm run bench:files`.',
  ];
  const missing = SETTINGS.flatMap((d) =>
    PROTOCOLS.filter((p) => all.get(d)!.get(p) === null).map((p) => `${p} at ${d}`),
  );
  if (missing.length) lines.push('', `No figures (not run or failed): ${missing.join(', ')}.`);
  if (runs.length) {
    lines.push(
      '',
      '| benchmark | durability | exit | seconds |',
      '|---|---|---:|---:|',
      ...runs.map((r) => `| ${r.bench} | ${r.durability} | ${r.code ?? 'signal'} | ${n0(r.seconds)} |`),
    );
  }
  return `${lines.join('\n')}\n`;
}

/** writeSummary writes test/bench/results-summary.md and returns its path. */
export function writeSummary(runs: BenchRun[] = [], totalSeconds?: number): string {
  const file = path.join(DIR, 'results-summary.md');
  writeFileSync(file, summaryText(runs, totalSeconds));
  return file;
}

if (process.argv[1]?.endsWith('summary.ts')) console.log(`wrote ${writeSummary()}`);
