/**
 * The start-up warning of issue 16: SVC_PUBLIC_URL naming a loopback address (the default) while
 * the listeners bind every address. Signed URLs would then name a machine only the gateway's own
 * clients reach; behind a balancer, SVC_PUBLIC_URL must name the balancer.
 */
import { expect } from 'chai';
import { loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/log.ts';
import { warnLoopbackPublicUrl } from '../../src/main.ts';
import { captureLogger } from '../helpers/logs.ts';

/** warnings runs the check on settings from `env` and returns the warning lines it logged. */
function warnings(env: Record<string, string>): Record<string, unknown>[] {
  // Without its console transport: only the capture sees the lines.
  const log = createLogger('info', { silent: true }).clear();
  const capture = captureLogger(log);
  warnLoopbackPublicUrl(loadConfig(env), log);
  capture.stop();
  return capture.lines.filter((l) => l.level === 'warn');
}

describe('the loopback public URL warning', () => {
  it('warns, naming SVC_PUBLIC_URL, when a loopback public URL meets listeners on every address', () => {
    for (const url of ['https://127.0.0.1:8443', 'https://localhost:8443', 'https://[::1]:8443']) {
      for (const bind of ['0.0.0.0', '::']) {
        const lines = warnings({ SVC_BIND: bind, SVC_PUBLIC_URL: url });
        expect(lines, `${bind} ${url}`).to.have.length(1);
        expect(lines[0]!.message).to.equal(
          'public URL names a loopback address while the listeners bind every address',
        );
        expect(lines[0]!.fix).to.contain('SVC_PUBLIC_URL');
        expect(lines[0]!.public_url).to.equal(url);
      }
    }
  });

  it('is silent for a public name, or for listeners on loopback only', () => {
    expect(warnings({ SVC_BIND: '0.0.0.0', SVC_PUBLIC_URL: 'https://files.example.com:8443' })).to.deep.equal(
      [],
    );
    expect(warnings({ SVC_BIND: '127.0.0.1', SVC_PUBLIC_URL: 'https://127.0.0.1:8443' })).to.deep.equal([]);
  });
});
