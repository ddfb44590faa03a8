/*
 * A probe run in a terminal prints its JSON result between the nonce's marker lines, on the same stream the user
 * watches. The person sees a dimmed one-line note instead of the document; the full text is kept for extraction.
 */

export function frameMarkers(nonce: string): { begin: string; end: string } {
  return { begin: `@@KNOWN-GOOD-BEGIN ${nonce}@@`, end: `@@KNOWN-GOOD-END ${nonce}@@` };
}

/** The longest k < marker.length such that `text` ends with the first k characters of `marker`. */
function partialSuffix(text: string, marker: string): number {
  for (let k = Math.min(text.length, marker.length - 1); k > 0; k--) {
    if (text.endsWith(marker.slice(0, k))) return k;
  }
  return 0;
}

export const DIM = '\x1b[2m';
export const RESET = '\x1b[0m';

/**
 * Streams text through, hiding each framed block. Markers may be split across chunks: a tail that could be the start
 * of a marker is held back until the next chunk (or `flush`), everything else passes at once, so a prompt without a
 * newline still shows.
 */
export class FrameFilter {
  private pending = '';
  private hiding = false;
  private hidden = 0;
  private readonly begin: string;
  private readonly end: string;
  /** How many framed blocks were hidden so far. */
  blocks = 0;

  constructor(
    nonce: string,
    private readonly color = true,
  ) {
    ({ begin: this.begin, end: this.end } = frameMarkers(nonce));
  }

  push(chunk: string): string {
    this.pending += chunk;
    let out = '';
    for (;;) {
      if (!this.hiding) {
        const i = this.pending.indexOf(this.begin);
        if (i >= 0) {
          out += this.pending.slice(0, i);
          this.pending = this.pending.slice(i + this.begin.length);
          this.hiding = true;
          this.hidden = 0;
          continue;
        }
        const keep = partialSuffix(this.pending, this.begin);
        out += this.pending.slice(0, this.pending.length - keep);
        this.pending = this.pending.slice(this.pending.length - keep);
        return out;
      }
      const j = this.pending.indexOf(this.end);
      if (j >= 0) {
        this.hidden += j;
        this.pending = this.pending.slice(j + this.end.length);
        this.hiding = false;
        this.blocks++;
        const note = `[result captured: ${formatSize(this.hidden)} of JSON between the frame markers]`;
        out += this.color ? `${DIM}${note}${RESET}` : note;
        continue;
      }
      const keep = partialSuffix(this.pending, this.end);
      this.hidden += this.pending.length - keep;
      this.pending = this.pending.slice(this.pending.length - keep);
      return out;
    }
  }

  /** At the end of the stream: what was held back (an unterminated frame stays hidden). */
  flush(): string {
    const rest = this.hiding ? '' : this.pending;
    this.pending = '';
    return rest;
  }
}

function formatSize(chars: number): string {
  return chars < 1024 ? `${chars} B` : `${(chars / 1024).toFixed(1)} KB`;
}
