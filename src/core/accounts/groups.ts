/** Groups (SPEC "Group", "Groups"): site admins manage them; membership is shared with users' group_ids. */
import { In, type EntityManager } from 'typeorm';
import { z } from 'zod';
import { GroupEntity, MembershipEntity, UserEntity, type GroupRow } from '../../db/entities.ts';
import { requireSiteAdmin } from '../access/guards.ts';
import { recordAction } from '../actions/record.ts';
import type { CoreContext } from '../context.ts';
import { GatewayError, modelSaveError } from '../errors.ts';
import type { Page, PageRequest } from '../pagination.ts';
import type { Principal } from '../principal.ts';
import { idList, parseFields, text } from '../validation.ts';

/** Group is a group as the API shows it. */
export interface Group {
  id: number;
  name: string;
  notes: string;
  user_ids: string;
}

const fields = {
  name: text(50).pipe(z.string().trim().min(1, { error: "can't be blank" })),
  notes: text(),
  user_ids: idList,
};
/** groupCreateSchema is what POST /groups accepts. */
export const groupCreateSchema = z.object(fields).partial().required({ name: true });
/** groupUpdateSchema is what PUT or PATCH /groups/:id accepts. */
export const groupUpdateSchema = z.object(fields).partial();

/** Groups manages groups and their membership. */
export class Groups {
  constructor(private readonly ctx: CoreContext) {}

  /** list pages through all groups. */
  async list(p: Principal, req: PageRequest): Promise<Page<Group>> {
    requireSiteAdmin(p);
    const w = this.ctx.paginator.window('groups', req);
    const rows = await this.ctx.db.read(async (em) =>
      this.views(
        em,
        await em.find(GroupEntity, { order: { id: 'ASC' }, skip: w.offset, take: w.perPage + 1 }),
      ),
    );
    return this.ctx.paginator.page(w, rows);
  }

  /** get shows one group. */
  async get(p: Principal, id: number): Promise<Group> {
    requireSiteAdmin(p);
    return this.ctx.db.read(async (em) => (await this.views(em, [await this.find(em, id)]))[0]!);
  }

  /** create adds a group with its members. */
  async create(p: Principal, input: unknown): Promise<Group> {
    requireSiteAdmin(p);
    const data = parseFields(groupCreateSchema, input);
    return this.ctx.db.work(async (em) => {
      await this.checkNameFree(em, data.name);
      const row = await em.save(
        GroupEntity,
        em.create(GroupEntity, { name: data.name, notes: data.notes ?? '', created_at: new Date() }),
      );
      if (data.user_ids) await this.setMembers(em, row.id, data.user_ids);
      await recordAction(em, p, {
        action: 'group_create',
        display: `Created group ${row.name}`,
        targets: [{ type: 'group', id: row.id, name: row.name }],
      });
      return (await this.views(em, [row]))[0]!;
    });
  }

  /** update changes the given fields; omitted ones (name, membership) stay as they are. */
  async update(p: Principal, id: number, input: unknown): Promise<Group> {
    requireSiteAdmin(p);
    const data = parseFields(groupUpdateSchema, input);
    return this.ctx.db.work(async (em) => {
      const row = await this.find(em, id);
      if (data.name !== undefined && data.name !== row.name) {
        await this.checkNameFree(em, data.name);
        row.name = data.name;
      }
      if (data.notes !== undefined) row.notes = data.notes;
      await em.save(GroupEntity, row);
      if (data.user_ids !== undefined) await this.setMembers(em, row.id, data.user_ids);
      await recordAction(em, p, {
        action: 'group_update',
        display: `Updated group ${row.name}`,
        targets: [{ type: 'group', id: row.id, name: row.name }],
      });
      return (await this.views(em, [row]))[0]!;
    });
  }

  /** remove deletes a group, its memberships and its permissions. */
  async remove(p: Principal, id: number): Promise<void> {
    requireSiteAdmin(p);
    await this.ctx.db.work(async (em) => {
      const row = await this.find(em, id);
      await em.delete(GroupEntity, { id });
      await recordAction(em, p, {
        action: 'group_destroy',
        display: `Deleted group ${row.name}`,
        targets: [{ type: 'group', id: row.id, name: row.name }],
      });
    });
  }

  private async find(em: EntityManager, id: number): Promise<GroupRow> {
    const row = await em.findOneBy(GroupEntity, { id });
    if (!row) throw new GatewayError('not-found/group-not-found', `Group ${id} not found`);
    return row;
  }

  // Group names are unique so that permissions and the admin UI can name groups unambiguously.
  private async checkNameFree(em: EntityManager, name: string): Promise<void> {
    if (await em.existsBy(GroupEntity, { name })) throw modelSaveError({ name: ['has already been taken'] });
  }

  private async setMembers(em: EntityManager, groupId: number, userIds: number[]): Promise<void> {
    const unique = [...new Set(userIds)];
    const found = unique.length ? await em.findBy(UserEntity, { id: In(unique) }) : [];
    const missing = unique.filter((u) => !found.some((f) => f.id === u));
    if (missing.length) throw modelSaveError({ user_ids: [`has unknown user ids: ${missing.join(', ')}`] });
    await em.delete(MembershipEntity, { group_id: groupId });
    if (unique.length)
      await em.insert(
        MembershipEntity,
        unique.map((user_id) => ({ group_id: groupId, user_id })),
      );
  }

  private async views(em: EntityManager, rows: GroupRow[]): Promise<Group[]> {
    const memberships = rows.length
      ? await em.find(MembershipEntity, {
          where: { group_id: In(rows.map((r) => r.id)) },
          order: { user_id: 'ASC' },
        })
      : [];
    return rows.map((r) => ({
      id: r.id,
      name: r.name,
      notes: r.notes,
      user_ids: memberships
        .filter((m) => m.group_id === r.id)
        .map((m) => m.user_id)
        .join(','),
    }));
  }
}
