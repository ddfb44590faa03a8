/**
 * Every failure the core reports is a KnownGoodError with a `code` the UI can switch on and a message a person can
 * act on (it names the host, and says what to do where there is something to do).
 */
export type ErrorCode =
  | 'unreachable'
  | 'auth-failed'
  | 'host-key-changed'
  | 'host-key-rejected'
  | 'timeout'
  | 'cancelled'
  | 'command-not-found'
  | 'python-not-found'
  | 'container-not-running'
  | 'connection-lost'
  | 'probe-failed'
  | 'bad-output'
  | 'settings'
  /** The person asked for something the command cannot do as invoked ("select two checkpoints first"). */
  | 'usage'
  | 'not-found'
  | 'permission-denied'
  | 'internal';

export class KnownGoodError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly detail?: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'KnownGoodError';
  }
}

export function isKnownGoodError(e: unknown, code?: ErrorCode): e is KnownGoodError {
  return e instanceof KnownGoodError && (code === undefined || e.code === code);
}

/**
 * How the VS Code layer shows a failure, decided by its code alone: `information` for usage mistakes, `silent` for
 * cancels, `connection` (an error with Retry and Show Log) when the host could not be reached or did not answer in
 * time, `error` for the rest.
 */
export type Presentation = 'information' | 'silent' | 'connection' | 'error';

const PRESENTATION: Partial<Record<ErrorCode, Presentation>> = {
  usage: 'information',
  cancelled: 'silent',
  unreachable: 'connection',
  timeout: 'connection',
  'connection-lost': 'connection',
};

export function presentationOf(e: unknown): Presentation {
  return e instanceof KnownGoodError ? (PRESENTATION[e.code] ?? 'error') : 'error';
}

/** A message for any thrown value, without a stack trace. */
export function messageOf(e: unknown): string {
  if (e instanceof Error) return e.message;
  return String(e);
}
