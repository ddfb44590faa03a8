// Colours come from VS Code's CSS variables, read when drawing: canvases cannot use var(), and VS Code swaps the
// variables (and the body class) when the user changes theme, after which every canvas is drawn again.

export interface Theme {
  kind: 'light' | 'dark' | 'high-contrast';
  foreground: string;
  /** Axis labels and tick text. */
  axis: string;
  grid: string;
  background: string;
  font: string;
  /** One per run, in run order (cycled). */
  runColors: string[];
  baseline: string;
}

// Fallbacks are VS Code's own dark-theme values, used outside VS Code when a variable is missing.
const RUN_COLOR_VARS: readonly [string, string][] = [
  ['--vscode-charts-blue', '#3794ff'],
  ['--vscode-charts-orange', '#d18616'],
  ['--vscode-charts-green', '#89d185'],
  ['--vscode-charts-purple', '#b180d7'],
  ['--vscode-charts-red', '#f14c4c'],
  ['--vscode-charts-yellow', '#cca700'],
];

let probe: HTMLElement | undefined;

/** A variable resolved to what the browser computes (rgb()/rgba()), so colours can be given an alpha. */
function readColor(variable: string, fallback: string): string {
  if (!probe) {
    probe = document.createElement('span');
    probe.style.display = 'none';
    document.body.append(probe);
  }
  probe.style.color = '';
  probe.style.color = `var(${variable}, ${fallback})`;
  return getComputedStyle(probe).color || fallback;
}

function readVar(variable: string, fallback: string): string {
  const v = getComputedStyle(document.documentElement).getPropertyValue(variable).trim();
  return v || fallback;
}

export function themeKind(): Theme['kind'] {
  const c = document.body.classList;
  if (c.contains('vscode-high-contrast') || c.contains('vscode-high-contrast-light')) return 'high-contrast';
  return c.contains('vscode-light') ? 'light' : 'dark';
}

export function readTheme(): Theme {
  const kind = themeKind();
  const foreground = readColor('--vscode-editor-foreground', kind === 'light' ? '#3b3b3b' : '#cccccc');
  const family = readVar('--vscode-font-family', 'system-ui, sans-serif');
  const size = readVar('--vscode-font-size', '13px');
  return {
    kind,
    foreground,
    axis: readColor('--vscode-charts-foreground', foreground),
    grid: readColor('--vscode-charts-lines', kind === 'light' ? 'rgba(97, 97, 97, 0.3)' : 'rgba(204, 204, 204, 0.25)'),
    background: readColor('--vscode-editor-background', kind === 'light' ? '#ffffff' : '#1f1f1f'),
    font: `${parseFloat(size) >= 12 ? Math.round(parseFloat(size) * 0.85) : 11}px ${family}`,
    runColors: RUN_COLOR_VARS.map(([v, f]) => readColor(v, f)),
    baseline: readColor('--vscode-charts-green', '#89d185'),
  };
}

/**
 * Calls `onChange` when VS Code switches theme: it changes the body class (vscode-light/-dark/-high-contrast) and
 * rewrites the variables in the html element's style attribute. Returns a function that stops watching.
 */
export function watchTheme(onChange: () => void): () => void {
  let pending = 0;
  const fire = (): void => {
    // Both attributes change together; draw once.
    cancelAnimationFrame(pending);
    pending = requestAnimationFrame(onChange);
  };
  const observer = new MutationObserver(fire);
  observer.observe(document.body, { attributes: true, attributeFilter: ['class'] });
  observer.observe(document.documentElement, { attributes: true, attributeFilter: ['style', 'class'] });
  return () => observer.disconnect();
}
