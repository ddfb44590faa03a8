"""Runs one probe program on one node of a Slurm step and prints its output as short lines tagged with the node.

srun merges the stdout of every task of a step into one stream: lines of different nodes interleave, and a line
longer than Slurm's I/O message is split and may be interleaved too.  So a node's whole output (the probe's framed
document and the tail of its stderr) is compressed, base64-encoded and printed as lines of at most ~900 bytes, each
naming the nonce and the node; the client puts them back together per node, whatever the order they arrive in.

The client pipes this file's source, then one call of ``fleet_main``, to ``python3 -`` on every node of the step
(``srun --input=all``).  A watchdog ends the node's probe at its deadline and still reports what it had; a
heartbeat line every few seconds lets the client tell a node that went away from one that is still working.
"""
import base64
import io
import json
import os
import socket
import sys
import threading
import time
import zlib

CHUNK = 800
STDERR_TAIL = 4000


class _Tail(io.StringIO):
    """A stderr that keeps only its last STDERR_TAIL characters (a benchmark prints a line per step)."""

    def write(self, s):
        n = io.StringIO.write(self, s)
        if self.tell() > 4 * STDERR_TAIL:
            keep = self.getvalue()[-STDERR_TAIL:]
            self.seek(0)
            self.truncate()
            io.StringIO.write(self, keep)
        return n


def node_name():
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def encode(doc):
    return base64.b64encode(zlib.compress(json.dumps(doc).encode("utf-8"), 6)).decode("ascii")


def emit_lines(out, nonce, node, payload, status):
    lines = []
    count = 0
    for i in range(0, len(payload), CHUNK):
        lines.append("@@KG-FLEET %s %s %d %s\n" % (nonce, node, count, payload[i:i + CHUNK]))
        count += 1
    lines.append("@@KG-FLEET-END %s %s %d %s\n" % (nonce, node, count, status))
    out.write("".join(lines))
    out.flush()


def fleet_main(program, nonce, timeout_s, beat_s=5.0):
    real_out = sys.stdout
    node = node_name()
    buf_out = io.StringIO()
    buf_err = _Tail()
    t0 = time.time()
    lock = threading.Lock()
    done = []

    def report(status):
        with lock:  # one report per node, never interleaved with a heartbeat line
            if done:
                return False
            done.append(status)
            doc = {"out": buf_out.getvalue(), "err": buf_err.getvalue()[-STDERR_TAIL:],
                   "seconds": round(time.time() - t0, 3), "pid": os.getpid()}
            emit_lines(real_out, nonce, node, encode(doc), status)
        return True

    def watchdog():
        if report("timeout"):
            os._exit(124)

    def heartbeat():
        while True:
            with lock:
                if done:
                    return
                real_out.write("@@KG-FLEET-BEAT %s %s 0\n" % (nonce, node))
                real_out.flush()
            time.sleep(beat_s)

    beat = threading.Thread(target=heartbeat, name="kg_fleet:heartbeat")
    beat.daemon = True
    beat.start()

    timer = threading.Timer(timeout_s, watchdog)
    timer.daemon = True
    timer.start()
    sys.stdout = buf_out
    sys.stderr = buf_err
    status = "exit=0"
    try:
        exec(compile(program, "<probe>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
    except SystemExit as e:
        code = e.code
        status = "exit=%d" % (code if isinstance(code, int) else (0 if code is None else 1))
    except BaseException as e:  # reported with the node, never a traceback on srun's stream
        buf_err.write("%s: %s\n" % (type(e).__name__, e))
        status = "exit=1"
    finally:
        sys.stdout = real_out
        sys.stderr = sys.__stderr__
        timer.cancel()
    report(status)
