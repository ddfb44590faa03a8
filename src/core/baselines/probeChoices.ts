import type { ProbeChoice } from '../probes/catalogue';
import { formatBytes } from '../util/format';
import { envSnapshotProbe, type EnvSnapshot } from './envProbe';

function cacheLines(s: EnvSnapshot): string[] {
  const caches = s.caches ?? [];
  if (!Array.isArray(caches) || caches.length === 0) return ['no compile caches found'];
  return caches.map((c) =>
    !c.exists
      ? `${c.name}: ${c.path} (absent)`
      : `${c.name}: ${c.path}  ${c.files ?? '?'} files, ${formatBytes(c.bytes)}` +
        (c.newestMtime ? `, newest ${new Date(c.newestMtime * 1000).toISOString().replace(/\.\d+Z$/, 'Z')}` : '') +
        (c.truncated ? ' (walk cut short)' : ''),
  );
}

function snapshotLines(s: EnvSnapshot): string[] {
  const t = s.torch;
  const lines = [
    `python ${s.python?.version ?? '?'} (${s.python?.executable ?? '?'})`,
    t?.found ? `torch ${t.version ?? '?'}  cuda ${t.cuda ?? 'none'}` : 'torch: not installed',
    `packages: ${s.packages?.count ?? '?'}`,
    `GPUs: ${s.gpus?.gpus?.map((g) => g.name).join(', ') || 'none'}`,
  ];
  return [...lines, ...cacheLines(s).map((l) => `cache ${l}`)];
}

/** Run Probe…'s "Environment snapshot" (its result can be saved as a baseline). */
export const envSnapshotChoice: ProbeChoice = {
  id: 'envSnapshot',
  label: 'Environment snapshot',
  detail: 'python/env_snapshot.py: packages, torch, CUDA, GPUs, env vars, caches (can be saved as a baseline)',
  call: (ctx) => envSnapshotProbe({ roots: ctx.roots }),
  summarize: (v) => snapshotLines(envSnapshotProbe().parse(v)).join('\n'),
};

/** Run Probe…'s "Compile-cache state": the cache part of the snapshot. */
export const compileCacheChoice: ProbeChoice = {
  id: 'compileCache',
  label: 'Compile-cache state',
  detail: 'python/env_snapshot.py, cache part: inductor/triton caches, files, size, newest entry',
  call: (ctx) => envSnapshotProbe({ roots: ctx.roots }),
  summarize: (v) => cacheLines(envSnapshotProbe().parse(v)).join('\n'),
};
