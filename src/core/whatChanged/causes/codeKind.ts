import type { CodeHunk } from '../factsProbe';
import type { SuspectCategory } from '../model';

/*
 * What kind of code change a file's hunks are: the lines of code they removed and added (comments and docstrings
 * already taken out on the host, python/code_diff.py) against the kinds known to move speed; and which files are
 * documentation or repository metadata, never run by training.
 */

/** A call that makes the host wait for the GPU. */
export const HOST_SYNC =
  /\.item\(\)|\.cpu\(\)|\.tolist\(\)|\.numpy\(\)|cuda\.synchronize\(|\.nonzero\(|print\(.*loss\b/;

/**
 * The kinds of change a line of code can show, most telling first: a line that matches several is the first's. Each
 * names what it touches, as the title says it ("precision/autocast changed", "a host sync added").
 */
const KINDS: readonly { re: RegExp; category: SuspectCategory; what: string }[] = [
  {
    re: /torch\.compile|(^|[^.\w])compile\(|_dynamo|inductor|cuda_?graphs?\b|CUDAGraph|torch\.jit\.(script|trace)|reduce-overhead|max-autotune/i,
    category: 'compile',
    what: 'torch.compile',
  },
  {
    re: /scaled_dot_product_attention|\bsdpa\b|sdp_kernel|enable_(flash|math|mem_efficient)_sdp|flash_?attn|attn_implementation|xformers|memory_efficient_attention/i,
    category: 'attention',
    what: 'the attention implementation',
  },
  {
    re: /autocast|GradScaler|float16|\.half\(\)|\bbf16\b|\bfp16\b|\bfp8\b|float32_matmul_precision|allow_tf32|\bamp\b|_amp\b|mixed_precision|precision\s*=\s*["'\d]/i,
    category: 'dtype',
    what: 'precision/autocast',
  },
  {
    re: /(^|[^\w])checkpoint(_sequential)?\(|utils\.checkpoint|gradient_checkpointing|activation_checkpoint|offload|empty_cache\(/i,
    category: 'memory',
    what: 'gradient checkpointing/offload',
  },
  { re: HOST_SYNC, category: 'host-sync', what: 'a host sync' },
  {
    re: /num_workers|pin_memory|prefetch_factor|persistent_workers|DataLoader\(/,
    category: 'dataloader',
    what: 'the data loader',
  },
  {
    re: /batch_size|block_size|seq_len|max_len|micro_batch|grad(ient)?_accum/i,
    category: 'shape',
    what: 'the batch/sequence shape',
  },
];

/** What a change to some lines of code is: its category, how the title says it, and the line that shows it. */
export interface CodeKind {
  category: SuspectCategory;
  /** `precision/autocast changed`, `a host sync added`, `torch.compile removed`, or `changed` for code of no kind. */
  label: string;
  /** The line that shows it (an added line first), trimmed; '' when none is known. */
  line: string;
}

const SHOWN = 100;

function short(line: string): string {
  const t = line.trim();
  return t.length > SHOWN ? `${t.slice(0, SHOWN - 1)}…` : t;
}

/** The lines of code a hunk removed and added; an older probe's hunks (no `added`) as written, `#` comments cut. */
function codeLines(h: CodeHunk): { removed: string[]; added: string[] } {
  if (h.added.length || h.removed.length || h.cosmetic) return { removed: h.removed, added: h.added };
  const plain = (ls: readonly string[]) => ls.map((l) => l.replace(/#.*$/, '').trim()).filter((l) => l);
  return { removed: plain(h.old), added: plain(h.new) };
}

/** The kind of change some hunks make: the first kind any of their changed lines of code shows, else plain code. */
export function codeKindOf(hunks: readonly CodeHunk[]): CodeKind {
  const removed = hunks.flatMap((h) => codeLines(h).removed);
  const added = hunks.flatMap((h) => codeLines(h).added);
  for (const k of KINDS) {
    const a = added.find((l) => k.re.test(l));
    const r = removed.find((l) => k.re.test(l));
    if (a === undefined && r === undefined) continue;
    const how = a !== undefined && r !== undefined ? 'changed' : a !== undefined ? 'added' : 'removed';
    return { category: k.category, label: `${k.what} ${how}`, line: short(a ?? r ?? '') };
  }
  const first = added[0] ?? (removed[0] !== undefined ? `removed: ${removed[0]}` : '');
  return { category: 'code', label: 'changed', line: short(first) };
}

const DOC_NAME =
  /^(readme|licen[cs]e|copying|notice|authors|contributors|contributing|changelog|changes|history|news|code_of_conduct|codeowners|security|todo|notes?)([._-].*)?$/i;
const META_FILE = /^\.(gitignore|gitattributes|mailmap|editorconfig|pre-commit-config\.ya?ml)$/;

/**
 * Why a file of the checkout is documentation or repository metadata (never run by a training launch), or null:
 * Markdown/reST/AsciiDoc anywhere, anything under a `docs/` or `doc/` folder or `.github/`, README/LICENSE/CHANGELOG/
 * AUTHORS… (a `.txt` only by such a name: requirements.txt or a vocab.txt is no documentation), and git's own files.
 */
export function docsWhy(path: string): string | null {
  const parts = path.split('/');
  const base = parts[parts.length - 1] ?? path;
  if (META_FILE.test(base) || parts.slice(0, -1).includes('.github')) return 'repository metadata: not run by training';
  if (/\.(md|markdown|rst|adoc)$/i.test(base) || parts.slice(0, -1).some((p) => /^docs?$/i.test(p)))
    return 'documentation: not run by training';
  if (DOC_NAME.test(base) && (!base.includes('.') || /\.(txt|md|rst)$/i.test(base) || /^licen|^copying/i.test(base)))
    return 'documentation: not run by training';
  return null;
}
