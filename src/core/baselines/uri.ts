import { z } from 'zod';
import { defineDocUri, docFileName } from '../util/docUri';

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

const envDocSchema = z.discriminatedUnion('view', [
  /** One snapshot on its own: canonical text, volatile values apart at the end. */
  z.object({ view: z.literal('open'), ref: refSchema, name: z.string() }),
  /** One side of a diff: the drift summary (the same on both sides), then the canonical text. */
  z.object({
    view: z.literal('diff'),
    side: z.enum(['left', 'right']),
    left: refSchema,
    right: refSchema,
    name: z.string(),
  }),
  /** The drift summary as markdown (for the preview). */
  z.object({ view: z.literal('summary'), left: refSchema, right: refSchema, name: z.string() }),
]);
export type EnvDoc = z.infer<typeof envDocSchema>;

/** A reference in the query: `["baseline","<host>","<id>"]` or `["capture","<id>"]`. */
function encodeRef(r: EnvRef): string {
  return r.kind === 'baseline' ? JSON.stringify([r.kind, r.hostId, r.id]) : JSON.stringify([r.kind, r.id]);
}

function decodeRef(text: string | undefined): unknown {
  if (text === undefined) return undefined;
  const arr = z.array(z.string()).parse(JSON.parse(text));
  const [kind, a, b] = arr;
  return kind === 'baseline' ? { kind, hostId: a, id: b } : { kind, id: a };
}

const envUri = defineDocUri<EnvDoc>(ENV_SCHEME, {
  schema: envDocSchema,
  encode(doc) {
    // `[section]` headers and `#` comments: the ini grammar colours them; the summary is markdown.
    const path = `/${docFileName(doc.name, 'environment')}${doc.view === 'summary' ? '.md' : '.ini'}`;
    if (doc.view === 'open') return { path, fields: { view: doc.view, ref: encodeRef(doc.ref) } };
    return {
      path,
      fields: {
        view: doc.view,
        side: doc.view === 'diff' ? doc.side : undefined,
        left: encodeRef(doc.left),
        right: encodeRef(doc.right),
      },
    };
  },
  decode(fields, path) {
    const name = path.replace(/^.*\//, '').replace(/\.(ini|md)$/, '');
    const view = fields.get('view');
    if (view === 'open') return { view, ref: decodeRef(fields.get('ref')), name };
    return {
      view,
      side: fields.get('side'),
      left: decodeRef(fields.get('left')),
      right: decodeRef(fields.get('right')),
      name,
    };
  },
});

export const toEnvUri = (doc: EnvDoc) => envUri.to(doc);
export const fromEnvUri = (uri: Parameters<typeof envUri.parse>[0]) => envUri.parse(uri);
