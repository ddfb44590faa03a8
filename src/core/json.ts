/**
 * JSON as Python writes it: `json.dumps` emits bare `NaN`, `Infinity` and `-Infinity`, which JSON.parse rejects.
 * They are parsed on purpose into the numbers they stand for, outside strings only.
 */
export function parsePythonJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    // fall through: only pay for the scan when the text has non-finite numbers
  }
  const marker = '"\ue000kg-nonfinite:';
  let out = '';
  let i = 0;
  let inString = false;
  while (i < text.length) {
    const c = text[i]!;
    if (inString) {
      out += c;
      if (c === '\\') {
        out += text[i + 1] ?? '';
        i += 2;
        continue;
      }
      if (c === '"') inString = false;
      i++;
      continue;
    }
    if (c === '"') {
      inString = true;
      out += c;
      i++;
      continue;
    }
    if (text.startsWith('NaN', i)) {
      out += `${marker}NaN"`;
      i += 3;
    } else if (text.startsWith('-Infinity', i)) {
      out += `${marker}-Infinity"`;
      i += 9;
    } else if (text.startsWith('Infinity', i)) {
      out += `${marker}Infinity"`;
      i += 8;
    } else {
      out += c;
      i++;
    }
  }
  return JSON.parse(out, (_key, value: unknown) => {
    if (typeof value === 'string' && value.startsWith(marker.slice(1))) {
      const v = value.slice(marker.length - 1);
      return v === 'NaN' ? NaN : v === 'Infinity' ? Infinity : -Infinity;
    }
    return value;
  });
}

/** JSON text with every non-ASCII character escaped, so it survives any remote locale. */
export function asciiJson(value: unknown): string {
  return JSON.stringify(value).replace(
    /[\u007f-\uffff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}
