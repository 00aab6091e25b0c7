/**
 * What the activity pages (History, Webhooks, Notifications) share beyond ./kit.tsx: a labelled
 * select, the interfaces and actions a history filter takes, and the date-time inputs' conversion.
 */

/** INTERFACES are the interfaces the gateway records Actions for, as a person names them. */
export const INTERFACES: [string, string][] = [
  ['web', 'Web'],
  ['restapi', 'REST API'],
  ['ftp', 'FTP'],
  ['sftp', 'SFTP'],
  ['dav', 'WebDAV'],
];

/** ACTIONS are the values of filter[action] (SPEC's Action `action`, and the gateway's own). */
export const ACTIONS = [
  'create',
  'read',
  'update',
  'destroy',
  'move',
  'copy',
  'login',
  'failedlogin',
  'user_create',
  'user_update',
  'user_destroy',
  'group_create',
  'group_update',
  'group_destroy',
  'permission_create',
  'permission_destroy',
  'api_key_create',
  'api_key_update',
  'api_key_destroy',
  'public_key_create',
  'public_key_destroy',
  'bundle_create',
  'bundle_update',
  'bundle_destroy',
];

/** SelectField is a labelled <select>: the label is its accessible name. */
export function SelectField(props: {
  label: string;
  value: string;
  onValue: (value: string) => void;
  options: [string, string][];
}) {
  return (
    <label>
      {props.label}
      <select value={props.value} onChange={(e) => props.onValue(e.currentTarget.value)}>
        {props.options.map(([value, text]) => (
          <option key={value} value={value}>
            {text}
          </option>
        ))}
      </select>
    </label>
  );
}

/** localToIso turns a datetime-local input's value (the browser's time zone) into ISO 8601 UTC. */
export function localToIso(value: string): string {
  if (!value) return '';
  const t = new Date(value);
  return Number.isNaN(t.getTime()) ? '' : t.toISOString();
}
