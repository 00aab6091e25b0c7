/**
 * One gateway core with its background loops, in a process of its own, for the kill -9 test:
 * `node --import tsx test/unit/events/instance.ts`, settings as JSON in SVC_TEST_CORE_CONFIG. It
 * ends when its stdin closes, so it cannot outlive the test run.
 */
import type { Config } from '../../../src/config.ts';
import { createCore } from '../../../src/core/index.ts';
import { createLogger } from '../../../src/log.ts';

// The test's Config as validated there (not raw settings: the schema's transforms ran once).
const config = JSON.parse(process.env.SVC_TEST_CORE_CONFIG ?? '') as Config;
const core = await createCore(config, createLogger('error', { silent: true }), { migrate: false });
process.stdin.on('end', () => void core.close().finally(() => process.exit(0)));
process.stdin.resume();
