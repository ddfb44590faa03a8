import type { GitState } from '../factsProbe';
import type { WhatChangedFacts } from '../facts';
import type { ChangeTime, EvidenceLink, UnknownFact } from '../model';
import { isoOf, type Draft } from './draft';

/*
 * Cause: the code. The git state of the repositories the run's scripts live in (python/what_changed.py): commits since
 * the reference, token by token, and uncommitted changes.
 */

/**
 * Each repository of the run's code once: the commits since the reference (as what they changed), and uncommitted
 * changes; a repository that could not be read is an unknown fact.
 */
export function gitDrafts(facts: WhatChangedFacts, refTime: number | null, unknown: UnknownFact[]): Draft[] {
  const out: Draft[] = [];
  const seen = new Set<string>();
  for (const g of facts.probe?.git ?? []) {
    if (g.error || !g.repo) {
      unknown.push({ fact: `git state of ${g.path}`, why: g.error ?? 'no repository' });
      continue;
    }
    if (seen.has(g.repo)) continue;
    seen.add(g.repo);
    const gitLink: Extract<EvidenceLink, { kind: 'git' }> = {
      kind: 'git',
      title: `git ${g.repo}`,
      hostId: facts.host.id,
      repo: g.repo,
      since: refTime,
    };
    if (g.commitsSince && g.codeChanges.length) {
      out.push(codeDraft(facts, g, gitLink));
    } else if (g.commitsSince) {
      const when: ChangeTime =
        g.headTime !== null
          ? { text: `HEAD committed ${isoOf(g.headTime)}`, time: { from: g.headTime, to: g.headTime + 1 } }
          : { text: 'since the reference' };
      out.push({
        source: 'code',
        category: 'code',
        title: `${g.commitsSince} commit${g.commitsSince === 1 ? '' : 's'} in ${g.repo} since the reference`,
        detail: `HEAD ${g.head?.slice(0, 10) ?? '?'}${g.branch ? ` on ${g.branch}` : ''}; files: ${g.changedSince.slice(0, 10).join(', ') || 'none'}`,
        when,
        evidence: [gitLink],
        subject: { kind: 'code', repo: g.repo, files: g.changedSince },
      });
    }
    if (g.dirty) {
      out.push({
        source: 'code',
        category: 'code',
        title: `uncommitted changes in ${g.repo}`,
        detail: `HEAD ${g.head?.slice(0, 10) ?? '?'}${g.branch ? ` on ${g.branch}` : ''}, modified: ${g.dirtyFiles.slice(0, 10).join(', ')}`,
        when: { text: 'not known (uncommitted)' },
        evidence: [gitLink],
        subject: { kind: 'code', repo: g.repo, files: g.dirtyFiles, uncommitted: true },
      });
    }
  }
  return out;
}

/** The commits since the reference and their changed hunks, as a document to read (a diff, read-only). */
export function commitDocument(g: GitState): string {
  const lines = [
    `git ${g.repo ?? '?'}: ${g.commits.length} commit${g.commits.length === 1 ? '' : 's'} since ${g.base ?? 'the reference'}`,
    '',
  ];
  for (const c of g.commits) lines.push(`commit ${c.hash}  ${isoOf(c.time)}`, `    ${c.subject}`, '');
  for (const c of g.codeChanges) {
    lines.push(
      `--- a/${c.file}\t(${g.base?.slice(0, 10) ?? 'absent'})`,
      `+++ b/${c.file}\t(HEAD ${g.head?.slice(0, 10) ?? '?'})`,
    );
    if (c.cosmetic) lines.push('# comments, docstrings or whitespace only: the same Python tokens');
    if (c.error) lines.push(`# ${c.error}`);
    for (const h of c.hunks) {
      lines.push(`@@ -${h.lines[0] ?? '?'} +${h.lines[1] ?? '?'} @@${h.function ? ` ${h.function}()` : ''}`);
      for (const l of h.old) lines.push(`-${l}`);
      for (const l of h.new) lines.push(`+${l}`);
    }
    lines.push('');
  }
  return lines.join('\n');
}

/** A call that makes the host wait for the GPU, added to the loop. */
const HOST_SYNC = /\.item\(\)|\.cpu\(\)|\.tolist\(\)|\.numpy\(\)|cuda\.synchronize\(|\.nonzero\(|print\(.*loss\b/;

/**
 * The commits since the reference as what they changed: comment/docstring/whitespace-only (compared token by token on
 * the host) is cosmetic; otherwise the files, the functions their hunks sit in and the commit subjects, a host sync
 * added to the loop its own category.
 */
function codeDraft(facts: WhatChangedFacts, g: GitState, gitLink: Extract<EvidenceLink, { kind: 'git' }>): Draft {
  const real = g.codeChanges.filter((c) => !c.cosmetic);
  const newest = g.commits[0];
  const oldest = g.commits[g.commits.length - 1];
  const subjects = g.commits.slice(0, 3).map((c) => `"${c.subject}"`);
  const commits = `${g.commitsSince} commit${g.commitsSince === 1 ? '' : 's'}${subjects.length ? ` (${subjects.join(', ')})` : ''}`;
  // commit times are whole seconds: the second it was made, not an instant before it
  const when: ChangeTime =
    oldest && newest
      ? {
          text: `committed ${isoOf(newest.time)}`,
          time: { from: oldest.time, to: newest.time + 1 },
        }
      : g.headTime !== null
        ? { text: `HEAD committed ${isoOf(g.headTime)}`, time: { from: g.headTime, to: g.headTime + 1 } }
        : { text: 'since the reference' };
  if (!real.length) {
    return {
      source: 'code',
      category: 'cosmetic',
      title: `${g.codeChanges.map((c) => c.file).join(', ')}: comments, docstrings or whitespace only (${commits})`,
      detail: `compared token by token with the commit of the reference (${g.base?.slice(0, 10) ?? '?'})`,
      when,
      evidence: [gitLink],
      cosmeticWhy: 'comments, docstrings or whitespace only: the same Python tokens run',
    };
  }
  const hunks = real.flatMap((c) => c.hunks.map((h) => ({ file: c.file, ...h })));
  const sync = hunks.find((h) => h.new.some((l) => HOST_SYNC.test(l.replace(/#.*$/, ''))));
  const where = real
    .map((c) =>
      c.functions.length
        ? `${c.file} (${c.functions
            .slice(0, 3)
            .map((f) => `${f}()`)
            .join(', ')})`
        : c.file,
    )
    .join(', ');
  const shown = hunks.slice(0, 3).map((h) => {
    const lines = [...h.old.map((l) => `- ${l.trim()}`), ...h.new.map((l) => `+ ${l.trim()}`)].slice(0, 4);
    return `${h.file}:${h.lines[1] ?? '?'}${h.function ? ` in ${h.function}()` : ''}: ${lines.join(' ')}`;
  });
  return {
    source: 'code',
    category: sync ? 'host-sync' : 'code',
    evidence: [{ ...gitLink, title: `commits and diff in ${g.repo ?? '?'}`, document: commitDocument(g) }],
    title: sync
      ? `${where}: a host sync added (${
          sync.new
            .find((l) => HOST_SYNC.test(l))
            ?.trim()
            .slice(0, 60) ?? ''
        })`
      : `${where} changed: ${commits}`,
    detail: `${commits} in ${g.repo ?? '?'} since ${g.base?.slice(0, 10) ?? 'the reference'}; ${shown.join('; ')}`,
    when,
    subject: { kind: 'code', repo: g.repo, files: real.map((c) => c.file) },
  };
}
