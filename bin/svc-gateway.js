#!/usr/bin/env node
// The svc-gateway command. The gateway is TypeScript run through tsx's loader (no build step).
import { register } from 'tsx/esm/api';

register();
await import('../src/cli.ts');
