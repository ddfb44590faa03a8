import type { z } from 'zod';
import { KnownGoodError, messageOf } from '../errors';
import { describeIssues } from './zod';

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
  /** The same, failing with why: a KnownGoodError `internal` "not a Known Good <what> (<why>)". */
  read(uri: Pick<UriParts, 'scheme' | 'path' | 'query'>): T;
}

export interface DocUriSpec<T> {
  /** What a URI of this scheme may name: whatever `decode` builds is checked against it. */
  schema: z.ZodType<T>;
  /**
   * The path (for people: the tab title, and the language mode from its extension) and the query fields. The query
   * is `URLSearchParams`, which survives VS Code's percent-decoding and re-encoding between processes.
   */
  encode(doc: T): { path: string; fields: Record<string, string | undefined> };
  /**
   * The candidate document from the query fields and the path (and the raw query, for a scheme that once wrote
   * another query format); it may throw (bad JSON): that is a malformed URI, and the message says why.
   */
  decode(fields: ReadonlyMap<string, string>, path: string, query: string): unknown;
  /** What a document of the scheme is called in errors (`args document`); default `<scheme> document`. */
  what?: string;
}

/**
 * One codec style for every Known Good document scheme (`knownGood:` args, `knownGood-env`, `knownGood-remote`,
 * `knownGood-fleet`, `knownGood-doc`, `knownGood-evidence`).
 */
export function defineDocUri<T>(scheme: string, spec: DocUriSpec<T>): DocUri<T> {
  const bad = (why: string) =>
    new KnownGoodError('internal', `not a Known Good ${spec.what ?? `${scheme} document`} (${why})`);
  const read = (uri: Pick<UriParts, 'scheme' | 'path' | 'query'>): T => {
    if (uri.scheme !== scheme) throw bad(`scheme ${uri.scheme}`);
    let candidate: unknown;
    try {
      candidate = spec.decode(new Map(new URLSearchParams(uri.query)), uri.path, uri.query);
    } catch (e) {
      throw bad(messageOf(e));
    }
    const r = spec.schema.safeParse(candidate);
    if (!r.success) throw bad(describeIssues(r.error));
    return r.data;
  };
  return {
    scheme,
    to(doc) {
      const { path, fields } = spec.encode(doc);
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(fields)) if (v !== undefined) q.set(k, v);
      return { scheme, authority: '', path: path.startsWith('/') ? path : `/${path}`, query: q.toString() };
    },
    parse(uri) {
      try {
        return read(uri);
      } catch {
        return undefined;
      }
    },
    read,
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
