/** The Billing admin page (issue 15). Not built yet: this placeholder only names the page. */
import type { Me } from '../api.ts';

export function BillingPage(_props: { me: Me }) {
  return (
    <main class="admin">
      <h1>Billing</h1>
    </main>
  );
}
