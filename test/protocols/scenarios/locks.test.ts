/**
 * Locks belong to the core (DESIGN.md "Core semantics", issue 11 deliverable 3): a WebDAV LOCK
 * (curl) binds every front end. Without the lock token a write, a delete and a move of the locked
 * file fail in each protocol's terms (REST 423 `processing-failure/file-locked`, FTP 450, SFTP a
 * failure status whose message names the lock, WebDAV 423), change nothing and record no Action;
 * with the token in WebDAV's If header they work; after UNLOCK they work from every front end.
 */
import { expect } from 'chai';
import { dbKind } from '../../helpers/gateway.ts';
import { rawSftp, str, u32, u64 } from '../sftp/clients.ts';
import {
  davClient,
  PROTOCOLS,
  Scenario,
  type Account,
  type Outcome,
  type Protocol,
  type Result,
} from './clients.ts';

/**
 * LOCKED is how each protocol must say "locked": the outcome the user sees, and the raw reply.
 * SFTP v3 has no status for a lock, so it is FAILURE, which OpenSSH's sftp prints as "Failure"
 * without the server's message; the message is read with a raw SFTP client (sftpStatuses).
 */
const LOCKED: Record<Protocol, [Outcome, RegExp]> = {
  restapi: ['locked', /^423 .*processing-failure\/file-locked/s],
  ftp: ['locked', /\b450\b/],
  sftp: ['failed', /: Failure\b/],
  dav: ['locked', /^\w+ 423\b/],
};

const SSH_FXP = { OPEN: 3, CLOSE: 4, WRITE: 6, REMOVE: 13, RENAME: 18, STATUS: 101, HANDLE: 102 };
const SSH_FX_FAILURE = 4;

/**
 * sftpStatuses writes, deletes and renames `/doc.txt` over a raw SFTP v3 channel and returns each
 * final status (code and message): what a client that shows the server's message (WinSCP,
 * FileZilla) would show.
 */
async function sftpStatuses(s: Scenario, account: Account): Promise<Record<string, [number, string]>> {
  const raw = await rawSftp(s.fx.gw.ports.sftp!, account.username, account.password);
  let id = 10;
  const status = (p: Buffer): [number, string] => {
    if (p[0] !== SSH_FXP.STATUS) return [-1, `packet type ${p[0]}`];
    const len = p.readUInt32BE(9);
    return [p.readUInt32BE(5), p.subarray(13, 13 + len).toString()];
  };
  const ask = async (type: number, body: Buffer) => {
    raw.send(type, Buffer.concat([u32(++id), body]));
    return raw.next();
  };
  try {
    raw.send(1, u32(3));
    await raw.next();
    const out: Record<string, [number, string]> = {};
    // write: OPEN (WRITE | CREAT | TRUNC), WRITE, CLOSE; the refusal may come at any of them.
    const opened = await ask(SSH_FXP.OPEN, Buffer.concat([str('/doc.txt'), u32(0x02 | 0x08 | 0x10), u32(0)]));
    if (opened[0] === SSH_FXP.HANDLE) {
      const handle = opened.subarray(9, 9 + opened.readUInt32BE(5));
      const written = status(await ask(SSH_FXP.WRITE, Buffer.concat([str(handle), u64(0), str('v2')])));
      const closed = status(await ask(SSH_FXP.CLOSE, str(handle)));
      out.write = written[0] !== 0 ? written : closed;
    } else out.write = status(opened);
    out.delete = status(await ask(SSH_FXP.REMOVE, str('/doc.txt')));
    out.move = status(await ask(SSH_FXP.RENAME, Buffer.concat([str('/doc.txt'), str('/moved.txt')])));
    return out;
  } finally {
    raw.close();
  }
}

describe(`scenario: a WebDAV lock binds every front end (${dbKind})`, function () {
  this.timeout(60_000);
  const s = Scenario.hooks();

  for (const protocol of PROTOCOLS) {
    it(`${protocol}: write, delete and move of a locked file fail without the token, and work after UNLOCK`, async () => {
      const account = await s.account('full');
      const site = (p: string) => `${account.root}/${p}`;
      await s.put(site('doc.txt'), 'v1');
      const dav = davClient(s, account);
      const { token, raw } = await dav.lock('doc.txt');
      expect(token, raw).to.be.a('string');

      const c = s.client(protocol, account);
      const attempts: Record<string, Result> = {
        write: await c.upload('doc.txt', 'v2'),
        delete: await c.remove('doc.txt'),
        move: await c.move('doc.txt', 'moved.txt'),
      };
      const raws = Object.entries(attempts)
        .map(([k, r]) => `${k}: ${r.raw}`)
        .join('\n');
      const [outcome, reply] = LOCKED[protocol];
      const seen = Object.fromEntries(
        Object.entries(attempts).map(([k, r]) => [k, r.outcome === outcome && reply.test(r.raw)]),
      );
      expect(seen, `refused as locked in ${protocol}'s terms?\n${raws}`).to.deep.equal({
        write: true,
        delete: true,
        move: true,
      });
      if (protocol === 'sftp') {
        const statuses = await sftpStatuses(s, account);
        const named = Object.fromEntries(
          Object.entries(statuses).map(([k, [code, message]]) => [
            k,
            code === SSH_FX_FAILURE && /lock/i.test(message),
          ]),
        );
        expect(named, `FAILURE naming the lock? ${JSON.stringify(statuses)}`).to.deep.equal({
          write: true,
          delete: true,
          move: true,
        });
      }
      expect((await s.fx.download(site('doc.txt'))).toString()).to.equal('v1');
      expect(await s.exists(site('moved.txt'))).to.equal(false);
      const refused = (await s.actions({ username: account.username })).filter((a) =>
        ['create', 'update', 'destroy', 'move'].includes(a.action),
      );
      expect(refused, 'no Action for a refused change').to.deep.equal([]);

      expect((await dav.unlock('doc.txt', token!)).outcome).to.equal('ok');
      const write = await c.upload('doc.txt', 'v3');
      expect(write.outcome, write.raw).to.equal('ok');
      const move = await c.move('doc.txt', 'moved.txt');
      expect(move.outcome, move.raw).to.equal('ok');
      const remove = await c.remove('moved.txt');
      expect(remove.outcome, remove.raw).to.equal('ok');
      const done = (await s.actions({ username: account.username }))
        .filter((a) => ['create', 'update', 'destroy', 'move'].includes(a.action))
        .map((a) => [a.action, a.path, a.interface]);
      expect(done).to.deep.equal([
        ['update', site('doc.txt'), protocol],
        ['move', site('moved.txt'), protocol],
        ['destroy', site('moved.txt'), protocol],
      ]);
    });
  }

  it('dav: the lock holder writes and moves with the token in If', async () => {
    const account = await s.account('full');
    const site = (p: string) => `${account.root}/${p}`;
    await s.put(site('doc.txt'), 'v1');
    const { token, raw } = await davClient(s, account).lock('doc.txt');
    expect(token, raw).to.be.a('string');
    const holder = s.client('dav', account, { lockToken: token! });
    const write = await holder.upload('doc.txt', 'v2');
    expect(write.outcome, write.raw).to.equal('ok');
    expect((await s.fx.download(site('doc.txt'))).toString()).to.equal('v2');
    const move = await holder.move('doc.txt', 'moved.txt');
    expect(move.outcome, move.raw).to.equal('ok');
    // RFC 4918 §7.7: a lock stays with its URL; the moved file is not locked, so no token is due.
    const remove = await s.client('dav', account).remove('moved.txt');
    expect(remove.outcome, remove.raw).to.equal('ok');
    expect(await s.exists(site('moved.txt'))).to.equal(false);
  });
});
