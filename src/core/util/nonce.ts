import { randomBytes } from 'node:crypto';

/**
 * A fresh random token as base64url: frames a probe's JSON in its stdout (9 bytes: 12 characters) and is the
 * dashboard page's CSP nonce (24 bytes: 32 characters). base64url fits both (CSP's nonce grammar allows `-` and `_`).
 */
export function newNonce(bytes = 9): string {
  return randomBytes(bytes).toString('base64url');
}
