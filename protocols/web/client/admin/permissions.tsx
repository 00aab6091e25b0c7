/** The Permissions admin page (issue 15). Not built yet: this placeholder only names the page. */
import type { Me } from '../api.ts';

export function PermissionsPage(_props: { me: Me }) {
  return (
    <main class="admin">
      <h1>Permissions</h1>
    </main>
  );
}
