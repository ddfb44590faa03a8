"""A small real training loop for the replay tests (CPU, Debian's python3-torch).

torch.save every --save_every steps to <out_dir>/ckpt/step_N.pt (model, optimizer, step, args); one line of
<out_dir>/train_log.jsonl every --log_every steps: tok_s is tokens per CPU-second of this process (the replay tests
run beside other work: the CPU clock keeps a state's speed its own), devices the CUDA_VISIBLE_DEVICES it was given (the
GPU a replay chose for it). Resume with --resume <out_dir>/ckpt/step_N.pt.
What costs speed, each on its own: --work (mixing passes a step), --data (a file whose first line says the sample
length: attention costs grow with it), KG_REPLAY_SLOW=1 (each step done three times), and model.py's code.
Each launch also appends its argv to launches.txt in the folder it starts in, as real scripts write wandb/ or
lightning_logs/ there: a replay that started it in the run folder would change the run folder.
"""
import argparse
import json
import os
import sys
import time

import torch

import model as M


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--out_dir", default=".")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--resume", default=None)
    p.add_argument("--work", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--log_every", type=int, default=5)
    p.add_argument("--save_every", type=int, default=20)
    p.add_argument("--batch", type=int, default=8)
    return p.parse_args()


def main():
    args = parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    with open(args.data) as f:
        seq = int(f.readline().split("=")[1])
    net = M.Net()
    opt = torch.optim.AdamW(net.parameters(), lr=args.lr)
    start = 0
    if args.resume:
        ck = torch.load(args.resume, map_location="cpu", weights_only=False)
        net.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        start = ck["step"]
    with open("launches.txt", "a") as f:
        f.write(json.dumps(sys.argv[1:]) + "\n")
    os.makedirs(os.path.join(args.out_dir, "ckpt"), exist_ok=True)
    repeat = 3 if os.environ.get("KG_REPLAY_SLOW") == "1" else 1
    log = open(os.path.join(args.out_dir, "train_log.jsonl"), "a")
    cpu0 = time.process_time()
    tokens = 0
    for step in range(start + 1, args.steps + 1):
        for _ in range(repeat):
            x = torch.randn(args.batch, seq, net.width)
            loss = net(x, args.work).pow(2).mean()
            loss.backward()
        opt.step()
        opt.zero_grad()
        tokens += args.batch * seq
        if step % args.log_every == 0:
            cpu = time.process_time()
            rec = {"step": step, "loss": round(float(loss), 5), "tok_s": tokens / max(cpu - cpu0, 1e-6), "time": time.time(),
                   "devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
            log.write(json.dumps(rec) + "\n")
            log.flush()
            print("step %d tok/s %.1f" % (step, rec["tok_s"]), flush=True)
            cpu0, tokens = cpu, 0
        if step % args.save_every == 0:
            torch.save({"step": step, "args": vars(args), "model": net.state_dict(), "optimizer": opt.state_dict()},
                       os.path.join(args.out_dir, "ckpt", "step_%d.pt" % step))


if __name__ == "__main__":
    main()
