import { DelayRelay, type DelayRelayOptions } from './delayRelay';

/*
 * The delay relay as a process of its own (DelayRelayProcess): prints {"port": N} once listening, then answers each
 * line of stdin, "reset" with {} and "count" with the LinkCount, in order; stdin's end closes it.
 */
async function main(): Promise<void> {
  const relay = await DelayRelay.start(JSON.parse(process.argv[2] ?? '{}') as DelayRelayOptions);
  process.stdout.write(JSON.stringify({ port: relay.port }) + '\n');
  let buf = '';
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (d: string) => {
    buf += d;
    for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (line === 'reset') {
        relay.reset();
        process.stdout.write('{}\n');
      } else if (line === 'count') process.stdout.write(JSON.stringify(relay.counted()) + '\n');
    }
  });
  process.stdin.on('end', () => void relay.close().then(() => process.exit(0)));
  relay.onClose(() => process.exit(0));
}

void main();
