/**
 * History benchmark (issue 19, item 3): the history endpoints' latency as the Action log grows
 * from 10 thousand to 10 million Actions, on PostgreSQL and on SQLite.
 *
 *   npm run bench:history                      both databases; PostgreSQL on the server of
 *                                              SVC_TEST_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test),
 *                                              in a fresh database dropped at the end
 *   SVC_BENCH_HISTORY=postgres npm run bench:history     one database (postgres or sqlite)
 *   SVC_BENCH_HISTORY_SIZES=10000,1000000 …    other sizes
 *
 * Per database and size: a gateway (test/bench/serve.ts) on a fresh database, its Action log
 * emptied and filled by seed-actions.ts; then each endpoint, asked by the site-wide key with
 * per_page=100: the first page, and a deep page reached by following X-Svc-Cursor-Next up to
 * DEEP_PAGES pages in (fewer when the listing ends sooner; the table says how deep), each asked
 * REQUESTS times one after another, p50 and p99. Then the cost of recording one Action: an INSERT
 * of one row in its own transaction, INSERTS times, with the indexes of migration 0008 and (at
 * the smallest size, where swapping index sets is cheap) with the indexes before it. The plans
 * the database chose for the history queries at the largest size follow the table.
 * Writes test/bench/results-history.md.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import pg from 'pg';
import { API, cleanups, f1, runCleanups, startGateway, stopChild, type GatewayInfo } from './lib.ts';
import { openSqlite, seedActions, type SeedTarget } from './seed-actions.ts';

const PG_URL = process.env.SVC_TEST_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test';
const SIZES = (process.env.SVC_BENCH_HISTORY_SIZES ?? '10000,10000000').split(',').map(Number);
const DATABASES = (process.env.SVC_BENCH_HISTORY ?? 'postgres,sqlite').split(',');
const PER_PAGE = 100;
const DEEP_PAGES = 100;
const REQUESTS = 100;
const INSERTS = 300;
const DAY_MS = 86_400_000;

/** Sql runs one statement on the benchmarked database and returns its rows. */
type Sql = (text: string, params?: unknown[]) => Promise<Record<string, unknown>[]>;

function connect(gw: GatewayInfo): { target: SeedTarget; sql: Sql; close: () => Promise<void> } {
  if (gw.databaseUrl) {
    const pool = new pg.Pool({ connectionString: gw.databaseUrl, max: 1 });
    return {
      target: { kind: 'postgres', url: gw.databaseUrl },
      sql: async (text, params) => (await pool.query(text, params)).rows as Record<string, unknown>[],
      close: () => pool.end(),
    };
  }
  const file = path.join(gw.dataDir, 'gateway.sqlite');
  const db = openSqlite(file);
  db.pragma('busy_timeout = 10000');
  return {
    target: { kind: 'sqlite', file },
    sql: (text, params = []) => {
      const st = db.prepare(text.replace(/\$\d+/g, '?'));
      return Promise.resolve(
        st.reader ? (st.all(...params) as Record<string, unknown>[]) : (st.run(...params), []),
      );
    },
    close: () => Promise.resolve(db.close()),
  };
}

/** get asks the gateway for one page and returns the time, the row count and the next cursor. */
function get(gw: GatewayInfo, agent: https.Agent, urlPath: string) {
  return new Promise<{ ms: number; rows: number; next: string | undefined }>((resolve, reject) => {
    const t0 = performance.now();
    const req = https.request(
      {
        host: '127.0.0.1',
        port: gw.port,
        path: `${API}${urlPath}`,
        agent,
        servername: 'localhost',
        headers: { 'X-SvcAPI-Key': gw.key, Accept: 'application/json' },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const ms = performance.now() - t0;
          const text = Buffer.concat(chunks).toString('utf8');
          if (res.statusCode !== 200)
            reject(new Error(`${urlPath}: ${res.statusCode} ${text.slice(0, 200)}`));
          else
            resolve({
              ms,
              rows: (JSON.parse(text) as unknown[]).length,
              next: res.headers['x-svc-cursor-next'] as string | undefined,
            });
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

/** timeIt asks `urlPath` REQUESTS times (after 5 unmeasured) and returns p50 and p99 in ms. */
async function timeIt(gw: GatewayInfo, agent: https.Agent, urlPath: string) {
  for (let i = 0; i < 5; i++) await get(gw, agent, urlPath);
  const ms: number[] = [];
  let rows = 0;
  for (let i = 0; i < REQUESTS; i++) {
    const r = await get(gw, agent, urlPath);
    ms.push(r.ms);
    rows = r.rows;
  }
  return { p50: pct(ms, 50), p99: pct(ms, 99), rows };
}

interface Measure {
  db: string;
  size: number;
  endpoint: string;
  first: { p50: number; p99: number; rows: number };
  deep: { p50: number; p99: number; rows: number; depth: number };
}

/** endpoints are the listings measured: the busiest user, a top folder and a nested one, a file. */
async function endpoints(sql: Sql): Promise<[string, string][]> {
  const [file] = await sql("SELECT path FROM actions WHERE path LIKE 'users/u1/f%' ORDER BY id DESC LIMIT 1");
  return [
    ['site: /history', '/history'],
    ['logins: /history/login', '/history/login'],
    ['user: /history/users/1', '/history/users/1'],
    ['folder: /history/folders/users/u1', '/history/folders/users/u1'],
    ['folder: /history/folders/shared/team3/p4', '/history/folders/shared/team3/p4'],
    ['file: /history/files/…', `/history/files/${String(file?.path ?? 'users/u1/f1.txt')}`],
    // The web admin's filters (extensions): an interface (a fifth of the Actions), an action (3%,
    // through the logins index; 1.5%, without one), and an interface no Action has (the worst case:
    // the whole window is read).
    ['filter: /history?filter[interface]=sftp', '/history?filter[interface]=sftp'],
    ['filter: /history?filter[action]=failedlogin', '/history?filter[action]=failedlogin'],
    ['filter: /history?filter[action]=permission_create', '/history?filter[action]=permission_create'],
    ['filter: /history?filter[interface]=jsapi', '/history?filter[interface]=jsapi'],
  ];
}

/** sep joins the page parameters to a URL that may have a query already. */
const sep = (url: string) => (url.includes('?') ? '&' : '?');

async function measure(db: string, size: number, gw: GatewayInfo, sql: Sql): Promise<Measure[]> {
  const agent = new https.Agent({
    ca: readFileSync(`${gw.dataDir}/tls/cert.pem`),
    keepAlive: true,
    maxSockets: 1,
  });
  const out: Measure[] = [];
  for (const [endpoint, url] of await endpoints(sql)) {
    const first = await timeIt(gw, agent, `${url}${sep(url)}per_page=${PER_PAGE}`);
    // Follow the cursor DEEP_PAGES pages in, or to the last page.
    let cursor: string | undefined;
    let depth = 0;
    for (let page = 1; page < DEEP_PAGES; page++) {
      const q = cursor ? `&cursor=${encodeURIComponent(cursor)}` : '';
      const r = await get(gw, agent, `${url}${sep(url)}per_page=${PER_PAGE}${q}`);
      if (!r.next) break;
      cursor = r.next;
      depth = page;
    }
    const deep = cursor
      ? await timeIt(gw, agent, `${url}${sep(url)}per_page=${PER_PAGE}&cursor=${encodeURIComponent(cursor)}`)
      : first;
    out.push({ db, size, endpoint, first, deep: { ...deep, depth: depth * PER_PAGE } });
    console.log(
      `${db} ${size} ${endpoint}: first ${f1(first.p50)}/${f1(first.p99)} ms (${first.rows} rows); ` +
        `after ${depth * PER_PAGE} rows ${f1(deep.p50)}/${f1(deep.p99)} ms`,
    );
  }
  agent.destroy();
  return out;
}

/** insertCost times INSERTS single-row Action inserts, each its own transaction; p50/p99 in ms. */
async function insertCost(sql: Sql): Promise<{ p50: number; p99: number }> {
  const ms: number[] = [];
  for (let i = -INSERTS / 10; i < INSERTS; i++) {
    const t0 = performance.now();
    await sql(
      `INSERT INTO actions ("when", action, path, source, destination, display, ip, user_id, username, interface, failure_type, targets)
       VALUES ($1, 'create', $2, '', '', '', '10.0.0.1', 7, 'user7', 'sftp', '', '[]')`,
      [Date.now(), `users/u7/p${(i + 10) % 10}/bench-insert-${i}.txt`],
    );
    if (i >= 0) ms.push(performance.now() - t0); // the first tenth warms up
  }
  await sql("DELETE FROM actions WHERE path LIKE 'users/u7/p_/bench-insert-%'");
  return { p50: pct(ms, 50), p99: pct(ms, 99) };
}

const NEW_INDEXES = ['when', 'user', 'path', 'source', 'destination', 'logins'];

/** withOldIndexes swaps migration 0008's indexes for the two before it, runs f, and swaps back. */
async function withOldIndexes<T>(sql: Sql, kind: string, f: () => Promise<T>): Promise<T> {
  const defs = new Map<string, string>();
  for (const name of NEW_INDEXES) {
    const [row] =
      kind === 'postgres'
        ? await sql('SELECT indexdef AS def FROM pg_indexes WHERE indexname = $1', [`idx_actions_${name}`])
        : await sql("SELECT sql AS def FROM sqlite_master WHERE type = 'index' AND name = $1", [
            `idx_actions_${name}`,
          ]);
    defs.set(name, String(row!.def));
    await sql(`DROP INDEX idx_actions_${name}`);
  }
  await sql('CREATE INDEX bench_old_when ON actions ("when")');
  await sql('CREATE INDEX bench_old_user ON actions (user_id, "when")');
  try {
    return await f();
  } finally {
    await sql('DROP INDEX bench_old_when');
    await sql('DROP INDEX bench_old_user');
    for (const def of defs.values()) await sql(def);
  }
}

/**
 * plans explains the queries history.ts sends for the first page of each listing (and the keyset
 * condition of a deep one), and names the index or scan each uses.
 */
async function plans(kind: string, sql: Sql): Promise<string[]> {
  const pgsql = kind === 'postgres';
  const c = (col: string) => (pgsql ? `a.${col} COLLATE "C"` : `a.${col}`);
  const test = (t: (col: string) => string[]) =>
    `(${[
      ...t(c('path')),
      ...t(c('source')).map((x) => `a.source <> '' AND ${x}`),
      ...t(c('destination')).map((x) => `a.destination <> '' AND a.destination <> a.path AND ${x}`),
    ]
      .map((x) => `(${x})`)
      .join(' OR ')})`;
  const floor = Date.now() - DAY_MS;
  const [{ newest }] = (await sql('SELECT MAX(id) AS newest FROM actions')) as [{ newest: number }];
  const boundary = (offset: number) =>
    sql(
      `SELECT "when" AS w, id FROM actions WHERE "when" > ${floor} ORDER BY "when" DESC, id DESC LIMIT 1 OFFSET ${offset}`,
    );
  const [{ w, id }] = ((await boundary(5000))[0] ? await boundary(5000) : await boundary(0)) as [
    { w: number; id: number },
  ];
  const [file] = await sql("SELECT path FROM actions WHERE path LIKE 'users/u1/f%' ORDER BY id DESC LIMIT 1");
  const filePath = String(file?.path ?? 'users/u1/f1.txt');
  const where: [string, string][] = [
    ['site', 'TRUE'],
    ['logins', "a.action IN ('login', 'failedlogin')"],
    ['user', 'a.user_id = 1'],
    [
      'folder users/u1',
      test((col) => [`${col} = 'users/u1'`, `${col} >= 'users/u1/' AND ${col} < 'users/u10'`]),
    ],
    [
      'folder shared/team3/p4',
      test((col) => [
        `${col} = 'shared/team3/p4'`,
        `${col} >= 'shared/team3/p4/' AND ${col} < 'shared/team3/p40'`,
      ]),
    ],
    ['file', test((col) => [`${col} = '${filePath}'`])],
  ];
  const out: string[] = [];
  for (const [name, cond] of where) {
    // A folder reads the newest 5,000 of the window in time order (bounded), then the older ones
    // by its path indexes, ordered by `+ 0` (history.ts, `sparse`): both are explained.
    const folder = name.startsWith('folder');
    for (const deep of [false, true]) {
      const seek = deep ? ` AND ("a"."when", "a"."id") ${folder ? '<=' : '<'} (${w}, ${id})` : '';
      const bound = folder && !deep ? ` AND ("a"."when", "a"."id") > (${w}, ${id})` : '';
      const plus = folder && deep ? ' + 0' : '';
      // On SQLite the older query names when and id with `+ 0` everywhere (history.ts).
      const [aw, ai] = plus && !pgsql ? ['"a"."when" + 0', '"a"."id" + 0'] : ['"a"."when"', '"a"."id"'];
      const seekTerm = deep ? ` AND (${aw}, ${ai}) <= (${w}, ${id})` : '';
      const q =
        `SELECT * FROM actions a WHERE ${aw} > ${floor} AND ${ai} <= ${newest} AND ${cond}${folder ? seekTerm : seek}${bound}` +
        ` ORDER BY "a"."when"${plus} DESC, "a"."id"${plus} DESC LIMIT ${PER_PAGE + 1}`;
      const rows = await sql(
        pgsql ? `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) ${q}` : `EXPLAIN QUERY PLAN ${q}`,
      );
      const lines = rows.map((r) => String(pgsql ? r['QUERY PLAN'] : r.detail));
      const what = folder
        ? deep
          ? ', older than the newest 5,000 (path indexes)'
          : ', the newest 5,000 (time order)'
        : deep
          ? ', deep (keyset)'
          : ', first page';
      out.push(`${name}${what}:`, ...lines.map((l) => `    ${l}`));
    }
  }
  return out;
}

async function run(db: string): Promise<{ measures: Measure[]; inserts: string[]; plans: string[] }> {
  const { child, info } = await startGateway([], [], {
    SVC_TEST_DATABASE_URL: db === 'postgres' ? PG_URL : '',
  });
  cleanups.push(() => stopChild(child));
  const conn = connect(info);
  cleanups.push(conn.close);
  const measures: Measure[] = [];
  const inserts: string[] = [];
  let explained: string[] = [];
  for (const [i, size] of SIZES.entries()) {
    await conn.sql('DELETE FROM actions');
    const ms = await seedActions(conn.target, size);
    console.log(`${db}: seeded ${size} Actions in ${f1(ms / 1000)} s`);
    inserts.push(`| ${db} | ${size.toLocaleString('en')} | seeded in ${f1(ms / 1000)} s | |`);
    measures.push(...(await measure(db, size, info, conn.sql)));
    const after = await insertCost(conn.sql);
    inserts.push(
      `| ${db} | ${size.toLocaleString('en')} | ${f1(after.p50 * 1000)} µs / ${f1(after.p99 * 1000)} µs | with 0008's indexes |`,
    );
    if (i === 0) {
      const before = await withOldIndexes(conn.sql, db, () => insertCost(conn.sql));
      inserts.push(
        `| ${db} | ${size.toLocaleString('en')} | ${f1(before.p50 * 1000)} µs / ${f1(before.p99 * 1000)} µs | before 0008 (when), (user_id, when) |`,
      );
      const again = await insertCost(conn.sql);
      inserts.push(
        `| ${db} | ${size.toLocaleString('en')} | ${f1(again.p50 * 1000)} µs / ${f1(again.p99 * 1000)} µs | with 0008's indexes, again |`,
      );
    }
    if (i === SIZES.length - 1) explained = await plans(db, conn.sql);
  }
  await conn.close();
  await stopChild(child);
  return { measures, inserts, plans: explained };
}

const started = performance.now();
const all: Measure[] = [];
const inserts: string[] = [];
const planText: string[] = [];
const ms = (x: { p50: number; p99: number }) => `${f1(x.p50)} / ${f1(x.p99)}`;
/** write writes what was measured so far to test/bench/results-history.md. */
function write(): void {
  const text = [
    `# History at scale (npm run bench:history), ${new Date().toISOString()}, ${process.version}, total ${Math.round((performance.now() - started) / 1000)} s`,
    '',
    `Each endpoint asked by the site-wide key over HTTPS (keep-alive), per_page=${PER_PAGE}, ${REQUESTS} times one after another; ` +
      `"deep" is the page after following X-Svc-Cursor-Next the rows given (up to ${DEEP_PAGES - 1} pages). ` +
      'Seeded by test/bench/seed-actions.ts over 90 days, denser toward now: about 10.5% of the Actions fall in the 24 hours the endpoints show.',
    '',
    '| database | Actions | endpoint | first page p50 / p99 ms | rows | deep page p50 / p99 ms | deep after rows |',
    '|---|---:|---|---:|---:|---:|---:|',
    ...all.map(
      (m) =>
        `| ${m.db} | ${m.size.toLocaleString('en')} | ${m.endpoint} | ${ms(m.first)} | ${m.first.rows} | ${ms(m.deep)} | ${m.deep.depth} |`,
    ),
    '',
    `Recording one Action: one INSERT of an Action row in its own transaction, ${INSERTS} times (p50 / p99)`,
    '',
    '| database | Actions | p50 / p99 | indexes |',
    '|---|---:|---:|---|',
    ...inserts,
    '',
    '## Plans (first page, and a deep page by keyset 5,000 rows in)',
    '',
    ...planText,
  ].join('\n');
  writeFileSync('test/bench/results-history.md', `${text}\n`);
  console.log(text);
}
try {
  for (const db of DATABASES) {
    const r = await run(db);
    all.push(...r.measures);
    inserts.push(...r.inserts);
    planText.push(
      `### ${db}, ${SIZES[SIZES.length - 1]!.toLocaleString('en')} Actions`,
      '',
      '```',
      ...r.plans,
      '```',
      '',
    );
    write();
  }
} finally {
  await runCleanups();
}
