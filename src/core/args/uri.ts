import { z } from 'zod';
import { KnownGoodError } from '../errors';
import { defineDocUri, type UriParts } from '../util/docUri';
import { checkpointLabel } from './render';

/**
 * The `knownGood:` documents: the args of one checkpoint, or the changed args of a pair. A pure codec (no vscode):
 * the adapter passes the parts to `vscode.Uri.from` and back.
 *
 * The query carries the whole spec as base64url JSON (`d=`), so any path (spaces, quotes, `#`, `?`, `%`, newlines, any
 * Unicode) survives every encoding VS Code applies to a URI string. The path is only for people (the tab title and
 * the language mode come from it) and is never decoded.
 */
export const ARGS_SCHEME = 'knownGood';

/**
 * `args`: one checkpoint's args; `changed`: the changed-only text of a pair; `left`/`right`: one side of the args
 * diff editor (`other` is the other side), whose header is the same on both sides so the diff shows only args.
 */
export type ArgsView = 'args' | 'changed' | 'left' | 'right';

/** One checkpoint on one host. */
export interface ArgsRef {
  hostId: string;
  path: string;
  /** The name people know it by (`step_600` for `step_600/checkpoint.pt`); default from the path. */
  label?: string;
}

export interface ArgsUriSpec extends ArgsRef {
  view: ArgsView;
  /** For `changed`: the other side (this one is B, `other` is A: "changed from other to this"). */
  other?: ArgsRef;
}

export type { UriParts };

const VERSION = 1;

const refSchema = z.object({ hostId: z.string(), path: z.string(), label: z.string().optional() });
const argsUriSpecSchema: z.ZodType<ArgsUriSpec> = refSchema.extend({
  view: z.enum(['args', 'changed', 'left', 'right']),
  other: refSchema.optional(),
});

/** One readable line for the tab title: control characters and slashes would break it, so they become `?`. */
function displayName(ref: ArgsRef | undefined): string {
  const text = ref ? (ref.label ?? checkpointLabel(ref.path)) : '';
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u001f\u007f/\\]/g, '?') || 'checkpoint';
}

/** Why a decoded query is not an args document (the message of the URI's error). */
function why(text: string): KnownGoodError {
  return new KnownGoodError('internal', text);
}

const argsDocUri = defineDocUri<ArgsUriSpec>(ARGS_SCHEME, {
  what: 'args document',
  schema: argsUriSpecSchema,
  encode(spec) {
    const doc: Record<string, unknown> = { v: VERSION, h: spec.hostId, p: spec.path, w: spec.view };
    if (spec.label !== undefined) doc['l'] = spec.label;
    if (spec.other)
      doc['o'] = [spec.other.hostId, spec.other.path, ...(spec.other.label !== undefined ? [spec.other.label] : [])];
    const name = displayName(spec);
    const path =
      spec.view === 'changed' ? `/${displayName(spec.other)} ↔ ${name} changed args.txt` : `/${name} args.jsonc`;
    return { path, fields: { d: Buffer.from(JSON.stringify(doc), 'utf8').toString('base64url') } };
  },
  decode(fields, _path, query) {
    // `d=<base64url JSON>`; before, the whole query was the JSON (documents VS Code restores from then still open)
    const data = fields.get('d') ?? query;
    let doc: unknown;
    try {
      doc = JSON.parse(Buffer.from(data, 'base64url').toString('utf8'));
    } catch {
      throw why('query is not base64url JSON');
    }
    if (typeof doc !== 'object' || doc === null) throw why('query is not an object');
    const d = doc as Record<string, unknown>;
    if (d['v'] !== VERSION) throw why(`version ${String(d['v'])}`);
    const { h, p, w, o, l } = d;
    if (typeof h !== 'string' || typeof p !== 'string') throw why('host or path missing');
    if (w !== 'args' && w !== 'changed' && w !== 'left' && w !== 'right') throw why(`view ${String(w)}`);
    if (l !== undefined && typeof l !== 'string') throw why('label');
    const spec: ArgsUriSpec = { hostId: h, path: p, view: w, ...(l !== undefined ? { label: l } : {}) };
    if (o !== undefined) {
      if (!Array.isArray(o) || (o.length !== 2 && o.length !== 3) || !o.every((x) => typeof x === 'string')) {
        throw why('other side');
      }
      const [oh, op, ol] = o;
      spec.other = { hostId: oh!, path: op!, ...(ol !== undefined ? { label: ol } : {}) };
    }
    if (w !== 'args' && !spec.other) throw why(`${w} view without the other side`);
    return spec;
  },
});

export function toArgsUri(spec: ArgsUriSpec): UriParts {
  if (spec.view !== 'args' && !spec.other)
    throw new KnownGoodError('settings', `a ${spec.view}-args document needs two checkpoints`);
  return argsDocUri.to(spec);
}

/** The args document a URI names; a KnownGoodError `internal` saying why when it is not one. */
export function fromArgsUri(uri: Pick<UriParts, 'scheme' | 'query'>): ArgsUriSpec {
  return argsDocUri.read({ path: '', ...uri });
}

/** The same checkpoint (host and path). */
export function sameRef(a: ArgsRef, b: ArgsRef): boolean {
  return a.hostId === b.hostId && a.path === b.path;
}
