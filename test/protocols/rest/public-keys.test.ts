/**
 * SSH public keys over REST: `GET/POST /public_keys`, `GET/DELETE /public_keys/{id}`; keys
 * validated and stored in OpenSSH format with OpenSSH's fingerprint; users manage their own,
 * site admins anyone's; Actions recorded.
 */
import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fingerprintOf, parsePublicKey } from '../../../src/core/accounts/public-keys.ts';
import { ActionEntity } from '../../../src/db/entities.ts';
import { startTestGateway, type TestGateway } from '../../helpers/gateway.ts';
import { API, createKey, createUser, expectError, keyAuth } from './client.ts';
import { dbOf } from '../../helpers/internals.ts';

describe('REST public keys', () => {
  let gw: TestGateway;
  let dir: string;
  const keys: Record<string, string> = {};

  before(async () => {
    gw = await startTestGateway();
    dir = mkdtempSync(path.join(os.tmpdir(), 'svc-pk-'));
    for (const [name, args] of [
      ['ed25519', ['-t', 'ed25519']],
      ['rsa', ['-t', 'rsa', '-b', '3072']],
      ['ecdsa', ['-t', 'ecdsa', '-b', '256']],
      ['rsa1024', ['-t', 'rsa', '-b', '1024']],
    ] as const) {
      const f = path.join(dir, name);
      execFileSync('ssh-keygen', ['-q', ...args, '-N', '', '-C', `${name}@test`, '-f', f]);
      keys[name] = readFileSync(`${f}.pub`, 'utf8').trim();
    }
  });
  after(async () => {
    await gw.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const as = (key: string) => keyAuth(key);

  it('parses OpenSSH keys and computes the fingerprint ssh-keygen prints', () => {
    for (const name of ['ed25519', 'rsa', 'ecdsa']) {
      const parsed = parsePublicKey(keys[name]!);
      expect(parsed, name).to.not.have.property('problem');
      const fp = execFileSync('ssh-keygen', ['-l', '-f', path.join(dir, `${name}.pub`)])
        .toString()
        .split(' ')[1];
      expect((parsed as { fingerprint: string }).fingerprint, name).to.equal(fp);
    }
    expect(parsePublicKey(keys.rsa1024!)).to.have.property('problem');
    expect(parsePublicKey('ssh-ed25519 AAAA')).to.have.property('problem');
    expect(parsePublicKey('ssh-dss AAAAB3NzaC1kc3M= x')).to.have.property('problem');
    // A blob that names another type than its line says is refused.
    const ed = keys.ed25519!.split(' ')[1]!;
    expect(parsePublicKey(`ssh-rsa ${ed}`)).to.have.property('problem');
    const { publicKey } = generateKeyPairSync('ed25519');
    expect(fingerprintOf(publicKey.export({ format: 'der', type: 'spki' }))).to.match(
      /^SHA256:[A-Za-z0-9+/]{43}$/,
    );
  });

  it('lets a user add, list, show and delete their own keys, with Actions', async () => {
    const user = await createUser(gw);
    const { key } = await createKey(gw, user.id);
    const created = await gw.request('POST', `${API}/public_keys`, {
      headers: as(key),
      body: { title: 'laptop', public_key: keys.ed25519 },
    });
    expect(created.status, created.text).to.equal(201);
    expect(created.json).to.include({ title: 'laptop', user_id: user.id });
    expect(created.json.public_key).to.equal(keys.ed25519);
    expect(created.json.fingerprint).to.match(/^SHA256:/);
    expect(created.json.created_at).to.be.a('string');
    const untitled = await gw.request('POST', `${API}/public_keys`, {
      headers: as(key),
      body: { public_key: keys.rsa },
    });
    expect(untitled.status).to.equal(201);
    expect(untitled.json.title).to.equal('rsa@test');
    const list = await gw.request('GET', `${API}/public_keys`, { headers: as(key) });
    expect(list.status).to.equal(200);
    expect(list.json.map((k: { id: number }) => k.id)).to.deep.equal([created.json.id, untitled.json.id]);
    const one = await gw.request('GET', `${API}/public_keys/${created.json.id}`, { headers: as(key) });
    expect(one.json).to.deep.equal(created.json);
    const dup = await gw.request('POST', `${API}/public_keys`, {
      headers: as(key),
      body: { public_key: keys.ed25519 },
    });
    expectError(dup, 422, 'processing-failure/model-save-error');
    const del = await gw.request('DELETE', `${API}/public_keys/${created.json.id}`, { headers: as(key) });
    expect(del.status).to.equal(200);
    expectError(
      await gw.request('GET', `${API}/public_keys/${created.json.id}`, { headers: as(key) }),
      404,
      'not-found/public-key-not-found',
    );
    const acts = await dbOf(gw.core).read((em) => em.find(ActionEntity, { where: { user_id: user.id } }));
    expect(acts.map((a) => a.action)).to.include.members(['public_key_create', 'public_key_destroy']);
  });

  it('refuses invalid keys and other users’ keys; site admins manage anyone’s', async () => {
    const alice = await createUser(gw);
    const bob = await createUser(gw);
    const aliceKey = (await createKey(gw, alice.id)).key;
    for (const bad of ['not a key', keys.rsa1024, 'ssh-ed25519 !!!!']) {
      const r = await gw.request('POST', `${API}/public_keys`, {
        headers: as(aliceKey),
        body: { public_key: bad },
      });
      expectError(r, 422, 'processing-failure/model-save-error');
    }
    const forBob = await gw.request('POST', `${API}/public_keys`, {
      headers: keyAuth(gw.siteKey),
      body: { user_id: bob.id, public_key: keys.ecdsa },
    });
    expect(forBob.status, forBob.text).to.equal(201);
    expect(forBob.json.user_id).to.equal(bob.id);
    expectError(
      await gw.request('GET', `${API}/public_keys/${forBob.json.id}`, { headers: as(aliceKey) }),
      404,
      'not-found/public-key-not-found',
    );
    expectError(
      await gw.request('DELETE', `${API}/public_keys/${forBob.json.id}`, { headers: as(aliceKey) }),
      404,
      'not-found/public-key-not-found',
    );
    expectError(
      await gw.request('POST', `${API}/public_keys`, {
        headers: as(aliceKey),
        body: { user_id: bob.id, public_key: keys.ed25519 },
      }),
      403,
      'not-authorized/user-id-without-site-admin',
    );
    const bobs = await gw.request('GET', `${API}/public_keys?user_id=${bob.id}`, {
      headers: keyAuth(gw.siteKey),
    });
    expect(bobs.json).to.have.length(1);
  });
});
