import { escapeHtml, webviewCsp } from '../../src/core/util/html';

// The dashboard page, for the panel (src/dashboard/panel.ts) to set as webview.html. No DOM here: this runs in the
// extension host. The CSP allows only the panel's own resources: scripts by nonce, styles from the webview's
// resource origin (uPlot.min.css, dashboard.css) or by nonce, no eval, no network.

/** Files under dist/webview that the page loads; the panel turns them into webview URIs. */
export const DASHBOARD_SCRIPT = 'dashboard.js';
export const DASHBOARD_STYLES: readonly string[] = ['uPlot.min.css', 'dashboard.css'];

export interface DashboardHtmlOptions {
  /** webview.cspSource */
  cspSource: string;
  /** Fresh per page: letters and digits (e.g. 32 random base64url-free chars). */
  nonce: string;
  /** webview.asWebviewUri(dist/webview/dashboard.js).toString() */
  scriptUri: string;
  /** Same for DASHBOARD_STYLES, in that order. */
  cssUris: readonly string[];
  title?: string;
}

/** The dashboard's CSP: the one of every Known Good webview (src/core/util/html.ts). */
export const dashboardCsp = webviewCsp;

export function dashboardHtml(options: DashboardHtmlOptions): string {
  const { cspSource, nonce, scriptUri, cssUris } = options;
  if (!/^[A-Za-z0-9+/=_-]{16,}$/.test(nonce)) throw new Error('dashboardHtml: nonce must be 16+ base64 characters');
  // VS Code's cspSource is several sources, e.g. `'self' https://*.vscode-cdn.net`: each must be a plain host source
  // or 'self', so nothing like 'unsafe-eval' can be slipped in through it.
  const sources = cspSource.trim().split(/\s+/);
  if (cspSource.trim() === '' || !sources.every((t) => t === "'self'" || /^[^;'",]+$/.test(t))) {
    throw new Error('dashboardHtml: bad cspSource');
  }
  const links = cssUris.map((u) => `  <link rel="stylesheet" href="${escapeHtml(u)}" nonce="${nonce}">`).join('\n');
  return `<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="UTF-8">
  <meta http-equiv="Content-Security-Policy" content="${escapeHtml(dashboardCsp(cspSource.trim(), nonce))}">
  <meta name="viewport" content="width=device-width, initial-scale=1.0">
  <meta property="csp-nonce" content="${nonce}">
${links}
  <title>${escapeHtml(options.title ?? 'Known Good dashboard')}</title>
</head>
<body>
  <div id="app" class="kg-loading">Loading the dashboard…</div>
  <script nonce="${nonce}" src="${escapeHtml(scriptUri)}"></script>
</body>
</html>
`;
}
