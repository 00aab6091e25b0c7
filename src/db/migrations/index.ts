import { Initial1763769600000 } from './0001-initial.ts';
import { Transfers1763856000000 } from './0002-transfers.ts';
import { Webdav1763942400000 } from './0003-webdav.ts';
import { PublicKeys1764028800000 } from './0004-public-keys.ts';
import { Events1764115200000 } from './0005-events.ts';
import { EventFaults1764460800000 } from './0006-event-faults.ts';
import { BlobLeases1764547200000 } from './0007-blob-leases.ts';
import { ActionHistoryIndexes1764633600000 } from './0008-action-history-indexes.ts';
import { ClientLogins1764806400000 } from './0009-client-logins.ts';
import { PathFieldsForm1764892800000 } from './0010-path-fields-form.ts';
import { PendingVersions1764979200000 } from './0011-pending-versions.ts';
import { Bundles1765065600000 } from './0012-bundles.ts';
import { Connections1765152000000 } from './0013-connections.ts';
import { PermissionPathIndex1765238400000 } from './0014-permission-path-index.ts';
import { DavPropertiesPathIndex1765324800000 } from './0015-dav-properties-path-index.ts';
import { FailedLoginIndex1765411200000 } from './0016-failed-login-index.ts';
import { RetentionNotificationIndexes1765497600000 } from './0017-retention-and-notification-indexes.ts';
import { SubtreePathIndexes1765584000000 } from './0018-subtree-path-indexes.ts';

/** migrations lists every schema migration in the order they apply. */
export const migrations = [
  Initial1763769600000,
  Transfers1763856000000,
  Webdav1763942400000,
  PublicKeys1764028800000,
  Events1764115200000,
  EventFaults1764460800000,
  BlobLeases1764547200000,
  ActionHistoryIndexes1764633600000,
  ClientLogins1764806400000,
  PathFieldsForm1764892800000,
  PendingVersions1764979200000,
  Bundles1765065600000,
  Connections1765152000000,
  PermissionPathIndex1765238400000,
  DavPropertiesPathIndex1765324800000,
  FailedLoginIndex1765411200000,
  RetentionNotificationIndexes1765497600000,
  SubtreePathIndexes1765584000000,
];
