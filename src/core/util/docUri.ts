import type { z } from 'zod';

/** A URI as components: the shape of `vscode.Uri.from` and `vscode.Uri` (the core does not know vscode). */
export interface UriParts {
  scheme: string;
  authority: string;
  path: string;
  query: string;
  fragment?: string;
}

/** A read-only document scheme's pure codec: the content provider, the commands and the tests agree on it. */
export interface DocUri<T> {
  readonly scheme: string;
  to(doc: T): UriParts;
  /** The document a URI names; undefined for another scheme or a malformed query (checked by the schema). */
  parse(uri: Pick<UriParts, 'scheme' | 'path' | 'query'>): T | undefined;
}

export interface DocUriSpec<T> {
  /** What a URI of this scheme may name: whatever `decode` builds is checked against it. */
  schema: z.ZodType<T>;
  /**
   * The path (for people: the tab title, and the language mode from its extension) and the query fields. The query
   * is `URLSearchParams`, which survives VS Code's percent-decoding and re-encoding between processes.
   */
  encode(doc: T): { path: string; fields: Record<string, string | undefined> };
  /** The candidate document from the query fields and the path; it may throw (bad JSON): that is a malformed URI. */
  decode(fields: ReadonlyMap<string, string>, path: string): unknown;
}

/** One codec style for every Known Good document scheme (`knownGood-env`, `knownGood-remote`, `knownGood-bench`). */
export function defineDocUri<T>(scheme: string, spec: DocUriSpec<T>): DocUri<T> {
  return {
    scheme,
    to(doc) {
      const { path, fields } = spec.encode(doc);
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(fields)) if (v !== undefined) q.set(k, v);
      return { scheme, authority: '', path: path.startsWith('/') ? path : `/${path}`, query: q.toString() };
    },
    parse(uri) {
      if (uri.scheme !== scheme) return undefined;
      let candidate: unknown;
      try {
        candidate = spec.decode(new Map(new URLSearchParams(uri.query)), uri.path);
      } catch {
        return undefined;
      }
      const r = spec.schema.safeParse(candidate);
      return r.success ? r.data : undefined;
    },
  };
}

/** A file name for a tab: readable, no slashes or control characters, at most `max` characters. */
export function docFileName(name: string, fallback: string, max = 80): string {
  const clean = name
    // eslint-disable-next-line no-control-regex
    .replace(/[\u0000-\u001f\u007f/\\]+/g, ' ')
    .trim()
    .slice(0, max);
  return clean || fallback;
}
