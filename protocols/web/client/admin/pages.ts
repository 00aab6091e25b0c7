/**
 * The admin pages' names and who sees them. The nav reads this small list at once; the pages
 * themselves (./index.tsx) are a chunk of their own, loaded when an admin first opens one.
 */
import type { Me } from '../api.ts';

/** AdminPageId names an admin page; it is also its address (#users). */
export type AdminPageId =
  | 'users'
  | 'groups'
  | 'permissions'
  | 'history'
  | 'webhooks'
  | 'notifications'
  | 'connections'
  | 'billing'
  | 'site';

/** adminPages are the admin pages in nav order; `folderAdmins` pages are open to Folder Admins too. */
export const adminPages: readonly { id: AdminPageId; label: string; folderAdmins: boolean }[] = [
  { id: 'users', label: 'Users', folderAdmins: false },
  { id: 'groups', label: 'Groups', folderAdmins: false },
  { id: 'permissions', label: 'Permissions', folderAdmins: true },
  { id: 'history', label: 'History', folderAdmins: true },
  { id: 'webhooks', label: 'Webhooks', folderAdmins: true },
  { id: 'notifications', label: 'Notifications', folderAdmins: false },
  { id: 'connections', label: 'Connections', folderAdmins: false },
  { id: 'billing', label: 'Billing', folderAdmins: false },
  { id: 'site', label: 'Site', folderAdmins: false },
];

/** visibleAdminPages are the admin pages this person may open (none for a user who administers nothing). */
export function visibleAdminPages(me: Me) {
  if (me.user.site_admin) return adminPages;
  if (me.user.admin_folders.length) return adminPages.filter((p) => p.folderAdmins);
  return [];
}
