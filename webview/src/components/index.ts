// The only place that knows about @vscode/webview-ui-toolkit. It is archived upstream: to move to another kit
// (@vscode-elements/elements is where others went), change this folder and nothing else. Everything returned is a
// plain HTMLElement; callers get values through the callbacks, never through toolkit types.

let registered: Promise<void> | undefined;

/**
 * Defines the custom elements. Await it before creating any: a property set on an element before its upgrade would
 * shadow the component's own accessor. Loaded with import() because the toolkit ships as an ES module and this
 * project's TypeScript files are CommonJS to tsc; esbuild inlines it into the bundle all the same. (The price:
 * esbuild cannot tree-shake a dynamically imported module, so the bundle carries all of fast-foundation, ~200 KB
 * minified. It is read from disk, and dropping the toolkit removes it.)
 */
export function registerComponents(): Promise<void> {
  registered ??= import('@vscode/webview-ui-toolkit').then((tk) => {
    tk.provideVSCodeDesignSystem().register(
      tk.vsCodeButton(),
      tk.vsCodeCheckbox(),
      tk.vsCodeDropdown(),
      tk.vsCodeOption(),
      tk.vsCodeDivider(),
      tk.vsCodeDataGrid(),
      tk.vsCodeDataGridRow(),
      tk.vsCodeDataGridCell(),
    );
  });
  return registered;
}

function el(tag: string, attrs: Record<string, string | boolean | undefined> = {}, text?: string): HTMLElement {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === true) e.setAttribute(k, '');
    else if (typeof v === 'string') e.setAttribute(k, v);
  }
  if (text !== undefined) e.textContent = text;
  return e;
}

export interface ButtonOptions {
  appearance?: 'primary' | 'secondary' | 'icon';
  disabled?: boolean;
  title?: string;
  /** For tests and for finding the button again; set as data-action. */
  action?: string;
}

export function button(label: string, onClick: () => void, options: ButtonOptions = {}): HTMLElement {
  const b = el(
    'vscode-button',
    {
      appearance: options.appearance ?? 'secondary',
      disabled: options.disabled,
      title: options.title,
      'data-action': options.action,
    },
    label,
  );
  b.addEventListener('click', () => {
    if (!b.hasAttribute('disabled')) onClick();
  });
  return b;
}

export function setDisabled(control: HTMLElement, disabled: boolean): void {
  control.toggleAttribute('disabled', disabled);
}

export function checkbox(
  label: string,
  checked: boolean,
  onChange: (checked: boolean) => void,
  value?: string,
): HTMLElement {
  const c = el('vscode-checkbox', { checked, value, 'data-value': value }, label);
  c.addEventListener('change', () => onChange((c as HTMLInputElement).checked));
  return c;
}

export function dropdown(
  options: readonly { value: string; label: string; disabled?: boolean }[],
  value: string,
  onChange: (value: string) => void,
  title?: string,
): HTMLElement {
  const d = el('vscode-dropdown', { title });
  for (const o of options) {
    d.append(el('vscode-option', { value: o.value, selected: o.value === value, disabled: o.disabled }, o.label));
  }
  d.addEventListener('change', () => onChange((d as HTMLSelectElement).value));
  return d;
}

/** The toolkit has no slider; a native range input styled from the theme keeps all controls in this folder. */
export function slider(
  label: string,
  value: number,
  range: { min: number; max: number; step: number },
  onInput: (value: number) => void,
  format: (value: number) => string = String,
): HTMLElement {
  const wrap = el('label', { class: 'kg-slider' });
  const input = document.createElement('input');
  input.type = 'range';
  input.min = String(range.min);
  input.max = String(range.max);
  input.step = String(range.step);
  input.value = String(value);
  const shown = el('span', { class: 'kg-slider-value' }, format(value));
  input.addEventListener('input', () => {
    const v = Number(input.value);
    shown.textContent = format(v);
    onInput(v);
  });
  wrap.append(el('span', {}, label), input, shown);
  return wrap;
}

export function divider(): HTMLElement {
  return el('vscode-divider', { role: 'separator' });
}

/**
 * Not the toolkit's vscode-badge: its template binds a `style` attribute, which the dashboard's CSP (no
 * 'unsafe-inline') blocks and reports. A span with the same theme variables looks the same.
 */
export function badge(text: string, title?: string): HTMLElement {
  return el('span', { class: 'kg-badge', title }, text);
}

/** A read-only table. Rows are built as elements (not rowsData) so cells are plain text nodes, never HTML. */
export function dataGrid(
  columns: readonly { key: string; title: string; width?: string }[],
  rows: readonly Record<string, string>[],
  label = 'table',
): HTMLElement {
  const template = columns.map((c) => c.width ?? '1fr').join(' ');
  const grid = el('vscode-data-grid', {
    'aria-label': label,
    'generate-header': 'none',
    'grid-template-columns': template,
  });
  const header = el('vscode-data-grid-row', { 'row-type': 'header' });
  columns.forEach((c, i) =>
    header.append(el('vscode-data-grid-cell', { 'cell-type': 'columnheader', 'grid-column': String(i + 1) }, c.title)),
  );
  grid.append(header);
  for (const r of rows) {
    const row = el('vscode-data-grid-row');
    columns.forEach((c, i) =>
      row.append(el('vscode-data-grid-cell', { 'grid-column': String(i + 1) }, r[c.key] ?? '')),
    );
    grid.append(row);
  }
  return grid;
}
