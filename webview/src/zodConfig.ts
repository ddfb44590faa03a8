// Imported first by main.ts, before any schema exists: zod compiles object parsers with `new Function` unless told
// not to, and the dashboard's CSP has no 'unsafe-eval' (the attempt alone is reported as a CSP violation).
import * as z from 'zod';

z.config({ jitless: true });
