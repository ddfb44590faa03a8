import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';
import { test } from 'node:test';
import { DelayRelay } from '../support/delayRelay';

/**
 * A line server: "q…" is answered "ok…", "wN" by "ok" after N ms, "echo N" by the next N bytes echoed, "bye" by
 * nothing; with `hello`, it says "hello" as soon as a connection comes (as sshd's banner).
 */
async function lineServer(hello = false): Promise<{ server: Server; port: number }> {
  const server = createServer((s) => {
    if (hello) s.write('hello\n');
    let buf = Buffer.alloc(0);
    let echo = 0;
    s.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      for (;;) {
        if (echo > 0) {
          const n = Math.min(echo, buf.length);
          if (!n) return;
          s.write(buf.subarray(0, n));
          buf = buf.subarray(n);
          echo -= n;
          continue;
        }
        const nl = buf.indexOf(10);
        if (nl < 0) return;
        const line = buf.subarray(0, nl).toString();
        buf = buf.subarray(nl + 1);
        if (line.startsWith('echo ')) echo = Number(line.slice(5));
        else if (line.startsWith('q')) s.write(`ok ${line}\n`);
        else if (/^w\d+$/.test(line)) setTimeout(() => s.write(`ok ${line}\n`), Number(line.slice(1)));
      }
    });
    s.on('error', () => undefined);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, port: (server.address() as AddressInfo).port };
}

/** A client that counts answer lines and can wait for the n-th. */
function lineClient(port: number) {
  const sock: Socket = connect({ host: '127.0.0.1', port, noDelay: true });
  let lines = 0;
  let want: { n: number; done: () => void } | undefined;
  sock.on('data', (d: Buffer) => {
    for (const b of d) if (b === 10) lines++;
    if (want && lines >= want.n) {
      const w = want;
      want = undefined;
      w.done();
    }
  });
  return {
    sock,
    /** Writes `text` and waits until `answers` more lines have come back. */
    ask(text: string, answers: number): Promise<void> {
      const n = lines + answers;
      const got = new Promise<void>((done) => (want = { n, done }));
      sock.write(text);
      return got;
    },
  };
}

async function withRelay(
  rttMs: number,
  fn: (relay: DelayRelay) => Promise<void>,
  maxQueuedBytes?: number,
  hello = false,
) {
  const { server, port } = await lineServer(hello);
  const relay = await DelayRelay.start({
    rttMs,
    targetPort: port,
    ...(maxQueuedBytes ? { maxQueuedBytes } : {}),
  });
  try {
    await fn(relay);
  } finally {
    await relay.close();
    server.close();
  }
}

void test('delay relay: 5 requests each awaited before the next are 5 round trips, plus 1 for the TCP handshake', () =>
  withRelay(10, async (relay) => {
    const c = lineClient(relay.port);
    const t0 = performance.now();
    for (let i = 0; i < 5; i++) await c.ask(`q${i}\n`, 1);
    const ms = performance.now() - t0;
    assert.deepEqual(
      { roundTrips: relay.counted().roundTrips, connections: relay.counted().connections },
      { roundTrips: 6, connections: 1 },
    );
    // a lower bound only: the link can make it slower, never faster (handshake + 5 turns)
    assert.ok(ms >= 6 * 10 - 1, `6 round trips of 10 ms took ${ms.toFixed(1)} ms`);
    c.sock.destroy();
  }));

void test('delay relay: 5 requests written before any answer are one round trip; a write nothing answers is none', () =>
  withRelay(10, async (relay) => {
    const c = lineClient(relay.port);
    await c.ask('q0\n', 1);
    relay.reset();
    await c.ask('q1\nq2\n', 2);
    assert.equal(relay.counted().roundTrips, 1);
    // written in separate calls before the answers come: still one turn
    const burst = c.ask('q3\n', 5);
    for (let i = 4; i < 8; i++) c.sock.write(`q${i}\n`);
    await burst;
    assert.equal(relay.counted().roundTrips, 2);
    // "bye" gets no answer: the client did not wait for anything
    c.sock.write('bye\n');
    // the next question after it is one more turn (the unanswered write and it are one burst)
    await c.ask('q8\n', 1);
    assert.equal(relay.counted().roundTrips, 3);
    c.sock.destroy();
  }));

void test('delay relay: what the server says before a question reached it answers nothing (its banner)', () =>
  withRelay(
    40,
    async (relay) => {
      // q1 is written at once; "hello" left the server before q1 reached it: the q2 written on hearing it is part of
      // the same wait, which the answers end (the TCP handshake, then one turn)
      const c = lineClient(relay.port);
      const hello = c.ask('q1\n', 1);
      await hello;
      await c.ask('q2\n', 2);
      assert.equal(relay.counted().roundTrips, 2);
      c.sock.destroy();
    },
    undefined,
    true,
  ));

void test('delay relay: an answer to an earlier turn ends no later one (two reads each started on its stat)', () =>
  withRelay(100, async (relay) => {
    const c = lineClient(relay.port);
    await c.ask('q0\n', 1);
    relay.reset();
    // a and b asked together; b's answer comes 10 ms after a's. On a's answer c is asked, on b's d: b's answer left
    // the server before c reached it, so c and d are one wait, not two.
    let answers = 0;
    const done = new Promise<void>((resolve) =>
      c.sock.on('data', (d: Buffer) => {
        for (const b of d) {
          if (b !== 10) continue;
          answers++;
          if (answers === 1) c.sock.write('q-c\n');
          if (answers === 2) c.sock.write('q-d\n');
          if (answers === 4) resolve();
        }
      }),
    );
    c.sock.write('q-a\nw10\n');
    await done;
    assert.equal(relay.counted().roundTrips, 2);
    c.sock.destroy();
  }));

void test('delay relay: two connections, each its own handshake and turns; the count is their sum', () =>
  withRelay(4, async (relay) => {
    const a = lineClient(relay.port);
    const b = lineClient(relay.port);
    await Promise.all([a.ask('q\n', 1), b.ask('q\n', 1)]);
    await a.ask('q\n', 1);
    assert.deepEqual(
      { roundTrips: relay.counted().roundTrips, connections: relay.counted().connections },
      { roundTrips: 5, connections: 2 },
    );
    a.sock.destroy();
    b.sock.destroy();
  }));

void test('delay relay: 2 MiB pass unchanged and in order through a 64 KiB bound per direction', () =>
  withRelay(
    2,
    async (relay) => {
      const payload = randomBytes(2 * 1024 * 1024);
      const sock = connect({ host: '127.0.0.1', port: relay.port, noDelay: true });
      const chunks: Buffer[] = [];
      let got = 0;
      const all = new Promise<void>((done) =>
        sock.on('data', (d: Buffer) => {
          chunks.push(d);
          got += d.length;
          if (got >= payload.length) done();
        }),
      );
      sock.write(`echo ${payload.length}\n`);
      for (let i = 0; i < payload.length; i += 10_000) sock.write(payload.subarray(i, i + 10_000));
      await all;
      assert.equal(Buffer.compare(Buffer.concat(chunks), payload), 0);
      assert.equal(relay.counted().bytesDown, payload.length);
      assert.equal(relay.counted().bytesUp, payload.length + `echo ${payload.length}\n`.length);
      sock.destroy();
    },
    64 * 1024,
  ));

void test('delay relay: refuses a negative RTT; closing it ends its connections', async () => {
  await assert.rejects(DelayRelay.start({ rttMs: -1, targetPort: 1 }), /RTT/);
  await withRelay(2, async (relay) => {
    const c = lineClient(relay.port);
    await c.ask('q\n', 1);
    const closed = once(c.sock, 'close');
    await relay.close();
    await closed;
  });
});
