/**
 * Effective rights: what one user may do on one path and which grant gives each capability, for
 * the admin pages' "what may this user do here". It explains the evaluation of rights.ts with the
 * same rows and the same level table, so the answer cannot differ from what the checks decide.
 */
import { In, type EntityManager } from 'typeorm';
import { GroupEntity, type PermissionLevel, type UserRow } from '../../db/entities.ts';
import { appliesTo, CAPABILITIES, levelCapabilities, rowsApplyingTo, type Capability } from './rights.ts';

/** Grant is one reason a user has a capability: a permission row (theirs or a group's) or site admin. */
export interface Grant {
  via: 'user' | 'group' | 'site_admin';
  /** the permission row, null for site admin */
  permission_id: number | null;
  /** the folder the row is on ('' = the site root; the path itself or an ancestor) */
  path: string | null;
  permission: PermissionLevel | null;
  group_id: number | null;
  group_name: string | null;
}

/** EffectiveRights is what a user may do on a path, each capability with the grants that give it. */
export interface EffectiveRights {
  user_id: number;
  username: string;
  path: string;
  site_admin: boolean;
  capabilities: { capability: Capability; allowed: boolean; grants: Grant[] }[];
}

/** effectiveRights explains `user`'s rights on the site path `path` (folder path form, '' = root). */
export async function effectiveRights(
  em: EntityManager,
  user: UserRow,
  path: string,
): Promise<EffectiveRights> {
  const base = { user_id: user.id, username: user.username, path, site_admin: user.site_admin };
  if (user.site_admin) {
    const grant: Grant = {
      via: 'site_admin',
      permission_id: null,
      path: null,
      permission: null,
      group_id: null,
      group_name: null,
    };
    return {
      ...base,
      capabilities: CAPABILITIES.map((capability) => ({ capability, allowed: true, grants: [grant] })),
    };
  }
  const rows = appliesTo(await rowsApplyingTo(em, user.id, [path]), path);
  const groupIds = [...new Set(rows.map((r) => r.group_id).filter((g): g is number => g !== null))];
  const groups = groupIds.length ? await em.findBy(GroupEntity, { id: In(groupIds) }) : [];
  const grants = rows.map((r) => ({
    row: r,
    grant: {
      via: r.group_id === null ? 'user' : 'group',
      permission_id: r.id,
      path: r.path,
      permission: r.permission,
      group_id: r.group_id,
      group_name: groups.find((g) => g.id === r.group_id)?.name ?? null,
    } satisfies Grant,
  }));
  return {
    ...base,
    capabilities: CAPABILITIES.map((capability) => {
      const giving = grants.filter((g) => levelCapabilities[g.row.permission].includes(capability));
      return { capability, allowed: giving.length > 0, grants: giving.map((g) => g.grant) };
    }),
  };
}
