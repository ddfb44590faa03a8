// Webview entry (bundled by scripts/build.mjs into dist/webview/dashboard.js + dashboard.css).
import './zodConfig';
import './dashboard.css';
import { parseHostMessage } from '../../src/core/dashboard/protocol';
import { registerComponents } from './components';
import { Dashboard } from './dashboard';
import { connectHost } from './vscodeApi';

async function main(): Promise<void> {
  const root = document.getElementById('app');
  if (!root) throw new Error('dashboard: #app missing from the page');
  const host = connectHost();
  await registerComponents();
  const dashboard = new Dashboard(root, host);
  window.addEventListener('message', (event: MessageEvent<unknown>) => {
    const parsed = parseHostMessage(event.data);
    if (!parsed.ok) {
      console.warn(`[known-good] ignored a message from the host: ${parsed.error}`);
      return;
    }
    try {
      dashboard.handle(parsed.message);
    } catch (e) {
      console.error('[known-good] dashboard failed on a message', e);
    }
  });
  // Listening first, then ready: the host posts nothing before it.
  dashboard.start();
}

main().catch((e: unknown) => {
  console.error('[known-good] dashboard failed to start', e);
  const root = document.getElementById('app');
  if (root) root.textContent = `Dashboard failed to start: ${e instanceof Error ? e.message : String(e)}`;
});
