/**
 * The `svc-gateway` command: serve (the default), migrate, users, api-keys, billing, uploads. Exit codes: 0 done,
 * 1 failed, 2 wrong usage. Only this file and main's signal handling end the process.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from './config.ts';
import { createCore, GatewayError, operatorPrincipal } from './core/index.ts';
import { createLogger } from './log.ts';
import { startGateway } from './main.ts';

const usage = `Usage: svc-gateway <command>

Commands:
  serve                                  start every enabled listener (default)
  migrate                                apply pending database migrations and exit
  users list                             list users
  users create --username U --password P [--site-admin]
  api-keys create --site-wide [--name N] print a new site-wide API key (full permissions)
  billing import <file>                  load invoices and payments (JSON array or CSV); idempotent
  uploads pending                        list cut uploads kept for resuming: user, path, bytes, expiry

Settings come from config/default.yaml, the file named by SVC_CONFIG and SVC_* variables.`;

async function serve(): Promise<void> {
  const config = loadConfig();
  const log = createLogger(config.log_level);
  const gateway = await startGateway(config, log);
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info('stopping', { signal });
    gateway.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error('stop failed', { error: String(err) });
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

async function withCore<T>(
  fn: (core: Awaited<ReturnType<typeof createCore>>) => Promise<T>,
  migrate = true,
): Promise<T> {
  const config = loadConfig();
  const core = await createCore(config, createLogger(config.log_level), { migrate });
  try {
    return await fn(core);
  } finally {
    await core.close();
  }
}

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      username: { type: 'string' },
      password: { type: 'string' },
      name: { type: 'string' },
      'site-admin': { type: 'boolean' },
      'site-wide': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [command = 'serve', sub, arg] = positionals;
  if (values.help || command === 'help') {
    console.log(usage);
    return 0;
  }
  const system = operatorPrincipal();
  switch (command) {
    case 'serve':
      await serve();
      return -1;
    case 'migrate': {
      const config = loadConfig();
      const log = createLogger(config.log_level);
      const core = await createCore(config, log);
      await core.close();
      console.log('database is up to date');
      return 0;
    }
    case 'users':
      if (sub === 'list') {
        await withCore(async (core) => {
          const page = await core.users.list(system, { per_page: 10000 });
          for (const u of page.items)
            console.log(`${u.id}\t${u.username}${u.site_admin ? '\t(site admin)' : ''}`);
        });
        return 0;
      }
      if (sub === 'create' && values.username && values.password) {
        const user = await withCore((core) =>
          core.users.create(system, {
            username: values.username,
            password: values.password,
            site_admin: values['site-admin'] ?? false,
          }),
        );
        console.log(`created user ${user.id} ${user.username}`);
        return 0;
      }
      break;
    case 'api-keys':
      if (sub === 'create' && values['site-wide']) {
        const key = await withCore((core) => core.apiKeys.createSiteWide(values.name ?? 'site-wide'));
        console.log(key.key);
        return 0;
      }
      break;
    case 'uploads':
      if (sub === 'pending') {
        await withCore(async (core) => {
          for (const v of await core.files.pendingVersions(system))
            console.log(
              `${v.username}\t/${v.path}\t${v.size}\t${v.interface}\texpires ${v.expires_at.toISOString()}`,
            );
        });
        return 0;
      }
      break;
    case 'billing':
      if (sub === 'import' && arg) {
        const text = readFileSync(arg, 'utf8');
        const r = await withCore(async (core) => core.billing.import(core.billing.parseFile(text)));
        console.log(`imported ${arg}: ${r.created} created, ${r.updated} updated, ${r.unchanged} unchanged`);
        return 0;
      }
      break;
  }
  console.error(usage);
  return 2;
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exit(code);
  },
  (err: unknown) => {
    if (err instanceof ConfigError) console.error(`svc-gateway: ${err.message}`);
    else if (err instanceof GatewayError)
      console.error(
        `svc-gateway: ${err.type}: ${err.message}${err.model ? ` (${err.model.errors.join('; ')})` : ''}`,
      );
    else if ((err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS'))
      console.error(`svc-gateway: ${(err as Error).message}\n\n${usage}`);
    else console.error(`svc-gateway: ${(err as Error).stack ?? String(err)}`);
    process.exit(1);
  },
);
