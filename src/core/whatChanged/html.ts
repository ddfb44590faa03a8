import { formatRate } from '../bench/compare';
import { KnownGoodError } from '../errors';
import { escapeHtml, webviewCsp } from '../util/html';
import { formatRatio } from './scoring';
import { evidenceText, firstRuledOut, RULED_OUT_HEADING } from './render';
import type { Suspect, WhatChangedReport } from './model';

/*
 * The report as the panel's page. Rendered here (no DOM: the extension host builds it), every text of the report
 * escaped; the page's one script only posts which row or button was clicked (protocol.ts). The CSP is the dashboard's:
 * default-src 'none', the script and the style by nonce, no eval, no network.
 */

/** As the Markdown writes levels: `12.8K` for throughputs, three digits for the rest. */
function level(n: number): string {
  return Math.abs(n) >= 1000 ? formatRate(n) : Number(n.toPrecision(3)).toString();
}

const STYLE = `
body { margin: 0; padding: 12px 20px 32px; background: var(--vscode-editor-background);
  color: var(--vscode-editor-foreground); font-family: var(--vscode-font-family); font-size: var(--vscode-font-size, 13px); }
h1.kg-headline { font-size: 1.6em; font-weight: 600; line-height: 1.3; margin: 6px 0 10px; }
h2 { font-size: 1.1em; margin: 20px 0 6px; border-bottom: 1px solid var(--vscode-panel-border, transparent); padding-bottom: 3px; }
.kg-muted { color: var(--vscode-descriptionForeground); }
.kg-toolbar { display: flex; gap: 8px; align-items: center; margin: 4px 0 8px; }
button { background: var(--vscode-button-background); color: var(--vscode-button-foreground); border: none;
  padding: 4px 10px; cursor: pointer; font: inherit; }
button:hover { background: var(--vscode-button-hoverBackground); }
button.kg-secondary { background: var(--vscode-button-secondaryBackground); color: var(--vscode-button-secondaryForeground); }
.kg-verdict { display: inline-block; padding: 1px 8px; border-radius: 9px; font-size: 0.9em;
  background: var(--vscode-badge-background); color: var(--vscode-badge-foreground); }
.kg-verdict.regression { background: var(--vscode-inputValidation-errorBackground, var(--vscode-badge-background));
  border: 1px solid var(--vscode-inputValidation-errorBorder, transparent); }
ol.kg-suspects { padding-left: 0; list-style: none; margin: 0; }
li.kg-suspect { border: 1px solid var(--vscode-panel-border, var(--vscode-widget-border, #8884)); border-radius: 4px;
  padding: 8px 10px; margin: 6px 0; cursor: pointer; }
li.kg-suspect:hover, li.kg-suspect:focus { background: var(--vscode-list-hoverBackground); outline: 1px solid var(--vscode-focusBorder); }
.kg-title { font-weight: 600; font-size: 1.08em; }
.kg-rank { color: var(--vscode-descriptionForeground); margin-right: 6px; }
h3.kg-ruled-out { font-size: 1em; margin: 18px 0 8px; color: var(--vscode-descriptionForeground); }
.kg-score { float: right; color: var(--vscode-descriptionForeground); }
.kg-shift { color: var(--vscode-charts-red, var(--vscode-errorForeground)); margin-left: 6px; font-size: 0.9em; }
.kg-detail { margin: 4px 0; }
.kg-reasons { margin: 2px 0 4px 16px; padding: 0; color: var(--vscode-descriptionForeground); }
a.kg-evidence { color: var(--vscode-textLink-foreground); margin-right: 14px; cursor: pointer; text-decoration: none; }
a.kg-evidence:hover { text-decoration: underline; color: var(--vscode-textLink-activeForeground); }
ul.kg-facts { margin: 4px 0; padding-left: 18px; }
code { font-family: var(--vscode-editor-font-family); }
#kg-status { margin-left: 8px; }
`;

/**
 * Clicks → messages; and the page keeps what it was opened on (the #kg-state data block) as its webview state, so
 * VS Code can give it back to the extension to restore the panel after a reload. Nothing else runs in the page.
 */
const SCRIPT = `
const vscode = acquireVsCodeApi();
const post = (m) => vscode.postMessage(m);
const kept = document.getElementById('kg-state');
if (kept) { try { vscode.setState(JSON.parse(kept.textContent)); } catch (e) { /* nothing to keep */ } }
document.addEventListener('click', (ev) => {
  const t = ev.target instanceof Element ? ev.target : null;
  if (!t) return;
  const ev_ = t.closest('[data-evidence]');
  const row = t.closest('[data-suspect]');
  const btn = t.closest('[data-action]');
  if (btn) { post({ type: btn.getAttribute('data-action') }); return; }
  if (row) {
    ev.preventDefault();
    post({ type: 'open', suspect: Number(row.getAttribute('data-suspect')), evidence: ev_ ? Number(ev_.getAttribute('data-evidence')) : 0 });
  }
});
document.addEventListener('keydown', (ev) => {
  const t = ev.target instanceof Element ? ev.target.closest('[data-suspect]') : null;
  if (t && (ev.key === 'Enter' || ev.key === ' ')) {
    ev.preventDefault();
    post({ type: 'open', suspect: Number(t.getAttribute('data-suspect')), evidence: 0 });
  }
});
window.addEventListener('message', (ev) => {
  const m = ev.data;
  if (m && m.type === 'status' && typeof m.text === 'string') document.getElementById('kg-status').textContent = m.text;
});
`;

function suspectHtml(s: Suspect, i: number): string {
  const e = escapeHtml;
  const reasons = s.reasons
    .map((r) => `<li>${r.points >= 0 ? '+' : '−'}${Math.abs(r.points)} ${e(r.why)}</li>`)
    .join('');
  const evidence = s.evidence
    .map(
      (x, j) => `<a class="kg-evidence" href="#" data-evidence="${j}" title="${e(x.title)}">${e(evidenceText(x))}</a>`,
    )
    .join('');
  return `<li class="kg-suspect" tabindex="0" data-suspect="${i}" title="${e(s.evidence[0] ? `Open ${evidenceText(s.evidence[0])}` : s.title)}">
  <div><span class="kg-rank">${i + 1}.</span><span class="kg-title">${e(s.title)}</span>${s.coincides ? '<span class="kg-shift">at the shift</span>' : ''}<span class="kg-score">score ${s.score} · ${e(s.source)}</span></div>
  <div class="kg-detail">${e(s.detail)}</div>
  <div class="kg-muted">when: ${e(s.when.text)}</div>
  <ul class="kg-reasons">${reasons}</ul>
  <div>${evidence || '<span class="kg-muted">no evidence to open</span>'}</div>${s.prove ? `\n  <div class="kg-muted kg-prove" data-prove="${e(s.prove.kind)}">prove it: <code>${e(s.prove.command)}</code> — ${e(s.prove.text)}</div>` : ''}
</li>`;
}

/** The ranked suspects, then (under their own heading, numbered on) the ones their timing rules out. */
function suspectLists(suspects: readonly Suspect[]): string {
  const cut = firstRuledOut(suspects);
  const first = suspects.slice(0, cut).map((s, i) => suspectHtml(s, i));
  const rest = suspects.slice(cut).map((s, i) => suspectHtml(s, cut + i));
  return [
    first.length ? `<ol class="kg-suspects">${first.join('\n')}</ol>` : '',
    rest.length
      ? `<h3 class="kg-ruled-out">${escapeHtml(RULED_OUT_HEADING)}</h3>\n<ol class="kg-suspects kg-ruled-out" start="${cut + 1}">${rest.join('\n')}</ol>`
      : '',
  ]
    .filter(Boolean)
    .join('\n');
}

export interface WhatChangedHtmlOptions {
  cspSource: string;
  /** Fresh per page (newNonce(24)). */
  nonce: string;
  /** Kept by the page as its webview state (a JSON value), for restoring the panel after a reload. */
  state?: unknown;
}

/**
 * JSON that stays data inside a `<script type="application/json">` block: no `<`, `>` or `&` (so no `</script>` or
 * `<!--` can end or change the block) and no U+2028/U+2029; JSON.parse reads it back unchanged.
 */
export function jsonForScriptBlock(value: unknown): string {
  return JSON.stringify(value).replace(
    /[<>&\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

export function whatChangedHtml(r: WhatChangedReport, options: WhatChangedHtmlOptions): string {
  const { nonce } = options;
  const cspSource = options.cspSource.trim();
  if (!/^[A-Za-z0-9_-]{16,}$/.test(nonce))
    throw new KnownGoodError('internal', 'whatChangedHtml: the nonce must be 16+ base64url characters');
  // VS Code's cspSource is several sources: each a plain host source or 'self', so no keyword can be slipped in.
  if (!cspSource || !cspSource.split(/\s+/).every((x) => x === "'self'" || /^[^;'",]+$/.test(x)))
    throw new KnownGoodError('internal', 'whatChangedHtml: bad cspSource');
  const e = escapeHtml;
  const ref = r.reference;
  const t = r.throughput;
  const facts: string[] = [
    `host <code>${e(r.host.label)}</code>${r.run !== null ? `, run <code>${e(r.run)}</code>` : ' (no run: environment and benchmarks)'}`,
    `reference: <b>${e(ref.label)}</b> — ${e(ref.why)}`,
  ];
  if (ref.baseline)
    facts.push(
      `environment baseline "${e(ref.baseline.label)}" captured ${e(ref.baseline.capturedAt)} (${e(ref.baseline.why)})`,
    );
  if (t.log)
    facts.push(
      `log <code>${e(t.log.key)}</code>: ${e(level(t.log.now))} now vs ${e(level(t.log.reference))} at the reference${t.log.ratio !== null ? ` (${e(formatRatio(t.log.ratio))}×)` : ''}`,
    );
  const cps = r.changepoints.series.flatMap((s) =>
    s.changepoints.map(
      (c) =>
        `<li><code>${e(s.key)}</code> at step ${e(String(c.at))}: ${e(level(c.before))} → ${e(level(c.after))}${c.ratio !== null ? ` (${e(formatRatio(c.ratio))}×)` : ''}</li>`,
    ),
  );
  const restarts = (r.restarts ?? []).map((x) => {
    const when = x.time !== null ? ` at ${new Date(x.time * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z')}` : '';
    const changed = x.changed.length ? `; changed there: ${x.changed.map(e).join(', ')}` : '';
    const resume = !x.resume
      ? ''
      : `; resume state ${e(x.resume.before)} → ${e(x.resume.after)}: ${x.resume.differences.length ? x.resume.differences.map(e).join('; ') : 'the same'}`;
    return `<li>step ${e(String(x.step))}${e(when)} <span class="kg-muted">(${e(x.signals.join(', '))}${x.source ? `, ${e(x.source.split('/').slice(-2).join('/'))}` : ''})</span>${changed}${resume}</li>`;
  });
  for (const p of r.launches?.running ?? [])
    facts.push(
      `running now: PID ${e(String(p.pid ?? '?'))} <code>${e(p.command)}</code>${p.libs.length ? ` <span class="kg-muted">(loaded ${e(p.libs.join(', '))})</span>` : ''}`,
    );
  if (r.logSources)
    facts.push(`log: ${r.logSources.length} files, stitched by step (the later launch wins where steps overlap)`);
  const unranked = r.unranked.map(
    (u) =>
      `<li>${e(u.title)} <span class="kg-muted">(${e(u.source)}; ${e('score' in u ? u.when.text : u.why)})</span></li>`,
  );
  const unknown = r.unknown.map((u) => `<li>${e(u.fact)}: <span class="kg-muted">${e(u.why)}</span></li>`);
  const g = r.gathered;
  return `<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="UTF-8">
  <meta http-equiv="Content-Security-Policy" content="${e(webviewCsp(cspSource, nonce))}">
  <meta name="viewport" content="width=device-width, initial-scale=1.0">
  <style nonce="${e(nonce)}">${STYLE}</style>
  <title>What Changed?</title>
</head>
<body>
  <div class="kg-toolbar">
    <span class="kg-verdict ${e(r.verdict)}">${e(r.verdict)}</span>
    <button data-action="copy">Copy as Markdown</button>
    <button class="kg-secondary" data-action="refresh">Refresh</button>
    <span id="kg-status" class="kg-muted" role="status"></span>
  </div>
  <h1 class="kg-headline">${e(r.headline)}</h1>
  <ul class="kg-facts">${facts.map((f) => `<li>${f}</li>`).join('')}</ul>
  ${
    r.verdict === 'regression'
      ? `<h2>Suspects, ranked <span class="kg-muted">— click one to open its evidence</span></h2>
  ${r.suspects.length ? suspectLists(r.suspects) : '<p class="kg-muted">No fact that differs was found: see what could not be gathered below.</p>'}`
      : ''
  }
  <h2>Changepoints</h2>
  ${cps.length ? `<ul class="kg-facts">${cps.join('')}</ul>` : '<p class="kg-muted">None.</p>'}
  <p class="kg-muted">Method: ${e(r.changepoints.why)}</p>
  ${restarts.length ? `<h2>Restarts</h2><ul class="kg-facts">${restarts.join('')}</ul>` : ''}
  ${unranked.length ? `<h2>${r.verdict === 'regression' ? 'Not ranked (cosmetic)' : 'Differences (not ranked: nothing to explain)'}</h2><ul class="kg-facts">${unranked.join('')}</ul>` : ''}
  ${unknown.length ? `<h2>Not known</h2><ul class="kg-facts">${unknown.join('')}</ul>` : ''}
  <p class="kg-muted">Gathered in ${g.roundTrips} round trips (${g.requests} requests) in ${(g.elapsedMs / 1000).toFixed(2)} s; args of ${g.checkpointsRead} of ${g.checkpoints} checkpoints; ${e(r.generatedAt)}.</p>
  ${options.state !== undefined ? `<script type="application/json" id="kg-state">${jsonForScriptBlock(options.state)}</script>` : ''}
  <script nonce="${e(nonce)}">${SCRIPT}</script>
</body>
</html>
`;
}
