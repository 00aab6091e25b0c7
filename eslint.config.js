// ESLint flat config: typescript-eslint's recommended rules (not type-aware, to stay fast) plus the
// import boundaries of STYLE.md §2, so a protocol adapter cannot reach past the core's API and the
// core cannot grow protocol code, without anyone having to catch it in review.
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';

/** PROTOCOLS lists the adapters under protocols/; add a new front end here so it is fenced off too. */
const PROTOCOLS = ['rest', 'ftp', 'sftp', 'webdav', 'web'];

/** NODE_GLOBALS are the Node.js globals plain .js files use (TypeScript files are checked by tsc). */
const NODE_GLOBALS = Object.fromEntries(
  [
    'AbortController',
    'AbortSignal',
    'Blob',
    'Buffer',
    'URL',
    'URLSearchParams',
    'TextDecoder',
    'TextEncoder',
    'clearImmediate',
    'clearInterval',
    'clearTimeout',
    'console',
    'fetch',
    'performance',
    'process',
    'queueMicrotask',
    'setImmediate',
    'setInterval',
    'setTimeout',
    'structuredClone',
  ].map((name) => [name, 'readonly']),
);

/** COMMONJS_GLOBALS are the module-scope names a .cjs file gets from Node's CommonJS wrapper. */
const COMMONJS_GLOBALS = {
  require: 'readonly',
  module: 'writable',
  exports: 'writable',
  __dirname: 'readonly',
  __filename: 'readonly',
};

/** MOCHA_GLOBALS are the names mocha's BDD interface puts on globalThis for test files. */
const MOCHA_GLOBALS = Object.fromEntries(
  ['describe', 'it', 'before', 'after', 'beforeEach', 'afterEach', 'context', 'specify'].map((name) => [
    name,
    'readonly',
  ]),
);

const UNUSED_VARS_OPTIONS = {
  argsIgnorePattern: '^_',
  varsIgnorePattern: '^_',
  caughtErrorsIgnorePattern: '^_',
  destructuredArrayIgnorePattern: '^_',
};

// Import sources are matched as written (relative imports end in .ts), so the patterns below are
// regular expressions over the specifier rather than resolved paths.

/** PROTOCOL_IMPORT_PATTERNS keep every adapter on the core's public API (STYLE.md §2). */
const PROTOCOL_IMPORT_PATTERNS = [
  {
    regex: '(^|/)src/core/(?!index\\.ts$)',
    message: 'A protocol imports the core only through src/core/index.ts (STYLE.md §2).',
  },
  {
    regex: '(^|/)src/(?!core/|log\\.ts$|config\\.ts$)',
    message:
      'A protocol may import only src/core/index.ts, src/log.ts and src/config.ts from src/ (STYLE.md §2).',
  },
  {
    regex: '^(typeorm|better-sqlite3|pg|bcrypt)(/|$)',
    message: 'Adapters stay thin: no database or password hashing in protocols/, ask the core (DESIGN.md).',
  },
];

/** CORE_IMPORT_PATTERNS keep servers and protocol libraries out of src/core and src/db (STYLE.md §2). */
const CORE_IMPORT_PATTERNS = [
  {
    regex: '^(node:)?(net|tls|http|https|http2)$',
    message:
      'The core opens no listeners and speaks no protocol; that belongs in protocols/<p>/ (STYLE.md §2).',
  },
  {
    regex: '^(koa|ssh2)(/|$)|^@koa/',
    message: 'The core does not import protocol libraries; map core results in protocols/<p>/ (STYLE.md §2).',
  },
  {
    regex: '(^|/)protocols(/|$)',
    message: 'The core never imports an adapter; adapters import the core (STYLE.md §2).',
  },
];

/**
 * crossProtocolPattern forbids a relative import from protocols/<own>/ into another adapter's
 * folder, at any depth (../ftp/x.ts, ../../ftp/x.ts, ../../protocols/ftp/x.ts).
 */
function crossProtocolPattern(own) {
  const others = PROTOCOLS.filter((p) => p !== own).join('|');
  return {
    regex: `^(\\./)?(\\.\\./)+(protocols/)?(${others})(/|$)`,
    message:
      own === 'shared'
        ? 'protocols/shared/ is the kit every adapter imports; it imports no adapter (STYLE.md §10).'
        : `protocols/${own}/ must not import another adapter; share code through the core or protocols/shared/ (STYLE.md §2).`,
  };
}

export default defineConfig(
  { ignores: ['node_modules/', 'data/', '.tmp/', 'coverage/', 'dist/'] },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    // typescript-eslint's variant checks .js files too; the base rule would report everything twice.
    rules: {
      'no-unused-vars': 'off',
      '@typescript-eslint/no-unused-vars': ['error', UNUSED_VARS_OPTIONS],
    },
  },
  {
    files: ['**/*.{js,mjs,cjs}'],
    languageOptions: { globals: NODE_GLOBALS },
  },
  {
    files: ['**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: COMMONJS_GLOBALS },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    files: ['test/**'],
    languageOptions: { globals: MOCHA_GLOBALS },
    // chai's property assertions (`expect(x).to.be.true`) are expressions by design.
    rules: { '@typescript-eslint/no-unused-expressions': 'off' },
  },
  {
    files: ['protocols/**'],
    rules: { 'no-restricted-imports': ['error', { patterns: PROTOCOL_IMPORT_PATTERNS }] },
  },
  // One block per adapter and one for the kit (protocols/shared/, which every adapter may import and
  // which imports none of them): a later block replaces the rule's options, so each repeats the
  // common list.
  [...PROTOCOLS, 'shared'].map((own) => ({
    files: [`protocols/${own}/**`],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [...PROTOCOL_IMPORT_PATTERNS, crossProtocolPattern(own)] },
      ],
    },
  })),
  {
    files: ['src/core/**', 'src/db/**'],
    rules: { 'no-restricted-imports': ['error', { patterns: CORE_IMPORT_PATTERNS }] },
  },
  {
    // The webhook client sends requests with node:http and node:https; it listens on nothing.
    files: ['src/core/events/outgoing.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: CORE_IMPORT_PATTERNS.slice(1) }] },
  },
);
