/** Groups (SPEC "Group", "Groups"): site admins manage them; membership is shared with users' group_ids. */
import { In, type EntityManager } from 'typeorm';
import { z } from 'zod';
import { GroupEntity, MembershipEntity, UserEntity, type GroupRow, type UserRow } from '../../db/entities.ts';
import { requireSiteAdmin } from '../access/guards.ts';
import { recordAction } from '../actions/record.ts';
import type { CoreContext } from '../context.ts';
import { GatewayError, modelSaveError } from '../errors.ts';
import type { Page, PageRequest } from '../pagination.ts';
import type { Principal } from '../principal.ts';
import { idList, int, parseFields, text } from '../validation.ts';

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
/** groupMemberAddSchema is what POST /groups/:id/members accepts: a user by id or by username. */
export const groupMemberAddSchema = z.object({ user_id: int.optional(), username: text(50).optional() });

/** GroupMember is one member of a group as GET /groups/:id/members shows it (our extension). */
export interface GroupMember {
  user_id: number;
  username: string;
  name: string;
}

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

  /** members pages through a group's members by user id, with their names (our extension). */
  async members(p: Principal, id: number, req: PageRequest): Promise<Page<GroupMember>> {
    requireSiteAdmin(p);
    const w = this.ctx.paginator.window(`group-members-${id}`, req);
    const rows = await this.ctx.db.read(async (em) => {
      await this.find(em, id);
      const page = await em.find(MembershipEntity, {
        where: { group_id: id },
        order: { user_id: 'ASC' },
        skip: w.offset,
        take: w.perPage + 1,
      });
      const ids = page.map((m) => m.user_id);
      const users = ids.length ? await em.findBy(UserEntity, { id: In(ids) }) : [];
      return users
        .sort((a, b) => a.id - b.id)
        .map((u) => ({ user_id: u.id, username: u.username, name: u.name }));
    });
    return this.ctx.paginator.page(w, rows);
  }

  /** addMember adds one user, named by id or username, to a group; a member already in it is a 422. */
  async addMember(p: Principal, id: number, input: unknown): Promise<GroupMember> {
    requireSiteAdmin(p);
    const data = parseFields(groupMemberAddSchema, input);
    return this.ctx.db.work(async (em) => {
      const group = await this.find(em, id);
      let user: UserRow | null = null;
      if (data.user_id !== undefined) {
        user = await em.findOneBy(UserEntity, { id: data.user_id });
        if (!user) throw modelSaveError({ user_id: ['does not name an existing user'] });
      } else if (data.username) {
        user = await em.findOneBy(UserEntity, { username_key: data.username.toLowerCase() });
        if (!user) throw modelSaveError({ username: ['does not name an existing user'] });
      } else throw modelSaveError({ base: ['one of user_id or username is required'] });
      if (await em.existsBy(MembershipEntity, { group_id: id, user_id: user.id }))
        throw modelSaveError({ username: [`${user.username} is already a member of ${group.name}`] });
      await em.insert(MembershipEntity, { group_id: id, user_id: user.id });
      await this.recordMembership(em, p, group, `Added ${user.username} to group ${group.name}`);
      return { user_id: user.id, username: user.username, name: user.name };
    });
  }

  /** removeMember takes one user out of a group; a user not in it is a 404. */
  async removeMember(p: Principal, id: number, userId: number): Promise<void> {
    requireSiteAdmin(p);
    await this.ctx.db.work(async (em) => {
      const group = await this.find(em, id);
      const { affected } = await em.delete(MembershipEntity, { group_id: id, user_id: userId });
      if (!affected)
        throw new GatewayError('not-found/user-not-found', `User ${userId} is not a member of ${group.name}`);
      await this.recordMembership(em, p, group, `Removed user ${userId} from group ${group.name}`);
    });
  }

  private async recordMembership(em: EntityManager, p: Principal, group: GroupRow, display: string) {
    await recordAction(em, p, {
      action: 'group_update',
      display,
      targets: [{ type: 'group', id: group.id, name: group.name }],
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
