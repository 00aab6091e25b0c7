/** The Connections admin page (issue 15). Not built yet: this placeholder only names the page. */
import type { Me } from '../api.ts';

export function ConnectionsPage(_props: { me: Me }) {
  return (
    <main class="admin">
      <h1>Connections</h1>
    </main>
  );
}
