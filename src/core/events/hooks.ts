/**
 * The link from recordAction to the event queues. recordAction only has the caller's
 * EntityManager, so each core registers its sink under its own DataSource: every Action row then
 * enqueues its webhook deliveries and e-mail changes in the same transaction, and a rollback
 * drops them with it. Keyed per DataSource, so several cores in one process (tests) stay apart.
 */
import type { DataSource, EntityManager } from 'typeorm';

/** RecordedAction is an Action just inserted, with the fields events need. */
export interface RecordedAction {
  id: number;
  when: Date;
  action: string;
  path: string;
  source: string;
  destination: string;
  display: string;
  ip: string;
  targets: unknown[];
  user_id: number | null;
  username: string;
  interface: string;
  failure_type: string;
  /** bytes of the file, when the operation knows it (create, update) */
  size?: number;
}

/** ActionSink is called inside the Action's unit of work. */
export type ActionSink = (em: EntityManager, action: RecordedAction) => Promise<void>;

const sinks = new WeakMap<DataSource, ActionSink[]>();

/** addActionSink registers a sink for Actions written through `source`; the result removes it. */
export function addActionSink(source: DataSource, sink: ActionSink): () => void {
  const list = sinks.get(source) ?? [];
  list.push(sink);
  sinks.set(source, list);
  return () => {
    const now = sinks.get(source) ?? [];
    sinks.set(
      source,
      now.filter((s) => s !== sink),
    );
  };
}

/** runActionSinks hands a just-recorded Action to every sink of its DataSource. */
export async function runActionSinks(em: EntityManager, action: RecordedAction): Promise<void> {
  for (const sink of sinks.get(em.connection) ?? []) await sink(em, action);
}
