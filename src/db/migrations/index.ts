import { Initial1763769600000 } from './0001-initial.ts';
import { Transfers1763856000000 } from './0002-transfers.ts';

/** migrations lists every schema migration in the order they apply. */
export const migrations = [Initial1763769600000, Transfers1763856000000];
