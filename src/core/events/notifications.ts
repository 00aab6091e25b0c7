/**
 * Notifications (SPEC "Notification"): a user subscribed to e-mail about files created or updated
 * in a folder and below. Site admins manage anyone's; users manage their own (DESIGN.md).
 */
import { In, type EntityManager, type FindOptionsWhere } from 'typeorm';
import { z } from 'zod';
import { NotificationEntity, UserEntity, type NotificationRow } from '../../db/entities.ts';
import { requireFullKey } from '../access/guards.ts';
import type { CoreContext } from '../context.ts';
import { GatewayError, modelSaveError } from '../errors.ts';
import type { Page, PageRequest } from '../pagination.ts';
import { isSiteAdmin, type Principal } from '../principal.ts';
import { folderPath, int, parseFields, text } from '../validation.ts';

/** Notification is a subscription as the API shows it. */
export interface Notification {
  id: number;
  path: string;
  user_id: number;
  username: string;
}

// SPEC "Notification": path has no leading or trailing slash.
/** notificationCreateSchema is what POST /notifications accepts. */
export const notificationCreateSchema = z.object({
  path: folderPath(5000),
  user_id: int.optional(),
  username: text(50).optional(),
});

/** Notifications manages e-mail subscriptions. */
export class Notifications {
  constructor(private readonly ctx: CoreContext) {}

  /** list shows all subscriptions to site admins, and their own to users. */
  async list(p: Principal, req: PageRequest): Promise<Page<Notification>> {
    requireFullKey(p);
    const w = this.ctx.paginator.window('notifications', req);
    const where: FindOptionsWhere<NotificationRow> = isSiteAdmin(p) ? {} : { user_id: p.user!.id };
    const rows = await this.ctx.db.read(async (em) =>
      this.views(
        em,
        await em.find(NotificationEntity, {
          where,
          order: { id: 'ASC' },
          skip: w.offset,
          take: w.perPage + 1,
        }),
      ),
    );
    return this.ctx.paginator.page(w, rows);
  }

  /** create subscribes a user (the caller when no user is named) to a folder. */
  async create(p: Principal, input: unknown): Promise<Notification> {
    requireFullKey(p);
    const data = parseFields(notificationCreateSchema, input);
    return this.ctx.db.work(async (em) => {
      let userId = data.user_id ?? null;
      if (userId === null && data.username) {
        const user = await em.findOneBy(UserEntity, { username_key: data.username.toLowerCase() });
        if (!user) throw modelSaveError({ username: ['does not name an existing user'] });
        userId = user.id;
      }
      userId ??= p.user?.id ?? null;
      if (userId === null) throw modelSaveError({ user_id: ["can't be blank"] });
      if (!isSiteAdmin(p) && userId !== p.user?.id) {
        throw new GatewayError(
          'not-authorized/cant-act-for-other-user',
          'Only site admins manage notifications of other users',
        );
      }
      if (!(await em.existsBy(UserEntity, { id: userId })))
        throw modelSaveError({ user_id: ['does not name an existing user'] });
      if (await em.existsBy(NotificationEntity, { user_id: userId, path: data.path })) {
        throw modelSaveError({ path: ['already has a notification for this user'] });
      }
      const row = await em.save(
        NotificationEntity,
        em.create(NotificationEntity, { path: data.path, user_id: userId, created_at: new Date() }),
      );
      return (await this.views(em, [row]))[0]!;
    });
  }

  /** remove deletes a subscription. */
  async remove(p: Principal, id: number): Promise<void> {
    requireFullKey(p);
    await this.ctx.db.work(async (em) => {
      const row = await em.findOneBy(NotificationEntity, { id });
      if (!row || (!isSiteAdmin(p) && row.user_id !== p.user?.id)) {
        throw new GatewayError('not-found/notification-not-found', `Notification ${id} not found`);
      }
      await em.delete(NotificationEntity, { id });
    });
  }

  private async views(em: EntityManager, rows: NotificationRow[]): Promise<Notification[]> {
    const ids = [...new Set(rows.map((r) => r.user_id))];
    const users = ids.length ? await em.findBy(UserEntity, { id: In(ids) }) : [];
    return rows.map((r) => ({
      id: r.id,
      path: r.path,
      user_id: r.user_id,
      username: users.find((u) => u.id === r.user_id)?.username ?? '',
    }));
  }
}
