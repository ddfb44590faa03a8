// Feeds the runs scripts/gpu/env_bisect.py made on the GPU box, in order, to the real engine
// (src/core/bisect/engine.ts) and prints its report: the engine must ask for exactly the states the box measured.
//   node --import tsx scripts/gpu/replay-bisect.ts RUNS.json
import { readFileSync } from 'node:fs';
import { bisect, type BisectChange, type BisectRound, type Measure } from '../../src/core/bisect/engine';
import { renderBisectMarkdown } from '../../src/core/bisect/render';

interface Recorded {
  changes: BisectChange[];
  benchArgs: string[];
  runs: { applied: string[]; value: number; wallS: number }[];
}

async function main(file: string): Promise<void> {
  const rec = JSON.parse(readFileSync(file, 'utf8')) as Recorded;
  let i = 0;
  const measure: Measure = (applied) => {
    const run = rec.runs[i++];
    const asked = [...applied].sort().join(',');
    if (!run) throw new Error(`the engine asked for run ${i} (${asked || 'good'}) but the box made ${rec.runs.length}`);
    if (run.applied.join(',') !== asked)
      throw new Error(`run ${i}: the engine asked for ${asked || 'good'}, the box measured ${run.applied.join(',')}`);
    return Promise.resolve(run.value);
  };
  const rounds: BisectRound[] = [];
  const wall = rec.runs.reduce((s, r) => s + r.wallS, 0);
  const timing = `Wall time of the runs: ${wall.toFixed(0)} s (${(wall / rec.runs.length).toFixed(1)} s a run).`;
  let report;
  try {
    report = await bisect(rec.changes, measure, { onEvent: (e) => e.kind === 'decided' && rounds.push(e.round) });
  } catch (e) {
    // The box's time ran out mid-search: the rounds it finished are still the engine's decisions on real runs.
    process.stdout.write(`${e instanceof Error ? e.message : String(e)}\nRounds decided before that:\n`);
    for (const r of rounds) {
      process.stdout.write(`- round ${r.index} (${r.kind}${r.extended ? ', extended' : ''}): ${r.decision}\n`);
      for (const st of r.states)
        process.stdout.write(
          `  - ${st.name}: median ${st.median.toFixed(0)} (${st.samples.map((v) => v.toFixed(0)).join(', ')})\n`,
        );
    }
    process.stdout.write(timing + '\n');
    return;
  }
  // The box's script may go on where the engine stops (e.g. it confirms a group the engine calls inconclusive): the
  // engine's report is on the runs it used, said first.
  if (i !== rec.runs.length) process.stdout.write(`The engine used ${i} of the box's ${rec.runs.length} runs.\n\n`);
  process.stdout.write(
    renderBisectMarkdown(report, { unit: 'tok/s', subject: `GPU box, throughput_bench ${rec.benchArgs.join(' ')}` }) +
      `\n${timing}\n`,
  );
}

main(process.argv[2] ?? '').catch((e: unknown) => {
  process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
