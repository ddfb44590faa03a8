import assert from 'node:assert/strict';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { describe, it } from 'node:test';
import { HAS_REMOTE_HOST_CONTEXT, VIEW_REMOTE_RUNS, WALKTHROUGH_ID, WalkthroughCommands } from '../../src/constants';
import { firstTime } from '../../src/core/util/firstTime';

/*
 * The Get Started walkthrough as package.json declares it: every step's button runs a command Known Good contributes,
 * every step is checked off by a command Known Good contributes, and its pictures exist, light and dark, small
 * enough to ship (.vscodeignore keeps media/).
 */

interface Step {
  id: string;
  title: string;
  description: string;
  completionEvents?: string[];
  media: { image?: Record<string, string>; altText?: string; svg?: string; markdown?: string };
}
interface Manifest {
  contributes: {
    commands: { command: string; title: string }[];
    walkthroughs: { id: string; title: string; steps: Step[] }[];
    viewsWelcome: { view: string; contents: string }[];
  };
}
const manifest = JSON.parse(readFileSync('package.json', 'utf8')) as Manifest;
const contributed = new Set(manifest.contributes.commands.map((c) => c.command));
const walkthrough = manifest.contributes.walkthroughs.find((w) => w.id === WALKTHROUGH_ID);
/** Media VS Code shows 400–800 px wide: a screenshot of that size stays well under this. */
const MAX_MEDIA_BYTES = 150 * 1024;

/** `[Title](command:id)` links alone on a line: VS Code draws them as the step's buttons. */
const buttons = (description: string) =>
  description
    .split('\n')
    .map((line) => /^\[[^\]]+\]\(command:([\w.]+)\)$/.exec(line.trim())?.[1])
    .filter((id): id is string => id !== undefined);

void describe('Get Started walkthrough (package.json contributes.walkthroughs)', () => {
  void it('has 5 to 7 steps with unique ids', () => {
    assert.ok(walkthrough, `no walkthrough ${WALKTHROUGH_ID}`);
    const ids = walkthrough.steps.map((s) => s.id);
    assert.ok(ids.length >= 5 && ids.length <= 7, `${ids.length} steps`);
    assert.equal(new Set(ids).size, ids.length);
  });

  for (const step of walkthrough?.steps ?? []) {
    void it(`step ${step.id}: a button that runs a contributed command, checked off by a command or a context key`, () => {
      const [button, ...more] = buttons(step.description);
      assert.ok(button, `${step.id} has no button (a command link on its own line)`);
      assert.deepEqual(more, [], 'one button a step');
      assert.ok(contributed.has(button), `${step.id}'s button runs ${button}, which Known Good does not contribute`);
      const events = step.completionEvents ?? [];
      assert.ok(events.length > 0, `${step.id} has no completionEvents (VS Code would check it off on any click)`);
      for (const e of events) {
        // a context key the extension sets (a host exists), not a command that may be started and cancelled
        if (e === `onContext:${HAS_REMOTE_HOST_CONTEXT}`) continue;
        const m = /^onCommand:([\w.]+)$/.exec(e);
        assert.ok(m, `${step.id}: ${e} is neither onCommand: nor onContext:${HAS_REMOTE_HOST_CONTEXT}`);
        assert.ok(contributed.has(m[1]!), `${step.id} completes on ${m[1]!}, which Known Good does not contribute`);
      }
    });

    void it(`step ${step.id}: its pictures exist, dark and light, each under ${MAX_MEDIA_BYTES / 1024} KB`, () => {
      const image = step.media.image;
      assert.ok(image, `${step.id} has no image`);
      assert.ok(step.media.altText?.trim(), `${step.id} has no altText`);
      assert.deepEqual(Object.keys(image).sort(), ['dark', 'hc', 'hcLight', 'light']);
      assert.notEqual(image['dark'], image['light'], 'dark and light are the same picture');
      for (const path of Object.values(image)) {
        assert.match(path, /^media\/walkthrough\/[\w-]+\.(png|svg)$/);
        assert.ok(existsSync(path), `${path} is missing`);
        assert.ok(statSync(path).size <= MAX_MEDIA_BYTES, `${path}: ${statSync(path).size} bytes`);
        if (path.endsWith('.png'))
          assert.deepEqual([...readFileSync(path).subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47], `${path} is no PNG`);
      }
    });
  }

  void it('the vsix ships the media; Get Started is a command and a link of Remote Runs’ welcome', () => {
    const ignore = readFileSync('.vscodeignore', 'utf8').split('\n');
    assert.ok(ignore.includes('!media/**'), '.vscodeignore must keep media/**');
    assert.ok(contributed.has(WalkthroughCommands.getStarted));
    const welcome = manifest.contributes.viewsWelcome.filter((w) => w.view === VIEW_REMOTE_RUNS);
    assert.ok(welcome.some((w) => buttons(w.contents).includes(WalkthroughCommands.getStarted)));
  });

  void it('opens by itself once: the first ask is remembered before it is answered', () => {
    const saved = new Map<string, unknown>();
    const store = {
      get: <T>(k: string) => saved.get(k) as T | undefined,
      update: (k: string, v: unknown) => (saved.set(k, v), Promise.resolve()),
    };
    assert.deepEqual([firstTime(store, 'k'), firstTime(store, 'k'), firstTime(store, 'other')], [true, false, true]);
  });
});
