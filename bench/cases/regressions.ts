import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { scoreCorpus, scoreTable, summarize } from '../../test/support/corpusScore';
import { materializeRealRuns } from '../../test/support/realRuns';
import type { BenchContext, BenchResult } from '../context';

/**
 * Issue 23: What Changed? on each run of the real regressions corpus over the loopback sshd, the score table printed
 * (right first, right in top 3, false alarms) and the median report time; the target is 2 s a report.
 */
export async function benchRegressions(ctx: BenchContext): Promise<BenchResult> {
  const dir = materializeRealRuns('regressions');
  try {
    const transport = await ctx.transport();
    const rows = await scoreCorpus({ id: transport.id, label: 'bench-sshd', probes: await ctx.probes('python3') }, dir);
    console.log(scoreTable(rows));
    const s = summarize(rows);
    return {
      case: `what changed on the real regressions corpus (${s.runs} runs) over ssh: median report`,
      ours_ms: s.medianMs,
      usual_ms: s.medianMs,
      target_ms: 2000,
      note: `right first ${s.rightFirst}/${s.runs}, right in top 3 ${s.rightTop3}, false alarms ${s.falseAlarms}; slowest ${Math.max(...rows.map((r) => r.ms)).toFixed(0)} ms`,
    };
  } finally {
    rmSync(dirname(dir), { recursive: true, force: true });
  }
}
