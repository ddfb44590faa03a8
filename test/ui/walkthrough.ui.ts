import * as assert from 'node:assert/strict';
import type { Locator } from 'playwright-core';
import { scenario, type Workbench } from './harness';

/*
 * Issue 25 item 6: the Get Started walkthrough. A first window (nothing configured) offers it in Remote Runs' welcome;
 * it opens with its five steps unchecked, each with its picture; running a step's command (its button: Capture
 * Environment Baseline of This machine) checks that step off and no other; "Known Good: Get Started" opens it again,
 * the step still checked.
 */

const steps = (vs: Workbench) => vs.page.locator('.gettingStartedContainer button.getting-started-step');
/** A step's check box, as the walkthrough page draws it (`data-done-step-id` ends with the step's own id). */
const checkOf = (vs: Workbench, stepId: string): Locator =>
  vs.page.locator(`.gettingStartedContainer [data-done-step-id$="#${stepId}"]`).first();

async function checked(vs: Workbench): Promise<Record<string, boolean>> {
  const out: Record<string, boolean> = {};
  for (const id of ['addHost', 'compareArgs', 'baseline', 'dashboard', 'whatChanged'])
    out[id] = (await checkOf(vs, id).getAttribute('aria-checked')) === 'true';
  return out;
}

scenario(
  'Get Started: the walkthrough opens from the welcome, and running a step’s command checks that step off',
  { timeoutMs: 240_000 },
  async (vs) => {
    const { page } = vs;
    await vs.openView('Known Good');
    const welcome = page.locator('#workbench\\.parts\\.sidebar .welcome-view-content');
    await welcome.getByText(/New to Known Good\?/).waitFor({ timeout: 60_000 });
    await welcome.getByRole('button', { name: 'Get Started' }).click();

    await page.locator('.gettingStartedContainer h2', { hasText: 'Get Started with Known Good' }).waitFor({
      timeout: 30_000,
    });
    await steps(vs).first().waitFor();
    assert.equal(await steps(vs).count(), 5);
    assert.deepEqual(await checked(vs), {
      addHost: false,
      compareArgs: false,
      baseline: false,
      dashboard: false,
      whatChanged: false,
    });

    // The baseline step: its picture is the dark one (the window's theme), its button runs the capture.
    const step = steps(vs).filter({ hasText: 'Capture an environment baseline' });
    await step.click();
    const picture = page.locator('.getting-started-media img[alt^="An environment baseline"]');
    await picture.waitFor({ timeout: 15_000 });
    assert.match(
      decodeURIComponent((await picture.getAttribute('srcset')) ?? ''),
      /media\/walkthrough\/baseline-dark\.png/,
    );
    await vs.screenshot('walkthrough-1-opened');
    await step.getByRole('button', { name: 'Capture Environment Baseline', exact: true }).click();
    // With This machine the only host the capture asks no host; the label box offers a dated default: keep it.
    const labelBox = (timeout: number) =>
      page
        .waitForFunction(
          () =>
            document.querySelector<HTMLInputElement>('.quick-input-widget input')?.value.startsWith('baseline ') ??
            false,
          undefined,
          { timeout },
        )
        .then(
          () => true,
          () => false,
        );
    if (!(await labelBox(5_000))) {
      await page.locator('.quick-input-widget input').fill('This machine');
      await page.locator('.quick-input-list .monaco-list-row', { hasText: 'This machine' }).first().waitFor();
      await page.keyboard.press('Enter');
      assert.ok(await labelBox(30_000), 'no label box after the host');
    }
    await page.keyboard.press('Enter');
    await page.waitForFunction(
      () =>
        document
          .querySelector('.gettingStartedContainer [data-done-step-id$="#baseline"]')
          ?.getAttribute('aria-checked') === 'true',
      undefined,
      { timeout: 30_000 },
    );
    assert.deepEqual(await checked(vs), {
      addHost: false,
      compareArgs: false,
      baseline: true,
      dashboard: false,
      whatChanged: false,
    });
    await vs.screenshot('walkthrough-2-step-done');

    // Known Good: Get Started opens it again, as it was.
    await vs.commandPalette('View: Close All Editors');
    await page.locator('.gettingStartedContainer').waitFor({ state: 'detached', timeout: 15_000 });
    await vs.commandPalette('Known Good: Get Started');
    await steps(vs).first().waitFor({ timeout: 30_000 });
    assert.equal((await checked(vs)).baseline, true);
    await vs.screenshot('walkthrough-3-reopened');
  },
);
