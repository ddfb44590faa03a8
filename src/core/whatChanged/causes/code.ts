import type { CodeChange, CodeHunk, DirtyChange, GitState } from '../factsProbe';
import type { WhatChangedFacts } from '../facts';
import type { ChangeTime, EvidenceLink, UnknownFact } from '../model';
import { codeKindOf, docsWhy } from './codeKind';
import { isoOf, type Draft } from './draft';

/*
 * Cause: the code. The git state of the repositories the run's scripts live in (python/what_changed.py): the commits
 * since the reference and the uncommitted edits, each file compared token by token on the host (python/code_diff.py).
 * One suspect a changed file — or a function of it, where its hunks name a few — classified by the lines of code it
 * changed (precision, compile, a host sync …); documentation, repository metadata and comment-only edits are listed,
 * never ranked. An uncommitted edit is dated by its file's mtime on the log's timeline: the launch that first ran it.
 */

type GitLink = Extract<EvidenceLink, { kind: 'git' }>;

/** Above this many functions changed in one file, the file is one suspect (a refactor is one change to read). */
const MAX_FUNCTIONS_SPLIT = 4;
/** Files named in a grouped line (not compared, beyond the probe's limit). */
const LISTED = 6;

/**
 * Each repository of the run's code once: the commits since the reference and the uncommitted edits, one draft a
 * changed file (or function); a repository that could not be read is an unknown fact.
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
    const gitLink: GitLink = {
      kind: 'git',
      title: `git ${g.repo}`,
      hostId: facts.host.id,
      repo: g.repo,
      since: refTime,
    };
    if (g.commitsSince && g.commits.length) out.push(...committedDrafts(g, gitLink));
    else if (g.commitsSince) out.push(commitsSummary(g, gitLink));
    if (g.dirty) out.push(...uncommittedDrafts(facts, g, gitLink));
  }
  return out;
}

/** The commits alone, when the probe could not list them one by one. */
function commitsSummary(g: GitState, gitLink: GitLink): Draft {
  const n = g.commitsSince ?? 0;
  const when: ChangeTime =
    g.headTime !== null
      ? { text: `HEAD committed ${isoOf(g.headTime)}`, time: { from: g.headTime, to: g.headTime + 1 } }
      : { text: 'since the reference' };
  return {
    source: 'code',
    category: 'code',
    title: `${n} commit${n === 1 ? '' : 's'} in ${g.repo ?? '?'} since the reference`,
    detail: `HEAD ${g.head?.slice(0, 10) ?? '?'}${g.branch ? ` on ${g.branch}` : ''}; files: ${g.changedSince.slice(0, 10).join(', ') || 'none'}`,
    when,
    evidence: [gitLink],
  };
}

/** A part of a changed file that is one suspect: the file, or one function of it, with its hunks that run. */
interface Unit {
  file: string;
  /** The functions its hunks sit in. */
  functions: string[];
  hunks: CodeHunk[];
  /** Hunks of the file not shown (the host sends the first 8). */
  more: number;
}

/**
 * The suspects one changed file makes: one a function its code hunks sit in when they name at most a few and every
 * hunk was sent, else the file as one. Comment-only hunks are no part of any.
 */
function unitsOf(c: CodeChange): Unit[] {
  const real = c.hunks.filter((h) => !h.cosmetic);
  const shown = real.length ? real : c.hunks;
  const more = Math.max(0, c.hunkCount - c.hunks.length);
  const byFunction = new Map<string, CodeHunk[]>();
  for (const h of shown) byFunction.set(h.function ?? '', [...(byFunction.get(h.function ?? '') ?? []), h]);
  const functions = [...byFunction.keys()].filter((f) => f);
  if (more || byFunction.size <= 1 || byFunction.size > MAX_FUNCTIONS_SPLIT)
    return [{ file: c.file, functions: functions.length ? functions : c.functions, hunks: shown, more }];
  return [...byFunction].map(([f, hunks]) => ({ file: c.file, functions: f ? [f] : [], hunks, more: 0 }));
}

function whereOf(u: Unit): string {
  if (!u.functions.length) return u.file;
  const names = u.functions.slice(0, 3).map((f) => `${f}()`);
  return `${u.file} (${names.join(', ')}${u.functions.length > 3 ? ', …' : ''})`;
}

/** A few hunks in one line: `train.py:88 in main(): - old + new`. */
function hunksText(file: string, hunks: readonly CodeHunk[]): string {
  return hunks
    .slice(0, 3)
    .map((h) => {
      const lines = [...h.old.map((l) => `- ${l.trim()}`), ...h.new.map((l) => `+ ${l.trim()}`)].slice(0, 4);
      return `${file}:${h.lines[1] ?? '?'}${h.function ? ` in ${h.function}()` : ''}: ${lines.join(' ')}`;
    })
    .join('; ');
}

function commitsText(commits: GitState['commits'], n: number): string {
  const subjects = commits.slice(0, 3).map((c) => `"${c.subject}"`);
  return `${n} commit${n === 1 ? '' : 's'}${subjects.length ? ` (${subjects.join(', ')})` : ''}`;
}

/**
 * The commits since the reference, one draft a changed file (or function): its category from the lines of code it
 * changed, its time from the commits that touched it; documentation and comment-only files cosmetic.
 */
function committedDrafts(g: GitState, gitLink: GitLink): Draft[] {
  const out: Draft[] = [];
  const commitsOf = (file: string) => {
    const own = g.commits.filter((c) => c.files.includes(file));
    return own.length ? own : g.commits;
  };
  const whenOf = (commits: GitState['commits']): ChangeTime => {
    const newest = commits[0];
    const oldest = commits[commits.length - 1];
    // commit times are whole seconds: the second it was made, not an instant before it
    return newest && oldest
      ? { text: `committed ${isoOf(newest.time)}`, time: { from: oldest.time, to: newest.time + 1 } }
      : { text: 'since the reference' };
  };
  for (const c of g.codeChanges) {
    const commits = commitsOf(c.file);
    const n = commits === g.commits ? (g.commitsSince ?? commits.length) : commits.length;
    const made = commitsText(commits, n);
    const when = whenOf(commits);
    const evidence: EvidenceLink[] = [
      { ...gitLink, title: `commits and diff of ${c.file}`, document: commitDocument(g, [c], commits) },
    ];
    const docs = docsWhy(c.file);
    if (docs || c.cosmetic) {
      out.push({
        source: 'code',
        category: 'cosmetic',
        title: `${c.file}: ${docs ? 'documentation' : 'comments, docstrings or whitespace only'} (${made})`,
        detail: docs
          ? `${c.file} is ${docs.replace(/:.*/, '')}`
          : `compared token by token with the commit of the reference (${g.base?.slice(0, 10) ?? '?'})`,
        when,
        evidence,
        cosmeticWhy: docs ?? 'comments, docstrings or whitespace only: the same Python tokens run',
      });
      continue;
    }
    for (const u of unitsOf(c)) {
      const kind = codeKindOf(u.hunks);
      const where = whereOf(u);
      out.push({
        source: 'code',
        category: kind.category,
        title:
          kind.category === 'code'
            ? `${where} changed: ${made}`
            : `${where}: ${kind.label}${kind.line ? ` (${kind.line})` : ''}`,
        detail: `${made} in ${g.repo ?? '?'} since ${g.base?.slice(0, 10) ?? 'the reference'}; ${c.error ?? hunksText(c.file, u.hunks)}${u.more ? `; ${u.more} more hunks` : ''}`,
        when,
        evidence,
      });
    }
  }
  // changed by the commits but not compared (beyond the probe's limit of files)
  const compared = new Set(g.codeChanges.map((c) => c.file));
  out.push(
    ...notCompared(
      g.changedSince.filter((f) => !compared.has(f)),
      'changed by the commits',
      whenOf(g.commits),
      [gitLink],
    ),
  );
  return out;
}

/** Files not compared, grouped: the documentation among them cosmetic, the rest one suspect that says so. */
function notCompared(files: readonly string[], how: string, when: ChangeTime, evidence: EvidenceLink[]): Draft[] {
  const out: Draft[] = [];
  const docs = files.filter((f) => docsWhy(f));
  const rest = files.filter((f) => !docsWhy(f));
  const list = (fs: readonly string[]) => `${fs.slice(0, LISTED).join(', ')}${fs.length > LISTED ? ', …' : ''}`;
  if (docs.length)
    out.push({
      source: 'code',
      category: 'cosmetic',
      title: `${docs.length} documentation file${docs.length === 1 ? '' : 's'} ${how}: ${list(docs)}`,
      detail: 'documentation and repository metadata, by their names',
      when,
      evidence,
      cosmeticWhy: 'documentation or repository metadata: not run by training',
    });
  if (rest.length)
    out.push({
      source: 'code',
      category: 'code',
      title: `${rest.length} more file${rest.length === 1 ? '' : 's'} ${how}, not compared: ${list(rest)}`,
      detail: 'the host compares at most 20 files a checkout (Python first), each up to 1 MiB, in 5 s',
      when,
      evidence,
    });
  return out;
}

/**
 * The uncommitted edits, one draft a changed file (or function), compared with HEAD and dated by the file's mtime on
 * the log's timeline; documentation and comment-only edits cosmetic.
 */
function uncommittedDrafts(facts: WhatChangedFacts, g: GitState, gitLink: GitLink): Draft[] {
  const out: Draft[] = [];
  const head = `HEAD ${g.head?.slice(0, 10) ?? '?'}${g.branch ? ` on ${g.branch}` : ''}`;
  if (!g.dirtyChanges.length)
    return [
      {
        source: 'code',
        category: 'code',
        title: `uncommitted changes in ${g.repo ?? '?'}`,
        detail: `${head}, modified: ${g.dirtyFiles.slice(0, 10).join(', ')}`,
        when: { text: 'not known (uncommitted)' },
        evidence: [gitLink],
      },
    ];
  const timeline = timelineOf(facts);
  for (const c of g.dirtyChanges) {
    const when = editWhen(c, timeline);
    const evidence: EvidenceLink[] = [
      { ...gitLink, title: `uncommitted diff of ${c.file}`, document: dirtyDocument(g, c) },
    ];
    const docs = docsWhy(c.file);
    if (docs || c.cosmetic) {
      out.push({
        source: 'code',
        category: 'cosmetic',
        title: `${c.file}: ${docs ? 'documentation' : 'comments, docstrings or whitespace only'}, uncommitted`,
        detail: docs ? `${c.file} is ${docs.replace(/:.*/, '')}` : `compared token by token with ${head}`,
        when,
        evidence,
        cosmeticWhy: docs ?? 'comments, docstrings or whitespace only: the same Python tokens run',
      });
      continue;
    }
    const units: Unit[] =
      c.status === 'modified' || c.status === 'renamed'
        ? unitsOf(c)
        : [{ file: c.file, functions: [], hunks: c.hunks, more: 0 }];
    for (const u of units) {
      const kind = codeKindOf(u.hunks);
      const label =
        c.status === 'deleted'
          ? 'deleted'
          : c.error
            ? `not compared (${c.error.replace(/: not compared$/, '')})`
            : kind.category === 'code'
              ? c.status === 'added'
                ? 'added'
                : ''
              : kind.label;
      const shown = kind.line && c.status !== 'deleted' && !c.error ? ` (${kind.line})` : '';
      out.push({
        source: 'code',
        category: c.status === 'deleted' ? 'code' : kind.category,
        title: `${whereOf(u)}: uncommitted edit${label ? `, ${label}` : ''}${shown}`,
        detail: `not committed (${head}${c.from ? `; renamed from ${c.from}` : ''}); ${when.text}; ${c.error ?? (hunksText(c.file, u.hunks) || c.status)}${u.more ? `; ${u.more} more hunks` : ''}`,
        when,
        evidence,
      });
    }
  }
  const compared = new Set(g.dirtyChanges.map((c) => c.file));
  const rest = g.dirtyFiles.filter((f) => !compared.has(f));
  out.push(...notCompared(rest, 'edited, not committed', { text: 'not known (uncommitted, not compared)' }, [gitLink]));
  return out;
}

/** When each launch of the run began, as the log (and kg_record's records) tell: what an edit's mtime is placed on. */
interface Timeline {
  /** The run's first log line. */
  first: { time: number; step: number };
  /** The launches after the first: the log's last line before each, and the time it began (or its first line's). */
  starts: { time: number; before: { time: number | null; step: number }; step: number }[];
  /** The run's last logged step. */
  lastStep: number;
}

function timelineOf(facts: WhatChangedFacts): Timeline | null {
  const s = facts.log?.reduction.series.find((v) => v.t && v.t.length === v.x.length && v.x.length);
  if (!s?.t) return null;
  const x = s.x;
  const t = s.t;
  const starts: Timeline['starts'] = [];
  for (const r of facts.log?.restarts ?? []) {
    if (r.time === null) continue;
    const prevTime = r.gapSeconds !== null ? r.time - r.gapSeconds : null;
    starts.push({ time: r.time, before: { time: prevTime, step: r.prevStep ?? r.step - 1 }, step: r.step });
  }
  // a recorded launch's own start is closer than its first log line: an edit after it was not run by it
  let firstTime = t[0]!;
  for (const rec of facts.probe?.launches?.[0]?.records ?? []) {
    if (rec.source !== 'kg_record' || rec.time === null) continue;
    const start = starts.find((st) => rec.time! <= st.time && (st.before.time === null || rec.time! > st.before.time));
    if (start) start.time = rec.time;
    else if (rec.time <= firstTime) firstTime = rec.time;
    else if (rec.time < t[t.length - 1]!) {
      const i = t.findIndex((v) => v >= rec.time!);
      if (i > 0) starts.push({ time: rec.time, before: { time: t[i - 1]!, step: x[i - 1]! }, step: x[i]! });
    }
  }
  starts.sort((a, b) => a.time - b.time);
  return { first: { time: firstTime, step: x[0]! }, starts, lastStep: x[x.length - 1]! };
}

/**
 * When an uncommitted edit took effect: a script is read when a launch starts, so the launch that first ran it is the
 * first that began after the file was last written. Before the run's first log line: every launch ran it (it cannot
 * explain a shift). After the latest known launch began: no launch in the log ran it. Without wall times in the log:
 * the mtime itself, against the checkpoints' times.
 */
function editWhen(c: DirtyChange, tl: Timeline | null): ChangeTime {
  const m = c.mtime;
  if (m === null) return { text: `not known (${c.status === 'deleted' ? 'deleted' : 'edited'}, not committed)` };
  const at = `edited ${isoOf(m)}`;
  const time = { from: m, to: m };
  if (!tl) return { text: at, time };
  if (m < tl.first.time)
    return {
      text: `${at}, before the run's first launch (first log line at step ${tl.first.step}): every launch in the log ran it`,
      steps: { from: 0, to: tl.first.step },
      time,
    };
  const next = tl.starts.find((s) => s.time > m);
  if (next) {
    const gap = next.before.time !== null && m >= next.before.time;
    const where = gap
      ? `after the last log line before the restart (step ${next.before.step}, ${isoOf(next.before.time)})`
      : `while the launch before the restart at step ${next.step} ran`;
    return {
      text: `${at}, ${where}: first run by the launch from step ${next.step}`,
      steps: { from: next.before.step, to: next.step },
      time,
    };
  }
  if (!tl.starts.length) return { text: at, time };
  const latest = tl.starts[tl.starts.length - 1]!;
  return {
    text: `${at}, after the latest launch began (step ${latest.step}): no launch in the log ran it`,
    steps: { from: tl.lastStep, to: tl.lastStep },
    time,
  };
}

function hunkLines(c: CodeChange): string[] {
  const lines: string[] = [];
  if (c.cosmetic) lines.push('# comments, docstrings or whitespace only: the same Python tokens');
  if (c.error) lines.push(`# ${c.error}`);
  for (const h of c.hunks) {
    lines.push(
      `@@ -${h.lines[0] ?? '?'} +${h.lines[1] ?? '?'} @@${h.function ? ` ${h.function}()` : ''}${h.cosmetic ? ' (comments only)' : ''}`,
    );
    for (const l of h.old) lines.push(`-${l}`);
    for (const l of h.new) lines.push(`+${l}`);
  }
  if (c.hunkCount > c.hunks.length) lines.push(`# ${c.hunkCount - c.hunks.length} more hunks not shown`);
  return lines;
}

/** Commits and their changed hunks, as a document to read (a diff, read-only): all of them, or one file's. */
export function commitDocument(
  g: GitState,
  changes: readonly CodeChange[] = g.codeChanges,
  commits: GitState['commits'] = g.commits,
): string {
  const lines = [
    `git ${g.repo ?? '?'}: ${commits.length} commit${commits.length === 1 ? '' : 's'} since ${g.base ?? 'the reference'}`,
    '',
  ];
  for (const c of commits) lines.push(`commit ${c.hash}  ${isoOf(c.time)}`, `    ${c.subject}`, '');
  for (const c of changes) {
    lines.push(
      `--- a/${c.file}\t(${g.base?.slice(0, 10) ?? 'absent'})`,
      `+++ b/${c.file}\t(HEAD ${g.head?.slice(0, 10) ?? '?'})`,
      ...hunkLines(c),
      '',
    );
  }
  return lines.join('\n');
}

/** An uncommitted file against HEAD, as a document to read. */
export function dirtyDocument(g: GitState, c: DirtyChange): string {
  return [
    `git ${g.repo ?? '?'}: ${c.file} ${c.status}, not committed (HEAD ${g.head?.slice(0, 10) ?? '?'}${g.branch ? ` on ${g.branch}` : ''})`,
    `last written ${c.mtime !== null ? isoOf(c.mtime) : 'unknown (deleted)'}`,
    '',
    `--- a/${c.from ?? c.file}\t(HEAD ${g.head?.slice(0, 10) ?? '?'})`,
    `+++ b/${c.file}\t(working tree)`,
    ...hunkLines(c),
    '',
  ].join('\n');
}
