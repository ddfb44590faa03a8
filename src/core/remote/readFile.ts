import { z } from 'zod';
import { KnownGoodError } from '../errors';
import { defineProbe } from '../probes/probe';
import { defineDocUri, type UriParts } from '../util/docUri';
import { formatBytes } from '../util/format';

export const readFileSchema = z.object({
  path: z.string(),
  size: z.number(),
  mtime: z.number(),
  start: z.number(),
  end: z.number(),
  data: z.string(),
});
export type ReadFileResult = z.infer<typeof readFileSchema>;

/** `python/read_file.py`: the last `maxBytes` of a file (or from the start), as base64. */
export const readFileProbe = defineProbe(
  'read_file',
  readFileSchema,
  (path: { text: string; b64?: string }, options: { maxBytes: number; fromStart?: boolean }) => [
    '--max-bytes',
    String(options.maxBytes),
    ...(options.fromStart ? ['--from-start'] : []),
    '--',
    path.b64 ? `b64:${path.b64}` : path.text,
  ],
);

/**
 * The text of a partly read file: a header line saying how much was left out (and how to get more), then the
 * bytes as UTF-8 starting at the first whole line.
 */
export function renderFileText(r: ReadFileResult, moreHint: string): string {
  let text = Buffer.from(r.data, 'base64').toString('utf8');
  if (r.start === 0 && r.end >= r.size) return text;
  const parts: string[] = [];
  if (r.start > 0) {
    // Drop the partial first line so the view starts at a line boundary.
    const nl = text.indexOf('\n');
    if (nl >= 0) text = text.slice(nl + 1);
    parts.push(`[Known Good] The first ${formatBytes(r.start)} of ${formatBytes(r.size)} are not shown. ${moreHint}`);
  }
  if (r.end < r.size)
    parts.push(`[Known Good] ${formatBytes(r.size - r.end)} after this point are not shown. ${moreHint}`);
  return `${parts.join('\n')}\n${text}`;
}

/** The `knownGood-remote:` URI of a remote file, as plain parts: a pure codec (no vscode). */
const remoteFileRefSchema = z.object({
  hostId: z.string().min(1),
  path: z.string(),
  /** Exact bytes of the path when it is not UTF-8. */
  pathB64: z.string().min(1).optional(),
  maxBytes: z.number().finite().positive(),
});
export type RemoteFileRef = z.infer<typeof remoteFileRefSchema>;

export const REMOTE_FILE_SCHEME = 'knownGood-remote';

const remoteFileUri = defineDocUri<RemoteFileRef>(REMOTE_FILE_SCHEME, {
  schema: remoteFileRefSchema,
  // The path keeps its name so the editor tab and language detection (".jsonl", ".log") work.
  encode: (ref) => ({ path: ref.path, fields: { host: ref.hostId, bytes: String(ref.maxBytes), b64: ref.pathB64 } }),
  decode: (fields, path) => ({
    hostId: fields.get('host'),
    path,
    maxBytes: Number(fields.get('bytes')),
    ...(fields.get('b64') ? { pathB64: fields.get('b64') } : {}),
  }),
});

export function toRemoteFileUri(ref: RemoteFileRef): UriParts {
  return remoteFileUri.to(ref);
}

export function fromRemoteFileUri(uri: { path: string; query: string }): RemoteFileRef {
  const ref = remoteFileUri.parse({ scheme: REMOTE_FILE_SCHEME, path: uri.path, query: uri.query });
  if (!ref) throw new KnownGoodError('internal', `not a Known Good remote file URI: ${uri.query}`);
  return ref;
}
