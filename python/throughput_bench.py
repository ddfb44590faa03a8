"""Training-step throughput of a transformer block stack on this host (needs torch; stdlib otherwise).

    throughput_bench.py [--layers N] [--width N] [--heads N] [--seq N] [--batch N] [--vocab N]
                        [--steps N] [--warmup N] [--dtype bf16|fp32|fp16] [--device auto|cuda|cpu]
                        [--compile] [--attention sdpa|flex]

A GPT-style stack (pre-norm attention + 4x GELU MLP, untied LM head) trained on random tokens with AdamW, so the
number depends on the software and the hardware, not on a dataset.  The first step (which compiles, when
compiling) is timed on its own and the warm-up steps are not measured; progress goes to stderr, one line per
step, and the result is one JSON document: tokens/s (median, min, max over the measured steps), step time,
estimated TFLOP/s, peak memory, compile time, the configuration and the software/hardware fingerprint.

Defaults: a tiny shape on CPU (runs in seconds anywhere), a meaningful one on CUDA (12 x 1024, seq 2048, batch 8,
bf16 autocast).  FLOPs per token use the PaLM convention: 6 * (non-embedding parameters) + 12 * layers * width *
seq (attention scores and values, forward and backward, causal mask not discounted).
"""
import math
import os
import platform
import sys
import time

import kg_common

# torch maps gigabytes of address space and a benchmark runs for minutes: no memory or CPU cap here.
KG_LIMITS = {"memory": None, "cpu": None}

CPU_DEFAULTS = {"layers": 2, "width": 64, "heads": 4, "seq": 64, "batch": 4, "vocab": 512, "steps": 6, "warmup": 1}
CUDA_DEFAULTS = {
    "layers": 12, "width": 1024, "heads": 16, "seq": 2048, "batch": 8, "vocab": 32768, "steps": 20, "warmup": 5,
}


def parse_args(argv):
    p = kg_common.arg_parser("throughput_bench.py", add_help=False)
    for name in ("layers", "width", "heads", "seq", "batch", "vocab", "steps", "warmup"):
        p.add_argument("--" + name, type=int, default=None)
    p.add_argument("--dtype", choices=("bf16", "fp32", "fp16"), default=None)
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--attention", choices=("sdpa", "flex"), default="sdpa")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def human(n):
    """12800 -> 12.8K (the form the progress lines and the comparison text use)."""
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= div:
            return "%.1f%s" % (n / div, suffix)
    return "%.0f" % n


def _median(values):
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2.0


def _driver_version():
    """The NVIDIA kernel driver version from /proc (no nvidia-smi process)."""
    try:
        with open("/proc/driver/nvidia/version") as f:
            text = f.read(4096)
    except OSError:
        return None
    for word in text.split():
        parts = word.split(".")
        if len(parts) >= 2 and all(x.isdigit() for x in parts):
            return word
    return None


def fingerprint(torch, device):
    fp = {
        "torch": torch.__version__,
        "torchGit": getattr(torch.version, "git_version", None),
        "cuda": getattr(torch.version, "cuda", None),
        "hip": getattr(torch.version, "hip", None),
        "cudnn": None,
        "triton": None,
        "gpu": None,
        "capability": None,
        "gpuCount": 0,
        "driver": None,
        "python": "%d.%d.%d" % sys.version_info[:3],
        "platform": platform.platform(),
        "cpu": platform.processor() or platform.machine(),
        "cpuCount": os.cpu_count(),
        "threads": torch.get_num_threads(),
    }
    try:
        fp["cudnn"] = torch.backends.cudnn.version()
    except Exception:  # noqa: BLE001 - an optional field
        pass
    try:
        import triton  # pyright: ignore[reportMissingImports]  # noqa: F401 (on the GPU box only)

        fp["triton"] = getattr(triton, "__version__", None)
    except Exception:  # noqa: BLE001 - absent on CPU-only and old installs
        pass
    if device.type == "cuda":
        idx = device.index if device.index is not None else torch.cuda.current_device()
        fp["gpu"] = torch.cuda.get_device_name(idx)
        fp["capability"] = "%d.%d" % torch.cuda.get_device_capability(idx)
        fp["gpuCount"] = torch.cuda.device_count()
        fp["driver"] = _driver_version()
    return fp


def build_model(torch, cfg, attend):
    nn = torch.nn
    F = torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            nn.Module.__init__(self)
            d = cfg["width"]
            self.ln1 = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d, bias=False)
            self.proj = nn.Linear(d, d, bias=False)
            self.ln2 = nn.LayerNorm(d)
            self.up = nn.Linear(d, 4 * d, bias=False)
            self.down = nn.Linear(4 * d, d, bias=False)

        def forward(self, x):
            b, t, d = x.shape
            h = cfg["heads"]
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q = q.view(b, t, h, d // h).transpose(1, 2)
            k = k.view(b, t, h, d // h).transpose(1, 2)
            v = v.view(b, t, h, d // h).transpose(1, 2)
            y = attend(q, k, v).transpose(1, 2).reshape(b, t, d)
            x = x + self.proj(y)
            return x + self.down(F.gelu(self.up(self.ln2(x))))

    class Model(nn.Module):
        def __init__(self):
            nn.Module.__init__(self)
            self.embed = nn.Embedding(cfg["vocab"], cfg["width"])
            self.pos = nn.Embedding(cfg["seq"], cfg["width"])
            self.blocks = nn.ModuleList([Block() for _ in range(cfg["layers"])])
            self.ln = nn.LayerNorm(cfg["width"])
            self.head = nn.Linear(cfg["width"], cfg["vocab"], bias=False)

        def forward(self, idx, targets):
            t = idx.shape[1]
            pos = torch.arange(t, device=idx.device)
            x = self.embed(idx) + self.pos(pos)
            for blk in self.blocks:
                x = blk(x)
            logits = self.head(self.ln(x))
            return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))

    return Model()


def attention_fn(torch, cfg, device, requested, compile_wanted, warnings):
    """(function, name actually used)."""
    F = torch.nn.functional
    if requested == "flex":
        try:
            from torch.nn.attention.flex_attention import (  # pyright: ignore[reportMissingImports]
                create_block_mask,
                flex_attention,
            )
        except ImportError:
            warnings.append("torch %s has no flex_attention: using sdpa instead" % torch.__version__)
        else:

            def causal(b, h, q_idx, kv_idx):
                return q_idx >= kv_idx

            block_mask = create_block_mask(causal, None, None, cfg["seq"], cfg["seq"], device=str(device))
            flex = flex_attention
            if not compile_wanted:
                # Uncompiled flex_attention is a slow reference implementation, not a number worth reporting.
                warnings.append("flex_attention is compiled on its own (without --compile it runs a slow reference)")
                flex = torch.compile(flex_attention)

            def attend_flex(q, k, v):
                return flex(q, k, v, block_mask=block_mask)

            return attend_flex, "flex"
    if hasattr(F, "scaled_dot_product_attention"):

        def attend_sdpa(q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

        return attend_sdpa, "sdpa"
    warnings.append(
        "torch %s has no scaled_dot_product_attention: manual attention (matmul, mask, softmax)" % torch.__version__
    )
    t = cfg["seq"]
    mask = torch.ones(t, t, dtype=torch.bool, device=device).triu(1)

    def attend_manual(q, k, v):
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
        att = att.masked_fill(mask[: q.shape[2], : q.shape[2]], float("-inf"))
        return att.softmax(dim=-1) @ v

    return attend_manual, "manual"


def main(argv):
    a = parse_args(argv)
    try:
        import torch  # pyright: ignore[reportMissingImports] (on the GPU box only)
    except ImportError as e:
        raise kg_common.ProbeError(kg_common.no_torch_message(e), "no-torch")

    warnings = []
    if a.device == "cuda" and not torch.cuda.is_available():
        raise kg_common.ProbeError("--device cuda: torch %s sees no CUDA device" % torch.__version__, "no-cuda")
    use_cuda = a.device == "cuda" or (a.device == "auto" and torch.cuda.is_available())
    device = torch.device("cuda" if use_cuda else "cpu")
    defaults = CUDA_DEFAULTS if use_cuda else CPU_DEFAULTS
    cfg = {}
    for k, v in defaults.items():
        given = getattr(a, k)
        cfg[k] = v if given is None else given
    dtype_name = a.dtype or ("bf16" if use_cuda else "fp32")
    for k in ("layers", "width", "heads", "seq", "batch", "vocab", "steps"):
        if cfg[k] < 1:
            raise kg_common.ProbeError("--%s must be at least 1" % k, "bad-args")
    if cfg["warmup"] < 0:
        raise kg_common.ProbeError("--warmup must not be negative", "bad-args")
    if cfg["width"] % cfg["heads"]:
        raise kg_common.ProbeError("--width must be a multiple of --heads", "bad-args")
    if dtype_name == "fp16" and not use_cuda:
        raise kg_common.ProbeError("--dtype fp16 needs a CUDA device (CPU autocast is bf16 only)", "bad-args")

    compile_wanted = bool(a.compile)
    if compile_wanted and not hasattr(torch, "compile"):
        warnings.append("torch %s has no torch.compile: running eager" % torch.__version__)
        compile_wanted = False

    torch.manual_seed(a.seed)
    attend, attention_used = attention_fn(torch, cfg, device, a.attention, compile_wanted, warnings)
    model = build_model(torch, cfg, attend).to(device)
    params = sum(p.numel() for p in model.parameters())
    embed_params = model.embed.weight.numel() + model.pos.weight.numel()
    step_model = torch.compile(model) if compile_wanted else model
    try:
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=use_cuda)
    except TypeError:  # no fused AdamW before torch 2.0
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": None}[dtype_name]
    scaler = None
    if dtype_name == "fp16":
        amp = getattr(torch, "amp", None)
        if amp is not None and hasattr(amp, "GradScaler"):
            scaler = amp.GradScaler("cuda")
        else:
            scaler = torch.cuda.amp.GradScaler()

    data = torch.randint(cfg["vocab"], (cfg["batch"], cfg["seq"] + 1), device=device)
    inputs, targets = data[:, :-1].contiguous(), data[:, 1:].contiguous()
    tokens = cfg["batch"] * cfg["seq"]

    def sync():
        if use_cuda:
            torch.cuda.synchronize()

    def one_step():
        if amp_dtype is not None:
            with torch.autocast(device_type=device.type, dtype=amp_dtype):
                loss = step_model(inputs, targets)
        else:
            loss = step_model(inputs, targets)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    if use_cuda:
        torch.cuda.reset_peak_memory_stats(device)
    total = 1 + cfg["warmup"] + cfg["steps"]
    times = []
    # CPU time of the process per timed step: a neighbour's load preempts the benchmark without adding to it, so on
    # a shared CPU host it moves far less than wall time does (what a bisect there measures with clock "cpu")
    cpu_times = []
    first_ms = None
    loss = None
    err = sys.stderr
    err.write(
        "throughput_bench: %d layers x %d wide, %d heads, seq %d, batch %d, %s on %s, attention %s%s\n"
        % (cfg["layers"], cfg["width"], cfg["heads"], cfg["seq"], cfg["batch"], dtype_name, device.type,
           attention_used, ", compiled" if compile_wanted else "")
    )
    for w in warnings:
        err.write("warning: %s\n" % w)
    err.flush()
    for i in range(total):
        sync()
        t0 = time.perf_counter()
        c0 = time.process_time()
        loss = one_step()
        sync()
        ms = (time.perf_counter() - t0) * 1000.0
        cpu_ms = (time.process_time() - c0) * 1000.0
        if i == 0:
            first_ms = ms
            label = "first step (compile)" if compile_wanted or attention_used == "flex" else "first step"
        elif i <= cfg["warmup"]:
            label = "warm-up"
        else:
            times.append(ms)
            cpu_times.append(cpu_ms)
            label = ""
        err.write("step %d/%d  %.1f ms  %s tok/s%s\n" % (i + 1, total, ms, human(tokens * 1000.0 / ms),
                                                         "  (" + label + ")" if label else ""))
        err.flush()

    med = _median(times)
    tok_s = [tokens * 1000.0 / t for t in times]
    # a step too short for the process clock's resolution reads 0 ms: left out of the CPU figures
    cpu_tok_s = [tokens * 1000.0 / t for t in cpu_times if t > 0]
    flops_per_token = 6.0 * (params - embed_params) + 12.0 * cfg["layers"] * cfg["width"] * cfg["seq"]
    median_tok_s = tokens * 1000.0 / med
    compiled = compile_wanted or attention_used == "flex"
    if use_cuda:
        peak = torch.cuda.max_memory_allocated(device)
        peak_source = "torch.cuda.max_memory_allocated"
    else:
        peak = None
        peak_source = None
        try:
            import resource

            # Linux reports KiB, macOS bytes; the process may hold more than the benchmark (resident helper).
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            peak = rss if sys.platform == "darwin" else rss * 1024
            peak_source = "process max RSS"
        except (ImportError, OSError):
            pass
    final_loss = float(loss.detach().float().item()) if loss is not None else None
    config = dict(cfg)
    config.update({
        "dtype": dtype_name,
        "device": device.type,
        "compile": compile_wanted,
        "attention": a.attention,
        "attentionUsed": attention_used,
        "optimizer": "AdamW",
        "tokensPerStep": tokens,
    })
    return {
        "tokensPerSec": {"median": median_tok_s, "min": min(tok_s), "max": max(tok_s)},
        "stepMs": {"median": med, "min": min(times), "max": max(times)},
        "stepTimesMs": [round(t, 3) for t in times],
        "cpuTokensPerSec": (
            {"median": _median(cpu_tok_s), "min": min(cpu_tok_s), "max": max(cpu_tok_s)} if cpu_tok_s else None
        ),
        "tflops": flops_per_token * median_tok_s / 1e12,
        "flopsPerToken": flops_per_token,
        "params": params,
        "paramsNonEmbedding": params - embed_params,
        "peakMemoryBytes": peak,
        "peakMemorySource": peak_source,
        "firstStepMs": first_ms,
        "compileS": max(0.0, (first_ms - med) / 1000.0) if compiled else None,
        "loss": kg_common.finite_or_none(final_loss),
        "config": config,
        "fingerprint": fingerprint(torch, device),
        "warnings": warnings,
    }


if __name__ == "__main__":
    kg_common.run(main)
