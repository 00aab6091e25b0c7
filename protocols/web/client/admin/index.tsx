/** The admin pages, one chunk: main.tsx imports this module only when an admin opens a page. */
import type { Me } from '../api.ts';
import type { AdminPageId } from './pages.ts';
import { BillingPage } from './billing.tsx';
import { ConnectionsPage } from './connections.tsx';
import { GroupsPage } from './groups.tsx';
import { HistoryPage } from './history.tsx';
import { NotificationsPage } from './notifications.tsx';
import { PermissionsPage } from './permissions.tsx';
import { SitePage } from './site.tsx';
import { UsersPage } from './users.tsx';
import { WebhooksPage } from './webhooks.tsx';

const components: Record<AdminPageId, (props: { me: Me }) => preact.JSX.Element> = {
  users: UsersPage,
  groups: GroupsPage,
  permissions: PermissionsPage,
  history: HistoryPage,
  webhooks: WebhooksPage,
  notifications: NotificationsPage,
  connections: ConnectionsPage,
  billing: BillingPage,
  site: SitePage,
};

/** AdminPage shows one admin page. */
export function AdminPage(props: { id: AdminPageId; me: Me }) {
  const Page = components[props.id];
  return <Page me={props.me} />;
}
