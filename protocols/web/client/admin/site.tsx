/** The Site admin page (issue 15). Not built yet: this placeholder only names the page. */
import type { Me } from '../api.ts';

export function SitePage(_props: { me: Me }) {
  return (
    <main class="admin">
      <h1>Site</h1>
    </main>
  );
}
