/**
 * E-mail notifications (SPEC "Notification", issue 7 item 4). A file created or updated in a
 * Notification's path or below queues a `mail_changes` row for its user in the Action's own unit
 * of work. The user's first pending change opens a window of `notification_batch_seconds`; every
 * change in it shares its `due_at`, and one message at its end lists them all. A background loop
 * on any instance leases a user's due changes (so two instances never mail the same ones), sends
 * the message over SMTP (nodemailer, SVC_SMTP_URL) or, without SMTP, writes it as an .eml file
 * under <data_dir>/mail, then deletes the changes. A user is told only of files they may list.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import nodemailer from 'nodemailer';
import { In, type EntityManager } from 'typeorm';
import { MailChangeEntity, NotificationEntity, UserEntity, type MailChangeRow } from '../../db/entities.ts';
import { rightsOn } from '../access/rights.ts';
import type { CoreContext } from '../context.ts';
import { ancestorsOf, parentOf } from '../paths.ts';
import type { Principal } from '../principal.ts';
import type { RecordedAction } from './hooks.ts';

// A failed send is tried again after this long.
const RETRY_MS = 60_000;

/** Mailer queues file changes for subscribed users and mails each user's batch. */
export class Mailer {
  constructor(private readonly ctx: CoreContext) {}

  /** enqueue queues the change for every user watching the file's folder; returns how many. */
  async enqueue(em: EntityManager, a: RecordedAction): Promise<number> {
    // File writes only: they carry the file's size (folder creation and account actions do not).
    if ((a.action !== 'create' && a.action !== 'update') || a.size === undefined || a.path === '') return 0;
    const subs = await em.findBy(NotificationEntity, { path: In(ancestorsOf(parentOf(a.path))) });
    const userIds = [...new Set(subs.map((s) => s.user_id))];
    if (userIds.length === 0) return 0;
    const users = await em.findBy(UserEntity, { id: In(userIds) });
    const now = new Date();
    let queued = 0;
    for (const user of users) {
      const p: Principal = { user, apiKey: null, sessionDigest: null, interface: 'restapi', ip: '' };
      if (!(await rightsOn(em, p, a.path)).has('list')) continue;
      // The user's open window, if any, else a new one from now.
      const open = await em.findOne(MailChangeEntity, {
        where: { user_id: user.id },
        order: { due_at: 'ASC' },
      });
      const due =
        open?.due_at ?? new Date(now.getTime() + this.ctx.config.events.notification_batch_seconds * 1000);
      await em.insert(MailChangeEntity, {
        user_id: user.id,
        action_id: a.id,
        action: a.action,
        path: a.path,
        when: a.when,
        due_at: due,
        locked_until: null,
        lease: null,
      });
      queued++;
    }
    return queued;
  }

  /** tick mails one user's due batch; true when one was handled (more may wait). */
  async tick(): Promise<boolean> {
    const now = Date.now();
    const token = randomUUID();
    const rows = await this.ctx.db.work(async (em) => {
      const next = await em
        .createQueryBuilder(MailChangeEntity, 'm')
        .where('m.due_at <= :now', { now })
        .andWhere('(m.locked_until IS NULL OR m.locked_until < :now)', { now })
        .orderBy('m.due_at', 'ASC')
        .getOne();
      if (!next) return [];
      // Conditional, so changes another instance claimed meanwhile are not taken over.
      await em
        .createQueryBuilder()
        .update(MailChangeEntity)
        .set({ lease: token, locked_until: new Date(now + RETRY_MS) })
        .where('user_id = :user', { user: next.user_id })
        .andWhere('due_at <= :now', { now })
        .andWhere('(locked_until IS NULL OR locked_until < :now)', { now })
        .execute();
      return em.find(MailChangeEntity, { where: { lease: token }, order: { id: 'ASC' } });
    });
    if (rows.length === 0) return false;
    const userId = rows[0]!.user_id;
    try {
      await this.send(userId, rows);
      await this.ctx.db.work((em) => em.delete(MailChangeEntity, { lease: token }));
    } catch (err) {
      // The lease runs out after RETRY_MS; the batch is sent again then.
      this.ctx.log.warn('notification e-mail not sent; will try again', {
        user_id: userId,
        changes: rows.length,
        error: (err as Error).message ?? String(err),
      });
    }
    return true;
  }

  /** send builds the one message listing a user's changes and hands it to SMTP or an .eml file. */
  private async send(userId: number, rows: MailChangeRow[]): Promise<void> {
    const user = await this.ctx.db.read((em) => em.findOneBy(UserEntity, { id: userId }));
    if (!user || user.email === '') {
      this.ctx.log.info('notification e-mail dropped: the user has no e-mail address', {
        user_id: userId,
        changes: rows.length,
      });
      return;
    }
    const lines = rows.map(
      (r) => `${r.action === 'create' ? 'created' : 'updated'}  /${r.path}  (${r.when.toISOString()})`,
    );
    const message = {
      from: this.ctx.config.smtp.from,
      to: user.email,
      subject: `${rows.length} file${rows.length === 1 ? '' : 's'} changed in your watched folders`,
      text: `Hello ${user.name || user.username},\n\nThese files were created or updated:\n\n${lines.join('\n')}\n`,
    };
    const url = this.ctx.config.smtp.url;
    if (url !== '') {
      const transport = nodemailer.createTransport(url);
      try {
        await transport.sendMail(message);
      } finally {
        transport.close();
      }
      this.ctx.log.info('notification e-mail sent', { user_id: userId, changes: rows.length });
      return;
    }
    const built = await nodemailer.createTransport({ streamTransport: true, buffer: true }).sendMail(message);
    const dir = path.join(this.ctx.config.data_dir, 'mail');
    await mkdir(dir, { recursive: true });
    const file = path.join(
      dir,
      `${new Date().toISOString().replace(/[:.]/g, '-')}-user${userId}-${rows[0]!.id}.eml`,
    );
    await writeFile(file, built.message as Buffer);
    this.ctx.log.info('SMTP is not configured (SVC_SMTP_URL): notification e-mail written as a file', {
      file,
      user_id: userId,
      changes: rows.length,
    });
  }
}
