/**
 * TLS material for HTTPS, WebDAV and FTPS: the operator's PEM files (SVC_TLS_CERT/SVC_TLS_KEY), or
 * a self-signed certificate generated on first start with the `selfsigned` package and kept in the
 * data dir, so clients that pin it keep working across restarts.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { ConfigError, type Config } from './config.ts';
import type { TlsMaterial } from './core/index.ts';
import type { Logger } from './log.ts';

/** loadTls reads the configured PEM files or generates and keeps a self-signed pair. */
export async function loadTls(config: Config, log: Logger): Promise<TlsMaterial> {
  if (config.tls.cert || config.tls.key) {
    if (!config.tls.cert || !config.tls.key)
      throw new ConfigError('settings tls.cert (SVC_TLS_CERT) and tls.key (SVC_TLS_KEY) go together');
    for (const [key, file] of [
      ['tls.cert (SVC_TLS_CERT)', config.tls.cert],
      ['tls.key (SVC_TLS_KEY)', config.tls.key],
    ] as const) {
      if (!existsSync(file)) throw new ConfigError(`setting ${key}: file ${file} does not exist`);
    }
    return { cert: readFileSync(config.tls.cert, 'utf8'), key: readFileSync(config.tls.key, 'utf8') };
  }
  const dir = path.join(config.data_dir, 'tls');
  const certFile = path.join(dir, 'cert.pem');
  const keyFile = path.join(dir, 'key.pem');
  if (existsSync(certFile) && existsSync(keyFile))
    return { cert: readFileSync(certFile, 'utf8'), key: readFileSync(keyFile, 'utf8') };
  const host = os.hostname();
  const pems = await inWorker([{ name: 'commonName', value: 'localhost' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notAfterDate: new Date(Date.now() + 825 * 24 * 3600 * 1000),
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [
          { type: 2, value: 'localhost' },
          ...(host && host !== 'localhost' ? [{ type: 2 as const, value: host }] : []),
          { type: 7, ip: '127.0.0.1' },
          { type: 7, ip: '::1' },
        ],
      },
    ],
  });
  mkdirSync(dir, { recursive: true });
  writeFileSync(keyFile, pems.private, { mode: 0o600 });
  writeFileSync(certFile, pems.cert);
  log.info('generated a self-signed TLS certificate', { file: certFile, fingerprint: pems.fingerprint });
  return { cert: pems.cert, key: pems.private };
}

type Generate = typeof import('selfsigned').generate;

// selfsigned and the X.509 and ASN.1 packages under it are a few MiB of heap that would stay for
// the process's life after one use (modules are never unloaded): the certificate is made in a
// worker thread that exits, once per data dir. Its code is text (eval), as in checksum.ts, so the
// same file runs under tsx and compiled; the package is resolved here, from this file, as the
// checkpointer resolves its driver.
const GENERATE_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
require(workerData.file)
  .generate(...workerData.args)
  .then((pems) => parentPort.postMessage({ private: pems.private, cert: pems.cert, fingerprint: pems.fingerprint }));
`;

/** inWorker runs selfsigned's generate in a worker thread and gives the PEMs it made. */
function inWorker(
  ...args: Parameters<Generate>
): Promise<Pick<Awaited<ReturnType<Generate>>, 'private' | 'cert' | 'fingerprint'>> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(GENERATE_SOURCE, {
      eval: true,
      workerData: { file: createRequire(import.meta.url).resolve('selfsigned'), args },
    });
    worker.once('message', resolve);
    worker.once('error', reject);
    worker.once('exit', (code) =>
      reject(new Error(`certificate worker exited with code ${code} before answering`)),
    );
  });
}
