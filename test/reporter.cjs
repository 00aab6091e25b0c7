// The mocha reporter of `npm test`: mocha's spec output for people, then one closing line for CI,
// `N passed, N failed` (`, N skipped` added when tests are pending). CommonJS because mocha loads
// reporters given by path with require().
'use strict';

const fs = require('node:fs');
const Mocha = require('mocha');

const { Spec } = Mocha.reporters;
const { EVENT_RUN_END } = Mocha.Runner.constants;

/** SummaryReporter is mocha's Spec reporter plus the one machine-readable closing line. */
class SummaryReporter extends Spec {
  constructor(runner, options) {
    super(runner, options);
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
