// The mocha reporter of `npm test`: mocha's spec output for people, then one closing line for CI,
// `N passed, N failed` (`, N skipped` added when tests are pending). CommonJS because mocha loads
// reporters given by path with require().
'use strict';

const fs = require('node:fs');
const Mocha = require('mocha');

const { Spec } = Mocha.reporters;
const { EVENT_RUN_END, EVENT_TEST_END, EVENT_HOOK_END } = Mocha.Runner.constants;
const path = require('node:path');

/** SLOWEST is how many spec files the closing table names, by their time in tests and hooks. */
const SLOWEST = 12;

/** SummaryReporter is mocha's Spec reporter plus the one machine-readable closing line. */
class SummaryReporter extends Spec {
  constructor(runner, options) {
    super(runner, options);
    // Seconds per spec file, so CI's log shows where its time goes (the run has a time budget).
    const seconds = new Map();
    const add = (runnable) => {
      if (!runnable.file || !runnable.duration) return;
      const file = path.relative(process.cwd(), runnable.file);
      seconds.set(file, (seconds.get(file) ?? 0) + runnable.duration / 1000);
    };
    runner.on(EVENT_TEST_END, add);
    runner.on(EVENT_HOOK_END, add);
    runner.once(EVENT_RUN_END, () => {
      const slowest = [...seconds].sort((a, b) => b[1] - a[1]).slice(0, SLOWEST);
      if (slowest.length === 0) return;
      const total = [...seconds.values()].reduce((a, b) => a + b, 0);
      Spec.consoleLog(`  slowest spec files (of ${Math.round(total)} s in tests and hooks):`);
      for (const [file, s] of slowest) Spec.consoleLog(`    ${s.toFixed(0).padStart(5)} s  ${file}`);
      Spec.consoleLog();
    });
    // Registered after Spec's own listener, so the line comes after its epilogue and failure list.
    runner.once(EVENT_RUN_END, () => {
      const passed = this.stats.passes || 0;
      const failed = this.stats.failures || 0;
      const skipped = this.stats.pending || 0;
      const line = `${passed} passed, ${failed} failed` + (skipped > 0 ? `, ${skipped} skipped` : '');
      // test/run.js names this file to learn that the line was printed (mocha can die before it).
      const summaryFile = process.env.SVC_TEST_SUMMARY_FILE;
      if (summaryFile) fs.writeFileSync(summaryFile, JSON.stringify({ passed, failed, skipped }) + '\n');
      Spec.consoleLog(line);
    });
  }
}

SummaryReporter.description = 'spec, then one closing line "N passed, N failed"';

module.exports = SummaryReporter;
