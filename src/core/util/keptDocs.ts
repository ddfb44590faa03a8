import { createHash } from 'node:crypto';
import { z } from 'zod';
import { defineDocUri, docFileName, type UriParts } from './docUri';

/*
 * Documents Known Good writes for people to read (a commit's diff, two launch records, a restore plan, a bisect
 * report): read-only `knownGood-doc:` documents whose text is kept in the workspace's storage, so that the editors
 * VS Code restores after Reload Window come back with their text (VS Code reopens a virtual document by its URI and
 * asks the provider again) and closing one never asks to save. The URI names the text by the hash of its name and
 * text: the same evidence opened twice is one editor.
 */

export const KEPT_DOC_SCHEME = 'knownGood-doc';

export interface KeptDocRef {
  id: string;
  /** A file name: the tab's title, and its extension the language (`.md`, `.sh`, `.diff`, `.txt`). */
  name: string;
}

const idSchema = z.string().regex(/^[0-9a-f]{20}$/);

const keptDocUri = defineDocUri<KeptDocRef>(KEPT_DOC_SCHEME, {
  what: 'kept document',
  schema: z.object({ id: idSchema, name: z.string().min(1) }),
  encode: (ref) => ({ path: `/${docFileName(ref.name, 'document.txt')}`, fields: { id: ref.id } }),
  decode: (fields, path) => ({ id: fields.get('id'), name: path.replace(/^.*\//, '') }),
});

export const toKeptDocUri = (ref: KeptDocRef): UriParts => keptDocUri.to(ref);
/** The kept document a URI names; undefined for another scheme or a query this codec did not write. */
export const fromKeptDocUri = (uri: Pick<UriParts, 'scheme' | 'path' | 'query'>): KeptDocRef | undefined =>
  keptDocUri.parse(uri);

/** The id of a document: its name and text, hashed (20 hex). */
export function keptDocId(name: string, text: string): string {
  return createHash('sha256').update(name).update('\0').update(text).digest('hex').slice(0, 20);
}

/** Where the texts are kept: VS Code's `Memento` (ExtensionContext.workspaceState), or a test's map. */
export interface KeptStorage {
  get<T>(key: string): T | undefined;
  update(key: string, value: unknown): PromiseLike<void>;
}

export interface KeptLimits {
  /** How many documents are kept, the newest opened. */
  docs: number;
  /** Their text in all (UTF-16 code units, as the storage holds them). */
  chars: number;
}

export const KEPT_LIMITS: KeptLimits = { docs: 50, chars: 8 * 1024 * 1024 };

const KEY = 'knownGood.documents';

const storedSchema = z.object({
  v: z.literal(1),
  /** Oldest first. */
  docs: z.array(z.object({ id: idSchema, name: z.string(), text: z.string() })),
});
type Stored = z.infer<typeof storedSchema>;

/** Said in place of a document that is no longer kept. */
export const GONE_TEXT =
  'This document is no longer kept (newer ones took its place, or it was too large to keep across a reload). ' +
  'Open it again from where it came: the What Changed? report, the bisect, the restore.\n';

/**
 * The kept documents: the newest `limits.docs` of them, at most `limits.chars` of text in all, in the storage; one
 * larger than that is kept for this window only. The storage is read once, at the first use (one window writes its
 * workspace's storage), and written whole at each change.
 */
export class KeptDocuments {
  /** This window's documents, whatever their size (the storage holds the newest that fit). */
  private readonly session = new Map<string, { name: string; text: string }>();
  /** What the storage holds, oldest first. */
  private kept: Stored['docs'] | undefined;
  private written: Promise<void> = Promise.resolve();

  constructor(
    private readonly storage: KeptStorage,
    private readonly limits: KeptLimits = KEPT_LIMITS,
    private readonly onError: (message: string) => void = () => undefined,
  ) {}

  /** Keeps `text` under `name` (again: it becomes the newest) and returns what its URI names. */
  add(name: string, text: string): KeptDocRef {
    const id = keptDocId(name, text);
    this.session.set(id, { name, text });
    const docs = this.stored().filter((d) => d.id !== id);
    docs.push({ id, name, text });
    const keep: Stored['docs'] = [];
    let chars = 0;
    // newest first, until the count or the size is reached; one too large alone is skipped (this window keeps it)
    for (let i = docs.length - 1; i >= 0 && keep.length < this.limits.docs; i--) {
      const size = docs[i]!.text.length + docs[i]!.name.length;
      if (size > this.limits.chars) continue;
      if (chars + size > this.limits.chars) break;
      chars += size;
      keep.unshift(docs[i]!);
    }
    this.kept = keep;
    const value: Stored = { v: 1, docs: this.kept };
    this.written = Promise.resolve(this.storage.update(KEY, value)).then(undefined, (e: unknown) =>
      this.onError(`could not keep "${name}" for after a reload: ${e instanceof Error ? e.message : String(e)}`),
    );
    return { id, name };
  }

  /** The kept text of a document, or undefined when it is gone. */
  get(id: string): { name: string; text: string } | undefined {
    return this.session.get(id) ?? this.stored().find((d) => d.id === id);
  }

  /** The text a document's editor shows: its own, or why it is gone. */
  text(ref: KeptDocRef): string {
    return this.get(ref.id)?.text ?? GONE_TEXT;
  }

  /** Resolves when the last write has gone to the storage. */
  flushed(): Promise<void> {
    return this.written;
  }

  private stored(): Stored['docs'] {
    if (!this.kept) {
      // what the storage holds is data from an earlier window: anything but this shape is taken as nothing kept
      const r = storedSchema.safeParse(this.storage.get(KEY));
      this.kept = r.success ? r.data.docs : [];
    }
    return this.kept;
  }
}
