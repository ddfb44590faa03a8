// HTML for the extension's webviews (the dashboard, the What Changed? report), built in the extension host.

/** Text as HTML: `&`, `<`, `>` and both quotes escaped (safe in element content and in quoted attributes). */
export function escapeHtml(s: string): string {
  return s
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

/**
 * The one Content-Security-Policy of the extension's webviews: nothing by default, scripts and styles by nonce (or,
 * for styles, from the webview's own resource origin), images and fonts from that origin, no eval, no network.
 */
export function webviewCsp(cspSource: string, nonce: string): string {
  return [
    "default-src 'none'",
    `img-src ${cspSource} data:`,
    // The toolkit's components style themselves with constructed stylesheets (adoptedStyleSheets) and uPlot through
    // element.style: neither is inline markup, so no 'unsafe-inline' is needed. The one <style> element the toolkit
    // creates (FAST's :focus-visible probe) takes its nonce from <meta property="csp-nonce">.
    `style-src ${cspSource} 'nonce-${nonce}'`,
    `script-src 'nonce-${nonce}'`,
    `font-src ${cspSource}`,
  ].join('; ');
}
