// Prints a port free on 127.0.0.1 for TCP and UDP, for the shell scripts
// that start servers of their own (a test PostgreSQL, a conformance mcpd).
// It is e2e/lib/mcpd.mjs's freePort: below the kernel's ephemeral range,
// so no other process's connect() or listen(0) takes it before the server
// binds it (listen(0) and close, as these scripts did, hands out a port
// that every client socket of a parallel lane may draw next).
import { freePort } from './e2e/lib/mcpd.mjs';

process.stdout.write(String(await freePort()));
