import { benchSummary, parseBenchConfig } from '../../core/bench/records';
import { benchProcess } from '../../core/bench/run';
import type { CliCommand } from './types';
import { flag, jsonOption, valued } from '../options';
import { printableTree } from '../output';

/**
 * `known-good bench HOST [--config tiny|gpu|JSON] [--compile]`: python/throughput_bench.py once, by the runner the
 * extension's terminal uses (core/bench/run.ts): progress lines as they come, on stderr, then the validated result
 * on stdout. No timeout: a compiled GPU run takes minutes; Ctrl+C stops the remote process.
 */
export const benchCommand: CliCommand = {
  name: 'bench',
  usage: 'bench HOST [--config tiny|gpu|JSON] [--compile] [--json]',
  summary: 'run the throughput benchmark there (progress on stderr, result JSON on stdout)',
  options: [
    valued('config', 'tiny|gpu|JSON', 'the benchmark shape (default tiny on CPU)', (o, v) => (o.config = v)),
    flag('compile', 'torch.compile the model (compile time reported on its own)', (o) => (o.compile = true)),
    jsonOption('print { result, python }: the result and the interpreter that gave it'),
  ],
  async run({ session, options, signal, out, err }) {
    const config =
      options.config !== undefined
        ? parseBenchConfig(options.config, options.compile)
        : options.compile
          ? { compile: true }
          : {};
    const color = (err as NodeJS.WriteStream).isTTY === true;
    // Pipes, not a pty: the output is read, not typed into.
    const bench = benchProcess(
      { transport: session.transport, python: session.spec.python, label: session.label },
      config,
      { pty: false, color },
    );
    const { runner } = bench;
    runner.onOutput((text) => err.write(text.replace(/\r\n/g, '\n')));
    const stop = () => runner.stop();
    signal.addEventListener('abort', stop, { once: true });
    try {
      await runner.start();
      const exit = await runner.exited;
      if (exit.error !== undefined) return 255;
      const { value, python } = bench.result();
      err.write(benchSummary(printableTree(value)).join('\n') + '\n');
      out.write(JSON.stringify(options.json ? { result: value, python } : value, null, 2) + '\n');
      return exit.exitCode ?? 1;
    } finally {
      signal.removeEventListener('abort', stop);
    }
  },
};
