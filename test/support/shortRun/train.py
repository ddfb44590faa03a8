"""A tiny real training loop on CPU (issue 32, item 8): a short run a user relaunches, then looks at at once.

One line of train_log.jsonl every --log_every steps with the loop's own speed and the wall time; a checkpoint
(torch.save, its args inside) every --save_every steps; resumed with --resume. --work is how many times the same block
runs per step: the parameters are the same whatever it is, so a run resumed with --work 8 -> 32 pays about 4x per step
for the same tokens.

The speed is timed on the process's CPU clock, not the wall clock: a test must give the same shift on a machine
other work keeps busy (two CPU hogs take a third of a window's wall time, at random), and one thread does the work.
The wall time of each line is the real one.

Test machinery, from the environment so that no checkpoint's args carry it: SHORT_RUN_ROTATE=1 starts the launch on a
new log file (the one before becomes train_log.jsonl.1, as a RotatingFileHandler leaves them); SHORT_RUN_HOLD=1
prints "ready" once the model is built and waits for a line on stdin before it reads its checkpoint.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--out_dir", required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--work", type=int, default=8)
    p.add_argument("--batch_size", type=int, default=4)
    p.add_argument("--seq", type=int, default=8)
    p.add_argument("--d_model", type=int, default=32)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--log_every", type=int, default=10)
    p.add_argument("--save_every", type=int, default=50)
    p.add_argument("--resume", default=None)
    p.add_argument("--seed", type=int, default=1234)
    return p.parse_args()


class Tiny(torch.nn.Module):
    def __init__(self, vocab, d_model):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d_model)
        self.up = torch.nn.Linear(d_model, 2 * d_model)
        self.down = torch.nn.Linear(2 * d_model, d_model)
        self.head = torch.nn.Linear(d_model, vocab)

    def forward(self, idx, work):
        x = self.tok(idx)
        for _ in range(work):
            x = x + self.down(torch.tanh(self.up(x)))
        return self.head(x)


def main():
    args = parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    model = Tiny(args.vocab, args.d_model)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    step = 0
    if os.environ.get("SHORT_RUN_HOLD") == "1":
        # started early, it says so and waits for a line on stdin before it reads its checkpoint: the relaunch then
        # costs a checkpoint load, whatever else the machine is doing
        print("ready", flush=True)
        sys.stdin.readline()
    if args.resume:
        ck = torch.load(args.resume, map_location="cpu")
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        step = ck["step"]
    os.makedirs(os.path.join(args.out_dir, "ckpt"), exist_ok=True)
    path = os.path.join(args.out_dir, "train_log.jsonl")
    if os.environ.get("SHORT_RUN_ROTATE") == "1" and os.path.exists(path):
        # each launch its own file, as a RotatingFileHandler leaves them: train_log.jsonl.1 is the one before
        n = 1
        while os.path.exists("%s.%d" % (path, n)):
            n += 1
        for i in range(n - 1, 0, -1):
            os.rename("%s.%d" % (path, i), "%s.%d" % (path, i + 1))
        os.rename(path, path + ".1")
    log = open(path, "a")
    gen = torch.Generator().manual_seed(args.seed + step)
    tokens = steps = 0
    window = time.process_time()
    while step < args.steps:
        batch = torch.randint(0, args.vocab, (args.batch_size, args.seq + 1), generator=gen)
        logits = model(batch[:, :-1], args.work)
        loss = F.cross_entropy(logits.reshape(-1, args.vocab), batch[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        tokens += args.batch_size * args.seq
        steps += 1
        if step % args.log_every == 0:
            took = time.process_time() - window
            log.write(json.dumps({"step": step, "loss": round(loss.item(), 5), "tok_s": round(tokens / took, 1),
                                  "steps_s": round(steps / took, 3), "time": round(time.time(), 3)}) + "\n")
            log.flush()
            tokens = steps = 0
            window = time.process_time()
        if step % args.save_every == 0:
            torch.save({"step": step, "args": args, "model": model.state_dict(), "optimizer": opt.state_dict()},
                       os.path.join(args.out_dir, "ckpt", "step_%d.pt" % step))
    log.close()


if __name__ == "__main__":
    main()
