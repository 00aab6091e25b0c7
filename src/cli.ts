/**
 * The `svc-gateway` command: serve (the default), migrate, users, api-keys, billing, uploads, doctor. Exit codes: 0 done,
 * 1 failed, 2 wrong usage. Only this file and main's signal handling end the process.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from './config.ts';
import { createCore, GatewayError, operatorPrincipal } from './core/index.ts';
import { formatCheck, runDoctor } from './doctor.ts';
import { createLogger, flushLogs } from './log.ts';
import { startGateway } from './main.ts';

const usage = `Usage: svc-gateway <command>

Commands:
  serve                                  start every enabled listener (default)
  migrate                                apply pending database migrations and exit
  users list                             list users
  users create --username U --password P [--site-admin]
  users delete <username>                delete a user with their keys, sessions and permissions
  users passwd <username> [--password P] set a password (without --password: read from stdin)
  users unlock <username>                end a lockout after too many failed logins
  api-keys list [--user U]               list the site-wide keys, or a user's keys
  api-keys create --site-wide [--name N] print a new site-wide API key (full permissions)
  api-keys revoke <id>                   delete an API key
  permissions list [--path P] [--user U] [--group G]
  permissions grant --path P (--user U | --group G) --permission L
                                         L: full, readonly, writeonly, previewonly or admin
  permissions revoke <id>                delete a permission
  billing import <file>                  load invoices and payments (JSON array or CSV); idempotent
  uploads pending                        list cut uploads kept for resuming: user, path, bytes, expiry
  doctor                                 check the database, blob store, certificate, public URL,
                                         FTP passive address and clock; exit 1 when a check fails

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

type Core = Awaited<ReturnType<typeof createCore>>;

/** everything reads every page of a core list. */
async function everything<T>(
  list: (req: { per_page: number; cursor?: string }) => Promise<{ items: T[]; next: string | null }>,
): Promise<T[]> {
  const all: T[] = [];
  let cursor: string | undefined;
  do {
    const page = await list({ per_page: 10000, ...(cursor ? { cursor } : {}) });
    all.push(...page.items);
    cursor = page.next ?? undefined;
  } while (cursor);
  return all;
}

/** groupId finds a group by its name (any case), or fails naming it. */
async function groupId(core: Core, name: string): Promise<number> {
  const system = operatorPrincipal();
  const found = (await everything((req) => core.groups.list(system, req))).find(
    (g) => g.name.toLowerCase() === name.toLowerCase(),
  );
  if (!found) throw new GatewayError('not-found/group-not-found', `Group ${name} not found`);
  return found.id;
}

/** readPassword takes the first line of stdin, so a password stays out of `ps` and shell history. */
async function readPassword(): Promise<string> {
  let text = '';
  for await (const chunk of process.stdin) {
    text += String(chunk);
    if (text.includes('\n')) break;
  }
  const line = text.split(/\r?\n/)[0] ?? '';
  if (!line) throw new UsageError('users passwd: give --password or one line on stdin');
  return line;
}

/** UsageError is a command line that cannot be run as written: exit code 2 with the usage. */
class UsageError extends Error {}

/** id reads a positional id. */
function id(value: string | undefined, what: string): number {
  const n = Number(value);
  if (!value || !Number.isInteger(n) || n <= 0) throw new UsageError(`${what}: give the id (a number)`);
  return n;
}

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      username: { type: 'string' },
      password: { type: 'string' },
      name: { type: 'string' },
      user: { type: 'string' },
      group: { type: 'string' },
      path: { type: 'string' },
      permission: { type: 'string' },
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
    case 'doctor': {
      const checks = await runDoctor(loadConfig());
      for (const c of checks) console.log(formatCheck(c));
      return checks.some((c) => c.verdict === 'fail') ? 1 : 0;
    }
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
          for (const u of await everything((req) => core.users.list(system, req)))
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
      if (sub === 'delete' && arg) {
        const user = await withCore(async (core) => {
          const u = await core.users.byUsername(system, arg);
          await core.users.remove(system, u.id);
          return u;
        });
        console.log(`deleted user ${user.id} ${user.username}`);
        return 0;
      }
      if (sub === 'passwd' && arg) {
        const password = values.password ?? (await readPassword());
        const user = await withCore(async (core) => {
          const u = await core.users.byUsername(system, arg);
          return core.users.update(system, u.id, { password });
        });
        console.log(`set the password of user ${user.id} ${user.username}`);
        return 0;
      }
      if (sub === 'unlock' && arg) {
        const user = await withCore(async (core) =>
          core.users.unlock(system, (await core.users.byUsername(system, arg)).id),
        );
        console.log(`unlocked user ${user.id} ${user.username}`);
        return 0;
      }
      break;
    case 'api-keys':
      if (sub === 'list') {
        await withCore(async (core) => {
          const owner = values.user ? (await core.users.byUsername(system, values.user)).id : undefined;
          const keys = await everything((req) =>
            core.apiKeys.list(system, { ...req, ...(owner ? { user_id: owner } : {}) }),
          );
          for (const k of keys) {
            const expires = k.expires_at ? `expires ${k.expires_at.toISOString()}` : 'never expires';
            const used = k.last_use_at ? `last used ${k.last_use_at.toISOString()}` : 'never used';
            console.log(
              `${k.id}\t${k.name}\t${k.descriptive_label}\t${k.permission_set}\t${expires}\t${used}`,
            );
          }
        });
        return 0;
      }
      if (sub === 'create' && values['site-wide']) {
        const key = await withCore((core) => core.apiKeys.createSiteWide(values.name ?? 'site-wide'));
        console.log(key.key);
        return 0;
      }
      if (sub === 'revoke') {
        const keyId = id(arg, 'api-keys revoke');
        await withCore((core) => core.apiKeys.remove(system, keyId));
        console.log(`revoked API key ${keyId}`);
        return 0;
      }
      break;
    case 'permissions':
      if (sub === 'list') {
        await withCore(async (core) => {
          const filter = {
            ...(values.path !== undefined ? { path: values.path } : {}),
            ...(values.user ? { user_id: (await core.users.byUsername(system, values.user)).id } : {}),
            ...(values.group ? { group_id: await groupId(core, values.group) } : {}),
          };
          for (const p of await everything((req) => core.permissions.list(system, { ...req, filter }))) {
            const who = p.user_id !== null ? `user ${p.username}` : `group ${p.group_name}`;
            console.log(`${p.id}\t/${p.path}\t${p.permission}\t${who}`);
          }
        });
        return 0;
      }
      if (
        sub === 'grant' &&
        values.path !== undefined &&
        values.permission &&
        (values.user || values.group)
      ) {
        if (values.user && values.group)
          throw new UsageError('permissions grant: give --user or --group, not both');
        const p = await withCore(async (core) =>
          core.permissions.create(system, {
            path: values.path,
            permission: values.permission,
            ...(values.user ? { username: values.user } : { group_id: await groupId(core, values.group!) }),
          }),
        );
        const who = p.user_id !== null ? `user ${p.username}` : `group ${p.group_name}`;
        console.log(`granted permission ${p.id}: ${p.permission} on /${p.path} to ${who}`);
        return 0;
      }
      if (sub === 'revoke') {
        const permissionId = id(arg, 'permissions revoke');
        await withCore((core) => core.permissions.remove(system, permissionId));
        console.log(`revoked permission ${permissionId}`);
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
    // The log lines before the failure come before its message.
    flushLogs();
    if (err instanceof UsageError) {
      console.error(`svc-gateway: ${err.message}\n\n${usage}`);
      process.exit(2);
    }
    if (err instanceof ConfigError) console.error(`svc-gateway: ${err.message}`);
    else if (err instanceof GatewayError)
      console.error(
        `svc-gateway: ${err.type}: ${err.message}${err.model ? ` (${err.model.errors.join('; ')})` : ''}`,
      );
    else if ((err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS'))
      console.error(`svc-gateway: ${(err as Error).message}\n\n${usage}`);
    // A file that cannot be read (billing import) is named by the system's own message: no stack.
    else if ((err as NodeJS.ErrnoException).syscall) console.error(`svc-gateway: ${(err as Error).message}`);
    else console.error(`svc-gateway: ${(err as Error).stack ?? String(err)}`);
    process.exit(1);
  },
);
