import { z } from 'zod';

/*
 * The read-only documents of environment baselines, addressed by URI (`knownGood-env:`): a pure codec, so the
 * content provider, the commands and the tests agree on one format. A reference names either a stored baseline
 * (host id + baseline id) or a capture of "now" that lives in memory for the session.
 */

export const ENV_SCHEME = 'knownGood-env';

const refSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('baseline'), hostId: z.string().min(1), id: z.string().regex(/^[A-Za-z0-9_-]+$/) }),
  z.object({ kind: z.literal('capture'), id: z.string().regex(/^[A-Za-z0-9_-]+$/) }),
]);
export type EnvRef = z.infer<typeof refSchema>;

export type EnvDoc =
  /** One snapshot on its own: canonical text, volatile values apart at the end. */
  | { view: 'open'; ref: EnvRef; name: string }
  /** One side of a diff: the drift summary (the same on both sides), then the canonical text. */
  | { view: 'diff'; side: 'left' | 'right'; left: EnvRef; right: EnvRef; name: string }
  /** The drift summary as markdown (for the preview). */
  | { view: 'summary'; left: EnvRef; right: EnvRef; name: string };

/** The parts of a URI, as `vscode.Uri.from` takes them (the core does not know vscode). */
export interface UriParts {
  scheme: string;
  authority: string;
  path: string;
  query: string;
}

/** A file name for the tab: readable, no slashes or control characters. */
export function docFileName(name: string): string {
  const clean = name
    // eslint-disable-next-line no-control-regex
    .replace(/[\u0000-\u001f\u007f/\\]+/g, ' ')
    .trim()
    .slice(0, 80);
  return clean || 'environment';
}

function encodeRef(r: EnvRef): string {
  return r.kind === 'baseline' ? JSON.stringify([r.kind, r.hostId, r.id]) : JSON.stringify([r.kind, r.id]);
}

function decodeRef(text: string | null): EnvRef | undefined {
  if (text === null) return undefined;
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return undefined;
  }
  const arr = z.array(z.string()).safeParse(raw);
  if (!arr.success) return undefined;
  const [kind, a, b] = arr.data;
  const obj = kind === 'baseline' ? { kind, hostId: a, id: b } : { kind, id: a };
  const r = refSchema.safeParse(obj);
  return r.success ? r.data : undefined;
}

export function toEnvUri(doc: EnvDoc): UriParts {
  const q = new URLSearchParams();
  q.set('view', doc.view);
  let ext = '.ini'; // `[section]` headers and `#` comments: the ini grammar colours them
  if (doc.view === 'open') q.set('ref', encodeRef(doc.ref));
  else {
    if (doc.view === 'diff') q.set('side', doc.side);
    else ext = '.md';
    q.set('left', encodeRef(doc.left));
    q.set('right', encodeRef(doc.right));
  }
  return { scheme: ENV_SCHEME, authority: '', path: `/${docFileName(doc.name)}${ext}`, query: q.toString() };
}

export function fromEnvUri(uri: Pick<UriParts, 'scheme' | 'path' | 'query'>): EnvDoc | undefined {
  if (uri.scheme !== ENV_SCHEME) return undefined;
  const q = new URLSearchParams(uri.query);
  const base = uri.path.replace(/^.*\//, '');
  const name = base.replace(/\.(ini|md)$/, '');
  const view = q.get('view');
  if (view === 'open') {
    const ref = decodeRef(q.get('ref'));
    return ref ? { view, ref, name } : undefined;
  }
  const left = decodeRef(q.get('left'));
  const right = decodeRef(q.get('right'));
  if (!left || !right) return undefined;
  if (view === 'summary') return { view, left, right, name };
  const side = q.get('side');
  if (view === 'diff' && (side === 'left' || side === 'right')) return { view, side, left, right, name };
  return undefined;
}
