#!/usr/bin/env python3
"""Tracing overhead on a host-bound PyTorch loop, measured inside ONE process.

Rounds of training steps alternate between modes, in a rotating order:
  off        dsmemtrace paused (hooks only forward), torch's recorder off
  ours       dsmemtrace recording (native stack depth from DSMEMTRACE_NATIVE_DEPTH)
  torch_py   dsmemtrace paused, torch.cuda.memory._record_memory_history(stacks="python")
  torch_all  dsmemtrace paused, _record_memory_history(stacks="all")  (Python + C++)
and the median step time of each mode is divided by the median of `off`.
Separate processes are too noisy for this (DESIGN.md: 11.3 vs 15.6 ms per step
for identical runs).  Run under the preload:

  LD_PRELOAD=$PWD/build/interpose/libdsmemtrace.so python3 bench/overhead.py OUT.json

The loop is DESIGN.md's host-bound transformer: 6 layers, d=1024, batch 8 x 512,
bf16 autocast, AdamW (an MLP is GPU-bound and hides any host cost).
"""
import ctypes
import json
import os
import statistics
import sys
import time


def main():
    import torch

    if not torch.cuda.is_available():
        print("SKIP: no CUDA GPU")
        return 77
    out = sys.argv[1] if len(sys.argv) > 1 else "overhead.json"
    # many short rounds: slow drifts of the machine hit every mode alike
    rounds = int(os.environ.get("DSMT_BENCH_ROUNDS", "40"))
    steps = int(os.environ.get("DSMT_BENCH_STEPS", "5"))
    lib = ctypes.CDLL(None)
    ours = hasattr(lib, "dsmemtrace_pause")
    if not ours:
        print("note: not running under libdsmemtrace.so; measuring torch's recorder only")
    rec = torch.cuda.memory._record_memory_history

    torch.manual_seed(0)
    dev = torch.device("cuda")
    d, layers, batch, seq = 1024, 6, 8, 512
    layer = torch.nn.TransformerEncoderLayer(d, 16, 4 * d, batch_first=True, norm_first=True)
    model = torch.nn.TransformerEncoder(layer, layers).to(dev)
    head = torch.nn.Linear(d, d).to(dev)
    params = list(model.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4)

    def step():
        x = torch.randn(batch, seq, d, device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            y = head(model(x))
        loss = y.float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def set_mode(m):
        if ours:
            (lib.dsmemtrace_resume if m == "ours" else lib.dsmemtrace_pause)()
        if m == "torch_py":
            rec(enabled="all", stacks="python", max_entries=200000)
        elif m == "torch_all":
            rec(enabled="all", stacks="all", max_entries=200000)
        else:
            rec(enabled=None)

    modes = (["off", "ours"] if ours else ["off"]) + ["torch_py", "torch_all"]
    set_mode("off")
    for _ in range(20):  # warm-up: allocator cache, cuBLAS, autotuning
        step()
    torch.cuda.synchronize()

    st0 = torch.cuda.memory_stats()
    step()
    st1 = torch.cuda.memory_stats()
    events_per_step = sum(st1.get(k, 0) - st0.get(k, 0) for k in ("allocation.all.allocated", "allocation.all.freed"))

    times = {m: [] for m in modes}
    for r in range(rounds):
        order = modes[r % len(modes):] + modes[: r % len(modes)]
        for m in order:
            set_mode(m)
            step()  # one step to settle the mode
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(steps):
                step()
            torch.cuda.synchronize()
            times[m].append((time.perf_counter() - t0) / steps * 1e3)
    set_mode("off")

    med = {m: statistics.median(v) for m, v in times.items()}
    res = {
        "loop": f"transformer {layers}x{d}, batch {batch}x{seq}, bf16 autocast, AdamW",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0),
        "native_depth": os.environ.get("DSMEMTRACE_NATIVE_DEPTH", "default"),
        "rounds": rounds,
        "steps_per_round": steps,
        "median_step_ms": med,
        "ratio_to_off": {m: med[m] / med["off"] for m in modes},
        "allocator_events_per_step": events_per_step,
        "ns_per_event_over_off": {m: (med[m] - med["off"]) * 1e6 / max(events_per_step, 1) for m in modes},
        "all_ms": times,
    }
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"{res['loop']} on {res['gpu']}, torch {res['torch']}, native depth {res['native_depth']}")
    print(f"  {events_per_step} allocator events per step; {rounds} rounds of {steps} steps per mode")
    for m in modes:
        print(f"  {m:10s} median {med[m]:7.2f} ms/step   ratio {med[m] / med['off']:.3f}"
              f"   {res['ns_per_event_over_off'][m]:8.0f} ns per event over off")
    return 0


if __name__ == "__main__":
    sys.exit(main())
