/** The Webhooks admin page (issue 15). Not built yet: this placeholder only names the page. */
import type { Me } from '../api.ts';

export function WebhooksPage(_props: { me: Me }) {
  return (
    <main class="admin">
      <h1>Webhooks</h1>
    </main>
  );
}
