import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';
import { join } from 'node:path';

/**
 * A link with a real round-trip time on loopback: a TCP relay in front of a local server (the test sshd) that holds
 * each direction's bytes for half the RTT and passes them on unchanged and in order. `tc netem` would do this in the
 * kernel; this machine's kernel has no netem, and a relay also lets the round trips be counted where they happen.
 *
 * A TCP connection's own handshake is part of the link: the client's bytes are held until one RTT after it connected
 * (what SYN, SYN-ACK would cost it), the server is dialled half an RTT after the accept, and that handshake counts as
 * one round trip.
 *
 * Round trips, per connection: a client→server write made while the client is not waiting (the first since the count
 * started, or the first after its last turn was answered) begins a turn; the turn is one round trip once the client is
 * delivered server bytes that the server sent after the turn's first bytes reached it (the first bytes that can be
 * an answer to it). So a burst of writes the client makes before it hears back is one round trip however many
 * requests it holds; what the server says of its own accord or answers late to an earlier turn (its banner, its host
 * keys after login, the other of two answers) ends no turn, and a write the client makes on hearing it belongs to the
 * turn it waits in; a write nothing answers (a channel close sent back, a disconnect) is none. So the count is the
 * chain of waits the client went through, one after another, which is what the RTT multiplies. The count is the sum
 * over the relay's connections (a client that waits on two at once is counted twice).
 *
 * Bounded: loopback only (listens on 127.0.0.1, dials 127.0.0.1), at most `maxQueuedBytes` held per direction of a
 * connection (the sender is paused above it), and the relay closes itself after `lifetimeMs` (timer unref'd).
 */
export interface DelayRelayOptions {
  /** The round-trip time to add, ms (each direction is held for half of it). */
  rttMs: number;
  /** The server's port on 127.0.0.1. */
  targetPort: number;
  /** Bytes held per direction of one connection before its sender is paused (default 8 MiB). */
  maxQueuedBytes?: number;
  /** The relay closes itself after this long (default 20 minutes). */
  lifetimeMs?: number;
}

export interface LinkCount {
  /** Turns the client waited for (see DelayRelay), the TCP handshakes included. */
  roundTrips: number;
  /** TCP connections accepted. */
  connections: number;
  bytesUp: number;
  bytesDown: number;
}

interface Held {
  /** When the relay read it from its sender. */
  taken: number;
  /** The client's turn it was written in (server bytes: 0). */
  turn: number;
  due: number;
  data: Buffer | null; // null: the sender ended its side
}

/** One direction of one connection: bytes held until their time, in order, then written to `to`. */
class Lane {
  private readonly queue: Held[] = [];
  private queued = 0;
  private timer: NodeJS.Timeout | undefined;
  private blocked = false;

  constructor(
    private readonly from: () => Socket | undefined,
    private readonly to: () => Socket | undefined,
    private readonly delayMs: number,
    private readonly maxQueued: number,
    private readonly onDelivered: (bytes: number, held: Held) => void,
  ) {}

  hold(data: Buffer | null, notBefore: number, turn = 0): void {
    const taken = performance.now();
    const due = Math.max(taken, notBefore) + this.delayMs;
    this.queue.push({ taken, turn, due, data });
    if (data) {
      this.queued += data.length;
      if (this.queued > this.maxQueued) this.from()?.pause();
    }
    this.pump();
  }

  /** The destination is there now (the server is dialled late) or drained: go on. */
  pump(): void {
    if (this.timer || this.blocked) return;
    const to = this.to();
    if (!to) return;
    const now = performance.now();
    while (this.queue.length && this.queue[0]!.due <= now) {
      const h = this.queue.shift()!;
      if (!h.data) {
        to.end();
        continue;
      }
      this.queued -= h.data.length;
      if (this.queued <= this.maxQueued / 2) this.from()?.resume();
      const more = to.write(h.data);
      this.onDelivered(h.data.length, h);
      if (!more) {
        this.blocked = true;
        to.once('drain', () => {
          this.blocked = false;
          this.pump();
        });
        return;
      }
    }
    if (this.queue.length) {
      // Delivered in the check phase, after the poll phase has read what the client wrote meanwhile: a write that
      // reached this process before the answer was delivered is counted as made before it (in a relay of its own
      // process, exactly what the kernel saw; see DelayRelayProcess).
      this.timer = setTimeout(
        () =>
          setImmediate(() => {
            this.timer = undefined;
            this.pump();
          }),
        Math.max(0, this.queue[0]!.due - now),
      );
    }
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.queue.length = 0;
  }
}

/**
 * The turn state of one connection. A turn begins with a client write made while not asking; it ends with the first
 * server bytes the server sent after that write reached it: bytes it sent before (its banner, a message of its own,
 * the late answer to an earlier question) could not answer it, and a write the client makes on hearing them is still
 * part of the same wait.
 */
class Turns {
  private asking = false;
  /** The current turn's number: bytes carry the turn they were written in. */
  private turn = 0;
  /** When the turn's first bytes were handed to the server (undefined while the link still holds them). */
  private reached: number | undefined;
  constructor(private readonly answered: () => void) {}
  /** A client write: the turn it belongs to. */
  clientWrote(): number {
    if (!this.asking) {
      this.asking = true;
      this.turn++;
      this.reached = undefined;
    }
    return this.turn;
  }
  /** Bytes of turn `turn` handed to the server at `at` (bytes of an earlier turn still on the way say nothing). */
  reachedServer(turn: number, at: number): void {
    if (this.asking && turn === this.turn && this.reached === undefined) this.reached = at;
  }
  /** Server bytes delivered to the client; `taken`: when the relay read them from the server. */
  serverDelivered(taken: number): void {
    if (!this.asking || this.reached === undefined || taken < this.reached) return;
    this.asking = false;
    this.answered();
  }
  reset(): void {
    this.asking = false;
  }
}

export class DelayRelay {
  private count: LinkCount = { roundTrips: 0, connections: 0, bytesUp: 0, bytesDown: 0 };
  private readonly sockets = new Set<Socket>();
  private readonly turns = new Set<Turns>();
  private readonly lanes = new Set<Lane>();
  private readonly lifetime: NodeJS.Timeout;
  private closed = false;
  private readonly closeListeners: Array<() => void> = [];

  private readonly server: Server;
  private portV = 0;

  private constructor(private readonly options: DelayRelayOptions) {
    this.server = createServer({ noDelay: true }, (client) => this.accept(client));
    this.lifetime = setTimeout(() => void this.close(), options.lifetimeMs ?? 20 * 60_000);
    this.lifetime.unref();
  }

  get port(): number {
    return this.portV;
  }

  get rttMs(): number {
    return this.options.rttMs;
  }

  static async start(options: DelayRelayOptions): Promise<DelayRelay> {
    if (!(options.rttMs >= 0) || !Number.isInteger(options.targetPort))
      throw new Error(`a delay relay needs an RTT ≥ 0 and a port (got ${options.rttMs}, ${options.targetPort})`);
    const relay = new DelayRelay(options);
    await new Promise<void>((resolve, reject) => {
      relay.server.once('error', reject);
      relay.server.listen(0, '127.0.0.1', () => resolve());
    });
    relay.portV = (relay.server.address() as AddressInfo).port;
    return relay;
  }

  /** What was counted since the relay started or `reset()` was last called. */
  counted(): LinkCount {
    return { ...this.count };
  }

  /** A fresh count: call it when the link is quiet (no turn half-way). */
  reset(): void {
    this.count = { roundTrips: 0, connections: 0, bytesUp: 0, bytesDown: 0 };
    for (const t of this.turns) t.reset();
  }

  private accept(client: Socket): void {
    const options = this.options;
    if (this.closed) {
      client.destroy();
      return;
    }
    const half = options.rttMs / 2;
    const max = options.maxQueuedBytes ?? 8 * 1024 * 1024;
    const accepted = performance.now();
    // SYN, SYN-ACK: the client could not send before one RTT had passed; the server hears of it after half.
    const canSend = accepted + options.rttMs;
    this.count.connections++;
    this.count.roundTrips++;
    let server: Socket | undefined;
    const turns = new Turns(() => this.count.roundTrips++);
    this.turns.add(turns);
    this.sockets.add(client);
    client.setNoDelay(true);
    const up = new Lane(
      () => client,
      () => server,
      half,
      max,
      (n, held) => {
        this.count.bytesUp += n;
        turns.reachedServer(held.turn, performance.now());
      },
    );
    const down = new Lane(
      () => server,
      () => client,
      half,
      max,
      (n, held) => {
        this.count.bytesDown += n;
        turns.serverDelivered(held.taken);
      },
    );
    this.lanes.add(up);
    this.lanes.add(down);
    const end = () => {
      up.stop();
      down.stop();
      this.lanes.delete(up);
      this.lanes.delete(down);
      this.turns.delete(turns);
      client.destroy();
      server?.destroy();
      if (server) this.sockets.delete(server);
      this.sockets.delete(client);
    };
    // The client's bytes are taken as written when the link lets them go (after the handshake), in order.
    const released: Buffer[] = [];
    let releaseTimer: NodeJS.Timeout | undefined;
    const sendUp = (data: Buffer | null) => {
      up.hold(data, canSend, data ? turns.clientWrote() : 0);
    };
    client.on('data', (d: Buffer) => {
      if (performance.now() >= canSend && !released.length) sendUp(d);
      else {
        released.push(d);
        releaseTimer ??= setTimeout(
          () => {
            for (const b of released.splice(0)) sendUp(b);
          },
          Math.max(0, canSend - performance.now()),
        );
      }
    });
    client.on('end', () => {
      for (const b of released.splice(0)) sendUp(b);
      clearTimeout(releaseTimer);
      sendUp(null);
    });
    client.on('error', end);
    client.on('close', end);
    setTimeout(() => {
      if (this.closed || client.destroyed) return end();
      const s = connect({ host: '127.0.0.1', port: options.targetPort, noDelay: true });
      server = s;
      this.sockets.add(s);
      s.on('data', (d: Buffer) => down.hold(d, 0));
      s.on('end', () => down.hold(null, 0));
      s.on('error', end);
      s.on('close', end);
      up.pump();
    }, half);
  }

  /** Called once the relay has closed (by `close()` or at its lifetime). */
  onClose(listener: () => void): void {
    this.closeListeners.push(listener);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.lifetime);
    for (const l of this.lanes) l.stop();
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
    for (const l of this.closeListeners.splice(0)) l();
  }
}

/**
 * A DelayRelay in a process of its own (test/support/delayRelayMain.ts), for counting a client that runs in this
 * process: a relay sharing the client's event loop sees the client's writes only when that loop lets it, and could
 * take a write made before an answer for one made after. Its own process reads what the kernel holds before it
 * delivers. It ends with this process (its stdin closes) or at its lifetime.
 */
export class DelayRelayProcess {
  private readonly waiting: Array<(line: string) => void> = [];

  private readonly child: ChildProcess;
  private readonly listening: Promise<number>;
  private portV = 0;

  private constructor(
    readonly rttMs: number,
    options: DelayRelayOptions,
  ) {
    this.child = spawn(
      process.execPath,
      ['--import', 'tsx', join(__dirname, 'delayRelayMain.ts'), JSON.stringify(options)],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    );
    let buf = '';
    let port: ((n: number) => void) | undefined;
    this.listening = new Promise<number>((resolve, reject) => {
      port = resolve;
      this.child.once('exit', (code) => reject(new Error(`the delay relay exited with ${code} before listening`)));
    });
    this.child.stdout?.setEncoding('utf8');
    this.child.stdout?.on('data', (d: string) => {
      buf += d;
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (port) {
          port((JSON.parse(line) as { port: number }).port);
          port = undefined;
        } else this.waiting.shift()?.(line);
      }
    });
  }

  get port(): number {
    return this.portV;
  }

  static async start(options: DelayRelayOptions): Promise<DelayRelayProcess> {
    const relay = new DelayRelayProcess(options.rttMs, options);
    relay.portV = await relay.listening;
    return relay;
  }

  private ask(command: 'reset' | 'count'): Promise<string> {
    return new Promise((resolve, reject) => {
      if (this.child.exitCode !== null) return reject(new Error('the delay relay has exited'));
      this.waiting.push(resolve);
      this.child.stdin?.write(`${command}\n`);
    });
  }

  async reset(): Promise<void> {
    await this.ask('reset');
  }

  async counted(): Promise<LinkCount> {
    return JSON.parse(await this.ask('count')) as LinkCount;
  }

  async close(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const gone = new Promise((r) => this.child.once('exit', r));
    this.child.stdin?.end();
    const kill = setTimeout(() => this.child.kill('SIGKILL'), 5000);
    await gone;
    clearTimeout(kill);
  }
}
