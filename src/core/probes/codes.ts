import { z } from 'zod';

/**
 * Every error code a probe or the resident helper answers with: the mirror of python/kg_common.py ERROR_CODES
 * (test/unit/probeCodes.unit.test.ts keeps the two equal, and checks that python/ raises no code outside them).
 */
export const PROBE_ERROR_CODES = [
  'probe-error',
  'bad-args',
  'usage',
  'not-found',
  'permission-denied',
  'not-regular',
  'unreadable',
  'unreadable-format',
  'corrupt',
  'not-a-checkpoint',
  'no-key',
  'needs-unsafe',
  'no-torch',
  'no-cuda',
  'limit-memory',
  'limit-cpu',
  'limit-output',
  'limit-read',
  'limit-line',
  'limit-depth',
  'limit-items',
  'limit-keys',
  'limit-file-size',
  'bad-request',
  'need-source',
  'cancelled',
  'timeout',
  'killed',
  'crashed',
  'exit',
  'internal',
] as const;

export const probeErrorCodeSchema = z.enum(PROBE_ERROR_CODES);
export type ProbeErrorCode = z.infer<typeof probeErrorCodeSchema>;

/** Names a code had before the list was one (read_file.py answered `denied`). */
const SYNONYMS: Readonly<Record<string, ProbeErrorCode>> = { denied: 'permission-denied' };

/**
 * A code as a probe's envelope carries it, typed: an old synonym becomes its code, an unknown one (a newer or older
 * probe) `probe-error`.
 */
export function probeErrorCode(raw: string): ProbeErrorCode {
  const r = probeErrorCodeSchema.safeParse(SYNONYMS[raw] ?? raw);
  return r.success ? r.data : 'probe-error';
}
