"""A small real AdamW loop restarted the way a GPU run is (CPU, Debian's python3-torch), for What Changed?'s tests of
the restart itself (test/int/whatChangedRestart.int.test.ts).

torch.save every --save_every steps to <out_dir>/ckpt/step_N.pt ({"step", "args", "model", "optimizer"}); one line of
<out_dir>/train_log.jsonl every --log_every steps, tok_s being tokens per CPU-second of this process (work beside it
does not move a state's speed). Each launch starts a new log and rotates the last one's (train_log.1.jsonl, the
highest suffix oldest, as rotating loggers do): the new file and the step going back tell the restart whatever the
time between launches. Resume with --resume PATH.

How it resumes is this file's own line, RESUME_MAP, as in a real project: not a flag, so neither the command line nor
the args saved in the checkpoints say it, and it never changes at a restart. "cpu" is torch.load(...,
map_location="cpu"); "cuda" is what a GPU run gets from torch.load(..., map_location="cuda"): Optimizer.load_state_dict
moves every state tensor to its parameter's device except AdamW's `step` counters, which stay where torch.load put
them (on the GPU), and each step then reads every counter with `.item()`, a wait for the GPU's queued work. This
machine has no GPU, so with "cuda" the loop stands in for both sides of that, and nothing else:
- what the checkpoints say: the storages of the step counters are tagged cuda:0 when saved, through torch's own
  serialization registry (torch.serialization.register_package, as test/python/resume_ckpt_writer.py does), so the
  files are real torch checkpoints whose pickle names cuda:0 where a GPU run's would;
- what the speed shows: each step does its forward pass twice more (no gradient), the cost the waits have on a GPU in
  kind (a CPU has no queue to wait on), larger than the 13-18% measured there so that the test reads it beside any load.
"""
import argparse
import json
import os
import time

import torch
import torch.nn as nn

RESUME_MAP = "cpu"
WIDTH = 64


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.mix = nn.Linear(WIDTH, WIDTH)
        self.mlp = nn.Sequential(nn.Linear(WIDTH, 2 * WIDTH), nn.GELU(), nn.Linear(2 * WIDTH, WIDTH))

    def forward(self, x, work):
        h = x
        for _ in range(work):
            h = self.mix(h)
            h = torch.softmax(h @ h.transpose(1, 2) / WIDTH ** 0.5, dim=-1) @ h
        return self.mlp(h)


# Storages whose location torch.save writes as cuda:0 (the step counters after a resume onto the GPU); priority 0 is
# asked before torch's own cpu tagger (10).
ON_GPU = set()


def _tag(storage):
    return "cuda:0" if storage.data_ptr() in ON_GPU else None


def _never(storage, location):
    return None


torch.serialization.register_package(0, _tag, _never)


def _storage_ptr(t):
    return (t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()).data_ptr()


def rotated(stem):
    """stem.jsonl, the older launches' logs moved to stem.1.jsonl, stem.2.jsonl... first."""
    n = 1
    while os.path.exists("%s.%d.jsonl" % (stem, n)):
        n += 1
    for i in range(n - 1, 0, -1):
        os.rename("%s.%d.jsonl" % (stem, i), "%s.%d.jsonl" % (stem, i + 1))
    if os.path.exists(stem + ".jsonl"):
        os.rename(stem + ".jsonl", stem + ".1.jsonl")
    return stem + ".jsonl"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out_dir", default=".")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--resume", default=None)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--log_every", type=int, default=5)
    p.add_argument("--save_every", type=int, default=50)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--work", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    net = Net()
    opt = torch.optim.AdamW(net.parameters(), lr=args.lr)
    start = 0
    steps_on_gpu = False
    if args.resume:
        # no GPU here: loaded onto the CPU whatever RESUME_MAP says (see the docstring)
        ck = torch.load(args.resume, map_location="cpu")
        net.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        start = ck["step"]
        steps_on_gpu = RESUME_MAP == "cuda"
    os.makedirs(os.path.join(args.out_dir, "ckpt"), exist_ok=True)
    log = open(rotated(os.path.join(args.out_dir, "train_log")), "w")
    cpu0 = time.process_time()
    tokens = 0
    for step in range(start + 1, args.steps + 1):
        x = torch.randn(args.batch, args.seq, WIDTH)
        loss = net(x, args.work).pow(2).mean()
        loss.backward()
        if steps_on_gpu:
            with torch.no_grad():
                for _ in range(2):
                    net(x, args.work)
        opt.step()
        opt.zero_grad()
        tokens += args.batch * args.seq
        if step % args.log_every == 0:
            cpu = time.process_time()
            tok_s = tokens / max(cpu - cpu0, 1e-6)
            rec = {"step": step, "loss": round(float(loss), 5), "tok_s": tok_s, "time": time.time()}
            log.write(json.dumps(rec) + "\n")
            log.flush()
            cpu0, tokens = cpu, 0
        if step % args.save_every == 0:
            ON_GPU.clear()
            if steps_on_gpu:
                ON_GPU.update(_storage_ptr(s["step"]) for s in opt.state.values())
            torch.save({"step": step, "args": vars(args), "model": net.state_dict(), "optimizer": opt.state_dict()},
                       os.path.join(args.out_dir, "ckpt", "step_%d.pt" % step))


if __name__ == "__main__":
    main()
