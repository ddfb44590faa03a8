import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jsonForScriptBlock, whatChangedHtml } from '../../src/core/whatChanged/html';
import { renderWhatChangedMarkdown } from '../../src/core/whatChanged/render';
import type { WhatChangedReport } from '../../src/core/whatChanged/model';
import {
  parseWhatChangedPageState,
  parseWhatChangedPanelState,
  parseWhatChangedViewMessage,
} from '../../src/core/whatChanged/protocol';

const NONCE = 'abcdefghijklmnopqrstuvwxyz012345';
const EVIL = '<img src=x onerror=alert(1)>"\'&';

function report(): WhatChangedReport {
  const ck = (step: number) => ({ label: `step_${step}`, path: `/r/step_${step}/checkpoint.pt`, step });
  return {
    schema: 1,
    headline: `4.3K tok/s now vs 12.8K at step_600 (0.34×); changed at step 600: dataset ${EVIL}`,
    verdict: 'regression',
    host: { id: 'local', label: `box ${EVIL}` },
    run: `/r/${EVIL}`,
    generatedAt: '2026-12-01T00:00:00Z',
    reference: { kind: 'changepoint', label: 'step_600', why: EVIL, checkpoint: ck(600), time: 1, baseline: null },
    now: { checkpoint: ck(1000), time: 2, envCapturedAt: null, log: '/r/train_log.jsonl' },
    throughput: { log: { key: 'tok_s', reference: 12800, now: 4300, ratio: 0.336 }, bench: null, dropped: true },
    changepoints: { method: 'pelt', why: EVIL, series: [] },
    suspects: [
      {
        id: 's1',
        source: 'args',
        category: 'dataset',
        title: `dataset a → ${EVIL}`,
        detail: EVIL,
        when: { text: EVIL },
        coincides: true,
        ruledOut: false,
        score: 90,
        reasons: [{ points: 50, why: EVIL }],
        evidence: [{ kind: 'args-diff', title: EVIL, hostId: 'local', a: ck(600), b: ck(700) }],
      },
    ],
    unranked: [{ source: 'args', title: EVIL, why: EVIL }],
    unknown: [{ fact: EVIL, why: EVIL }],
    gathered: { roundTrips: 3, requests: 14, elapsedMs: 800, checkpointsRead: 10, checkpoints: 10 },
  };
}

void test('the report page escapes every text of the report and runs only its own nonce script', () => {
  const html = whatChangedHtml(report(), { cspSource: "'self' https://*.vscode-cdn.net", nonce: NONCE });
  assert.doesNotMatch(html, /<img/);
  assert.doesNotMatch(html, /onerror=alert\(1\)>/);
  assert.match(html, /&lt;img src=x onerror=alert\(1\)&gt;&quot;&#39;&amp;/);
  // the headline is the first heading, big
  assert.match(html, /<h1 class="kg-headline">4\.3K tok\/s now vs 12\.8K at step_600 \(0\.34×\)/);
  // the suspect row says which suspect it is; the page never carries the link's data
  assert.match(html, /data-suspect="0"/);
  assert.doesNotMatch(html, /checkpoint\.pt/);
  assert.match(html, /default-src &#39;none&#39;/);
  assert.doesNotMatch(html, /unsafe-(eval|inline)/);
  assert.equal((html.match(/<script /g) ?? []).length, 1);
  assert.match(html, new RegExp(`<script nonce="${NONCE}">`));
  assert.throws(() => whatChangedHtml(report(), { cspSource: "'self'; script-src *", nonce: NONCE }));
  assert.throws(() => whatChangedHtml(report(), { cspSource: "'self'", nonce: 'short' }));
});

void test('suspects their timing rules out come last, under their own heading, numbered on; never hidden', () => {
  const r = report();
  const first = r.suspects[0]!;
  r.suspects.push({
    ...first,
    id: 's2',
    title: 'NCCL_DEBUG=INFO added',
    coincides: false,
    ruledOut: true,
    score: -10,
    reasons: [{ points: -25, why: 'changed after the shift' }],
  });
  const html = whatChangedHtml(r, { cspSource: "'self'", nonce: NONCE });
  const heading = html.indexOf('<h3 class="kg-ruled-out">Changed, but not where the metric shifted');
  assert.ok(heading > html.indexOf('data-suspect="0"'), 'the heading comes after the ranked suspect');
  assert.ok(html.indexOf('data-suspect="1"') > heading, 'the ruled-out suspect sits under it');
  assert.match(
    html,
    /data-suspect="1"[^>]*>\s*<div><span class="kg-rank">2\.<\/span><span class="kg-title">NCCL_DEBUG=INFO added/,
  );
  const md = renderWhatChangedMarkdown(r);
  assert.match(
    md,
    /1\. \*\*dataset a → [^\n]*\n[\s\S]*#### Changed, but not where the metric shifted[^\n]*\n\n2\. \*\*NCCL_DEBUG=INFO added\*\* — score -10/,
  );
  // a report kept by an older version (no ruledOut on its suspects) shows one list, as it did
  const old = report();
  delete (old.suspects[0] as Partial<(typeof old.suspects)[0]>).ruledOut;
  assert.doesNotMatch(whatChangedHtml(old, { cspSource: "'self'", nonce: NONCE }), /kg-ruled-out">/);
  assert.doesNotMatch(renderWhatChangedMarkdown(old), /####/);
});

void test('messages from the page are validated: anything else is dropped', () => {
  assert.deepEqual(parseWhatChangedViewMessage({ type: 'open', suspect: 0, evidence: 1 }), {
    type: 'open',
    suspect: 0,
    evidence: 1,
  });
  assert.deepEqual(parseWhatChangedViewMessage({ type: 'copy' }), { type: 'copy' });
  assert.equal(parseWhatChangedViewMessage({ type: 'open', suspect: -1, evidence: 0 }), undefined);
  assert.equal(parseWhatChangedViewMessage({ type: 'open', suspect: '0', evidence: 0 }), undefined);
  assert.equal(parseWhatChangedViewMessage({ type: 'run', command: 'rm -rf /' }), undefined);
  assert.equal(parseWhatChangedViewMessage(null), undefined);
});

void test('a report panel is restored from an id the page keeps; the report itself stays with the extension', () => {
  const html = whatChangedHtml(report(), {
    cspSource: "'self'",
    nonce: NONCE,
    state: { v: 1, id: 'abcDEF123_-x' },
  });
  // the page keeps the id in a data block (never run: no nonce, not JavaScript) and nothing of the report's links
  assert.match(html, /<script type="application\/json" id="kg-state">\{"v":1,"id":"abcDEF123_-x"\}<\/script>/);
  assert.equal((html.match(/<script nonce=/g) ?? []).length, 1);
  assert.doesNotMatch(html, /checkpoint\.pt/);
  assert.deepEqual(parseWhatChangedPageState({ v: 1, id: 'abcDEF123_-x' }), { v: 1, id: 'abcDEF123_-x' });
  assert.equal(parseWhatChangedPageState({ v: 1, id: '../../x' }), undefined);
  assert.equal(parseWhatChangedPageState({ v: 2, id: 'abcDEF123_-x' }), undefined);
  assert.equal(parseWhatChangedPageState('abcDEF123_-x'), undefined);
  // what the extension keeps parses back whole; a damaged one is refused (the panel is then closed, not half shown)
  const kept = JSON.parse(JSON.stringify({ v: 1, hostId: 'local', run: '/r', report: report() })) as unknown;
  const back = parseWhatChangedPanelState(kept);
  assert.ok(back);
  assert.equal(back.report.headline, report().headline);
  assert.deepEqual(back.report, report());
  assert.equal(parseWhatChangedPanelState({ v: 1, hostId: 'local', run: '/r', report: { headline: 1 } }), undefined);
  assert.equal(parseWhatChangedPanelState(undefined), undefined);
});

void test('JSON in the page stays data: no character can end or change its block', () => {
  const v = { a: '</script><script>alert(1)</script>', b: '<!-- & \u2028 \u2029 >' };
  const s = jsonForScriptBlock(v);
  assert.doesNotMatch(s, /[<>&\u2028\u2029]/);
  assert.deepEqual(JSON.parse(s), v);
});
