/** commands is every FTP command the server answers, by name, from the group files. */
import type { Command } from '../connection.ts';
import { fileCommands } from './files.ts';
import { listingCommands } from './listing.ts';
import { miscCommands } from './misc.ts';
import { navigationCommands } from './navigation.ts';
import { sessionCommands } from './session.ts';
import { transferCommands } from './transfer.ts';

/** commands maps an upper-case command name to its handler. */
export const commands: Readonly<Record<string, Command>> = {
  ...sessionCommands,
  ...navigationCommands,
  ...listingCommands,
  ...transferCommands,
  ...fileCommands,
  ...miscCommands,
};
