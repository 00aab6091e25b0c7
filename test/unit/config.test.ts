import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../src/config.ts';

const failure = (env: NodeJS.ProcessEnv): string => {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).to.be.instanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('loadConfig accepted a wrong value');
};

describe('config', () => {
  it('serves DESIGN.md defaults with no file and no environment', () => {
    const c = loadConfig({});
    expect(c.ports).to.deep.include({ https: 8443, webdav: 8444, ftp: 2121, ftps: 9990, sftp: 2222 });
    expect(c.ports.ftp_pasv).to.deep.equal({ first: 30000, last: 30099 });
    expect(c.database.url).to.equal('');
    expect(c.storage.kind).to.equal('local');
    expect(c.bind).to.equal('0.0.0.0');
    expect(c.log_level).to.equal('info');
    expect(c.data_dir).to.match(/\/data$/);
  });

  it('lets SVC_* variables override the file, and `off` disable a listener', () => {
    const c = loadConfig({
      SVC_HTTPS_PORT: '9443',
      SVC_FTP_PORT: 'off',
      SVC_DATABASE_URL: 'postgres://u@db/x',
      SVC_S3_FORCE_PATH_STYLE: 'true',
      SVC_SITE_ALLOWED_IPS: '10.0.0.0/8, 2001:db8::/32',
      SVC_TRUSTED_PROXIES: '10.0.0.5,192.0.2.0/24',
    });
    expect(c.ports.https).to.equal(9443);
    expect(c.ports.ftp).to.equal(null);
    expect(c.database.url).to.equal('postgres://u@db/x');
    expect(c.storage.s3.force_path_style).to.equal(true);
    expect(c.site.allowed_ips).to.deep.equal(['10.0.0.0/8', '2001:db8::/32']);
    expect(c.proxy.trusted).to.deep.equal(['10.0.0.5', '192.0.2.0/24']);
  });

  it('stops on a wrong value with a message naming the setting, its variable and what it accepts', () => {
    expect(failure({ SVC_HTTPS_PORT: 'http' }))
      .to.include('ports.https (SVC_HTTPS_PORT)')
      .and.include('0 to 65535, or off');
    expect(failure({ SVC_HTTPS_PORT: '70000' })).to.include('SVC_HTTPS_PORT');
    expect(failure({ SVC_STORAGE: 'ftp' }))
      .to.include('storage.kind (SVC_STORAGE)')
      .and.include('"local"|"s3"');
    expect(failure({ SVC_DATABASE_URL: 'mysql://x' }))
      .to.include('SVC_DATABASE_URL')
      .and.include('postgres://');
    expect(failure({ SVC_FTP_PASV_PORTS: '3000' }))
      .to.include('SVC_FTP_PASV_PORTS')
      .and.include('first-last');
    expect(failure({ SVC_FTP_PASV_PORTS: '3100-3000' })).to.include('SVC_FTP_PASV_PORTS');
    expect(failure({ SVC_SITE_ALLOWED_IPS: '10.0.0.0/8,not-an-ip' }))
      .to.include('site.allowed_ips')
      .and.include('CIDR');
    expect(failure({ SVC_TRUSTED_PROXIES: 'haproxy.internal' }))
      .to.include('proxy.trusted')
      .and.include('SVC_TRUSTED_PROXIES');
    expect(failure({ SVC_BIND: 'everywhere' })).to.include('bind (SVC_BIND)');
    expect(failure({ SVC_LOG_LEVEL: 'loud' })).to.include('log_level (SVC_LOG_LEVEL)');
    // README promises a change on another instance applies within at most 5 s.
    expect(failure({ SVC_CREDENTIAL_CACHE_SECONDS: '6' })).to.include(
      'accounts.credential_cache_seconds (SVC_CREDENTIAL_CACHE_SECONDS)',
    );
    expect(failure({ SVC_WEBHOOKS: '{"url": "http://x"' })).to.include('SVC_WEBHOOKS: not a JSON array');
    expect(failure({ SVC_WEBHOOKS: '[{"url": "ftp://hooks.example.com/"}]' }))
      .to.include('SVC_WEBHOOKS')
      .and.include('an http(s) URL');
    expect(failure({ SVC_WEBHOOKS: '[{"url": "https://h.example.com/", "actions": ["craete"]}]' }))
      .to.include('SVC_WEBHOOKS')
      .and.include('"create"');
    expect(
      failure({ SVC_WEBHOOKS: '[{"url": "https://h.example.com/", "headers": {"Bad Name": "x"}}]' }),
    ).to.include('HTTP tokens');
    expect(
      failure({ SVC_WEBHOOKS: '[{"url": "https://h.example.com/", "headers": {"X-A": "a\\r\\nX-B: b"}}]' }),
    ).to.include('one line');
  });

  it('reads an operator file named by SVC_CONFIG, under the environment', async () => {
    const { mkdtempSync, writeFileSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const dir = mkdtempSync(`${tmpdir()}/svc-config-`);
    writeFileSync(`${dir}/prod.yaml`, 'ports:\n  https: 443\nlockout:\n  max_failures: 3\n');
    const c = loadConfig({ SVC_CONFIG: `${dir}/prod.yaml`, SVC_HTTPS_PORT: '8000' });
    expect(c.lockout.max_failures).to.equal(3);
    expect(c.ports.https).to.equal(8000);
    expect(c.ports.sftp).to.equal(2222);
    writeFileSync(`${dir}/bad.yaml`, 'ports: [1, 2');
    expect(failure({ SVC_CONFIG: `${dir}/bad.yaml` })).to.include('bad.yaml');
    expect(failure({ SVC_CONFIG: `${dir}/missing.yaml` })).to.include('does not exist');
  });

  it('refuses a key the settings do not have, naming it and where it came from', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-config-'));
    try {
      const file = path.join(dir, 'site.yaml');
      writeFileSync(file, 'ports:\n  htps: 9443\nloglevel: debug\n');
      const message = failure({ SVC_CONFIG: file });
      expect(message).to.include(
        `unknown setting ports.htps in config file ${file} (SVC_CONFIG): see config/default.yaml`,
      );
      expect(message).to.include(`unknown setting loglevel in config file ${file} (SVC_CONFIG)`);
      expect(failure({ SVC_WEBHOOKS: '[{"url": "https://example.com/h", "methd": "POST"}]' })).to.include(
        'unknown setting webhooks.0.methd in SVC_WEBHOOKS',
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
