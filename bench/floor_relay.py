"""The floor of a small request on this host, for `npm run bench` (bench/cases/helperRequests.ts): JSON-line requests
on stdin, each answered with host_info's envelope on stdout, by the least code that can do it two ways.

  python3 floor_relay.py PYTHON_DIR inline   this process answers each request itself (no isolation)
  python3 floor_relay.py PYTHON_DIR child    each request is handed to a child forked before it arrived, which
                                             answers on stdout itself and exits (the resident helper's isolation)

No deadlines, no cancel, no limits, no state, no framing beyond the line: what is left is the processes, pipes and
wake-ups the design needs, and the probe's own work (kg_common.call_probe of host_info, as the helper's child runs
it). Spares are made ahead as the helper once made them: POOL of them once no request has come for IDLE_S, one for
each request of a burst (the helper now keeps knownGood.helper.spares, 4 by default): the floor of a child forked
ahead of every request.
"""
import gc
import json
import os
import select
import sys

sys.path.insert(0, sys.argv[1])
import host_info  # noqa: E402
import kg_common  # noqa: E402

POOL = 24
IDLE_S = 0.05


def answer(line):
    rid = json.loads(line)["id"]
    text = kg_common.call_probe(host_info.main, [])[1]
    os.write(1, ('{"id": %d, ' % rid + text[1:] + "\n").encode("ascii"))


def spare(r):
    line = os.read(r, 1 << 16)
    if line:
        answer(line)
    os._exit(0)


def main():
    child = sys.argv[2] == "child"
    kg_common.call_probe(host_info.main, [])  # what the helper learns once (platform, the user database)
    spares = []

    def make():
        r, w = os.pipe()
        gc.freeze()
        pid = os.fork()
        if pid == 0:
            os.close(w)
            spare(r)
        os.close(r)
        spares.append(w)

    buf = b""
    while True:
        if child and not select.select([0], [], [], IDLE_S)[0]:
            while len(spares) < POOL:
                make()
            continue
        data = os.read(0, 1 << 16)
        if not data:
            return
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if not child:
                answer(line)
                continue
            if not spares:
                make()
            w = spares.pop(0)
            os.write(w, line)
            os.close(w)
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass


if __name__ == "__main__":
    main()
