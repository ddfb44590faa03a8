import type { z } from 'zod';

/** A zod error as one line naming each field: `port: Expected number; container.id: Required` (at most five). */
export function describeIssues(error: z.ZodError): string {
  return error.issues
    .slice(0, 5)
    .map((i) => `${i.path.length ? i.path.join('.') : '(root)'}: ${i.message}`)
    .join('; ');
}
