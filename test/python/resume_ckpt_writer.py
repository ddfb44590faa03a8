"""Writes the checkpoints of test_resume_facts.py and test/int/resumeFacts.int.test.ts into the folder argv[1].

Run by a torch interpreter (Debian's python3-torch here): real torch.save files.  The last ones have chosen storages
tagged cuda:0 through torch.serialization.register_package (see test_resume_facts.py's docstring), so that a CPU-only
machine writes the checkpoints a GPU run writes before and after a resume with map_location="cuda".
"""
import os
import sys

import torch

out = sys.argv[1]
torch.manual_seed(0)

def trained(opt_cls, **kw):
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = opt_cls(m.parameters(), **kw)
    m(torch.randn(3, 4)).sum().backward()
    opt.step()
    return m, opt

def path(name):
    return os.path.join(out, name)

m, adamw = trained(torch.optim.AdamW, lr=3e-4, weight_decay=0.1)
sched = torch.optim.lr_scheduler.StepLR(adamw, 10)
ck = {"model": m.state_dict(), "optimizer": adamw.state_dict(), "scheduler": sched.state_dict(), "step": 500,
      "rng_state": torch.get_rng_state(), "sampler": {"epoch": 0, "index": 1500}, "note": "no state"}
torch.save(ck, path("adamw.pt"))
torch.save(ck, path("adamw-legacy.pt"), _use_new_zipfile_serialization=False)

ms, sgd = trained(torch.optim.SGD, lr=0.1, momentum=0.9)
torch.save({"model": ms.state_dict(), "optimizer": sgd.state_dict(), "step": 10}, path("sgd.pt"))

torch.save({"epoch": 0, "global_step": 700, "pytorch-lightning_version": "2.4.0", "state_dict": m.state_dict(),
            "optimizer_states": [adamw.state_dict()], "lr_schedulers": [sched.state_dict()],
            "hyper_parameters": {"lr": 3e-4, "sched": "cosine"}}, path("lightning.ckpt"))

# torch before 1.12 kept step as a Python number
old = adamw.state_dict()
old["state"] = {k: dict(v, step=int(v["step"])) for k, v in old["state"].items()}
torch.save({"model": m.state_dict(), "optimizer": old}, path("adamw-number-step.pt"))

hf = path("checkpoint-500")
os.mkdir(hf)
torch.save(adamw.state_dict(), os.path.join(hf, "optimizer.pt"))
torch.save(sched.state_dict(), os.path.join(hf, "scheduler.pt"))
torch.save({"python": 1, "cpu": torch.get_rng_state()}, os.path.join(hf, "rng_state.pth"))
torch.save(m.state_dict(), os.path.join(hf, "pytorch_model.bin"))
with open(os.path.join(hf, "trainer_state.json"), "w") as f:
    f.write('{"global_step": 500, "log_history": []}')

acc = path("step_500")
os.mkdir(acc)
torch.save(adamw.state_dict(), os.path.join(acc, "optimizer.bin"))
torch.save({"step": 500}, os.path.join(acc, "random_states_0.pkl"))
torch.save(m.state_dict(), os.path.join(acc, "pytorch_model.bin"))

# The same AdamW state with chosen storages tagged cuda:0 (last: the tagger stays registered in this process).
def ptr(t):
    return (t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()).data_ptr()
steps = set(ptr(s["step"]) for s in adamw.state.values())
on_gpu = set(ptr(t) for t in m.state_dict().values()) | set(ptr(v) for s in adamw.state.values() for v in s.values())
tag = {"cuda:0": set()}
def tagger(storage):
    return "cuda:0" if storage.data_ptr() in tag["cuda:0"] else None
def deserializer(storage, location):
    return None
torch.serialization.register_package(0, tagger, deserializer)
tag["cuda:0"] = steps
torch.save(ck, path("adamw-step-cuda.pt"))
torch.save(ck, path("adamw-step-cuda-legacy.pt"), _use_new_zipfile_serialization=False)
# A GPU run as the GPU box writes it: weights and moments on cuda:0, AdamW's step counters on the host (before a
# restart), then everything on cuda:0 after a resume with torch.load(..., map_location="cuda").
tag["cuda:0"] = on_gpu - steps
torch.save(ck, path("gpu-before.pt"))
tag["cuda:0"] = on_gpu
torch.save(dict(ck, step=600), path("gpu-after.pt"))
