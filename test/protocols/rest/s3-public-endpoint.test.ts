/**
 * SVC_S3_PUBLIC_ENDPOINT (issue 16): the gateway reaches its S3-compatible store at one address
 * (storage.s3.endpoint, http://minio:9000 inside Docker) while clients reach it at another. The
 * presigned part URLs of a REST upload (upload_uri) must name the public one and be signed for it:
 * here a TCP relay on another port plays the public address, and curl sends the part through it.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { dbKind, startTestGateway, type TestGateway } from '../../helpers/gateway.ts';
import { startS3, useS3Credentials, type S3TestServer } from '../../helpers/s3.ts';
import { startTcpProxy, type TcpProxy } from '../../helpers/tcp-proxy.ts';
import { API, keyAuth } from './client.ts';
import { md5, type UploadObject } from './files-fixture.ts';

/** curlPut sends a file to a URL with curl as a REST client would, and returns the HTTP status. */
function curlPut(url: string, file: string, headers: Record<string, string>): Promise<string> {
  const args = ['-sS', '-o', '/dev/null', '-w', '%{http_code}', '-X', 'PUT', '--data-binary', `@${file}`];
  for (const [name, value] of Object.entries(headers)) args.push('-H', `${name}: ${value}`);
  return new Promise((resolve, reject) => {
    const child = spawn('curl', [...args, url]);
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.on('error', reject);
    child.on('close', () => resolve(out.trim()));
  });
}

describe(`SVC_S3_PUBLIC_ENDPOINT: presigned part URLs name the public address (${dbKind})`, function () {
  this.timeout(60_000);
  let s3: S3TestServer;
  let relay: TcpProxy;
  let gw: TestGateway;
  let dir: string;
  let restore: () => void = () => undefined;

  before(async () => {
    s3 = await startS3();
    const port = Number(new URL(s3.endpoint).port);
    relay = await startTcpProxy('127.0.0.1', port);
    restore = useS3Credentials(s3);
    gw = await startTestGateway({
      storage: {
        kind: 's3',
        s3: {
          bucket: s3.bucket,
          endpoint: s3.endpoint,
          // Another name and port than the gateway's way there: what a client outside would use.
          public_endpoint: `http://localhost:${relay.port}`,
          region: s3.region,
          force_path_style: true,
        },
      },
    });
    dir = mkdtempSync(path.join(os.tmpdir(), 'svc-s3pub-'));
  });

  after(async () => {
    await gw?.stop();
    await relay?.close();
    await s3?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
    restore();
  });

  it('upload_uri names SVC_S3_PUBLIC_ENDPOINT, and a part sent there lands', async () => {
    const auth = keyAuth(gw.siteKey);
    const start = await gw.request('POST', `${API}/files/public.bin`, {
      headers: auth,
      body: { action: 'put' },
    });
    expect(start.status, start.text).to.equal(200);
    const upload = start.json as UploadObject;
    const uri = new URL(upload.upload_uri);
    expect(uri.host).to.equal(`localhost:${relay.port}`);
    expect(upload.upload_uri).to.not.contain(new URL(s3.endpoint).host);

    // Text, since the test client reads bodies as UTF-8.
    const data = Buffer.from(randomBytes(32 * 1024).toString('hex'));
    const file = path.join(dir, 'part');
    writeFileSync(file, data);
    expect(await curlPut(upload.upload_uri, file, upload.headers)).to.equal('200');
    const end = await gw.request('POST', `${API}/files/public.bin`, {
      headers: auth,
      body: { action: 'end', ref: upload.ref },
    });
    expect(end.status, end.text).to.equal(200);
    expect(end.json.size).to.equal(data.length);
    const entry = await gw.request('GET', `${API}/files/public.bin`, { headers: auth });
    const download = new URL(entry.json.download_uri as string);
    const bytes = await gw.request('GET', `${download.pathname}${download.search}`);
    expect(bytes.status).to.equal(200);
    expect(md5(Buffer.from(bytes.text))).to.equal(md5(data));
    // The same URL's signature is the public host's: sent to the store's own address, it is refused.
    const again = await gw.request('POST', `${API}/files/again.bin`, {
      headers: auth,
      body: { action: 'put' },
    });
    const direct = new URL((again.json as UploadObject).upload_uri);
    direct.host = new URL(s3.endpoint).host;
    expect(await curlPut(direct.toString(), file, upload.headers)).to.equal('403');
  });
});
