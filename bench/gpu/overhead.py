#!/usr/bin/env python3
"""Tracing overhead on a GPU training loop, measured inside ONE process.

    overhead.py LOOP OUT.json [--rounds N] [--steps K] [DeepSpeed flags]

LOOP:
  transformer  DESIGN.md's host-bound loop: 6 encoder layers, d=1024, batch
               8 x 512, bf16 autocast, AdamW (~1 250 allocator events per step)
  tiny         the launch-bound worst case: 64 blocks of Linear(128, 128) +
               LayerNorm + GELU, batch 32, fp32, AdamW — many small kernels
               and allocations per millisecond
  ds           examples/deepspeed_sft's OPT model under DeepSpeed on this one
               GPU (world size 1, no launcher needed); the example's flags
               after the loop's (--zero_stage 2 --model opt-1.3b
               --per_device_train_batch_size 4 --max_seq_len 512 ...)

Rounds of training steps alternate between modes, in a rotating order:
  off        dsmemtrace paused (its hooks only forward), torch's recorder off
  ours       dsmemtrace recording (stacks as DSMEMTRACE_* configure them)
  torch_py   dsmemtrace paused, torch.cuda.memory._record_memory_history(stacks="python")
  torch_all  dsmemtrace paused, _record_memory_history(stacks="all")  (Python + C++)
and each mode's median step time is divided by the median of `off`.
Separate processes are too noisy for this (DESIGN.md: 11.3 vs 15.6 ms per step
for identical runs).  Without the preload only off/torch_py/torch_all run.

  LD_PRELOAD=$PWD/build/interpose/libdsmemtrace.so python3 bench/gpu/overhead.py transformer OUT.json

bench/gpu/run.sh runs every loop in each configuration (one command).
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def transformer_loop(torch, dev):
    d, layers, batch, seq = 1024, 6, 8, 512
    layer = torch.nn.TransformerEncoderLayer(d, 16, 4 * d, batch_first=True, norm_first=True)
    model = torch.nn.TransformerEncoder(layer, layers).to(dev)
    head = torch.nn.Linear(d, d).to(dev)
    opt = torch.optim.AdamW(list(model.parameters()) + list(head.parameters()), lr=1e-4)

    def step():
        x = torch.randn(batch, seq, d, device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            y = head(model(x))
        y.float().pow(2).mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, f"transformer {layers}x{d}, batch {batch}x{seq}, bf16 autocast, AdamW"


def tiny_loop(torch, dev):
    d, blocks, batch = 128, 64, 32
    mods = []
    for _ in range(blocks):
        mods += [torch.nn.Linear(d, d), torch.nn.LayerNorm(d), torch.nn.GELU()]
    model = torch.nn.Sequential(*mods).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        x = torch.randn(batch, d, device=dev)
        model(x).pow(2).mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, f"tiny: {blocks} x (Linear {d}x{d} + LayerNorm + GELU), batch {batch}, fp32, AdamW"


def ds_loop(torch, dev, argv):
    """examples/deepspeed_sft's model and engine, one rank"""
    for k, v in (("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", str(29500 + os.getpid() % 1000)), ("RANK", "0"),
                 ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1")):
        os.environ.setdefault(k, v)
    sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "deepspeed_sft"))
    import main as sft  # noqa: E402 (the example's flags and build)
    import deepspeed

    a = sft.parse(argv + ["--steps_per_print", "1000000"])
    deepspeed.init_distributed()
    torch.manual_seed(1234)
    engine, _, _, cfg = sft.build_engine(a, 1)
    g = torch.Generator(device="cpu").manual_seed(4321)

    def step():
        ids = torch.randint(0, cfg.vocab_size, (a.per_device_train_batch_size, a.max_seq_len), generator=g).to(dev)
        loss = engine(input_ids=ids, labels=ids, use_cache=False).loss
        engine.backward(loss)
        engine.step()

    off = "+offload" if a.offload else ""
    return step, (f"DeepSpeed {deepspeed.__version__} {a.model} ZeRO-{a.zero_stage}{off}, 1 GPU, "
                  f"micro-batch {a.per_device_train_batch_size} x seq {a.max_seq_len}, {a.dtype}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("loop", choices=("transformer", "tiny", "ds"))
    ap.add_argument("out")
    ap.add_argument("--rounds", type=int, default=None, help="rounds per mode (default 40; ds 8)")
    ap.add_argument("--steps", type=int, default=None, help="timed steps per round (default 5; ds 3)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed steps first (default 20; ds 3)")
    args, rest = ap.parse_known_args()
    if rest and args.loop != "ds":
        ap.error("unknown arguments: " + " ".join(rest))
    import torch

    if not torch.cuda.is_available():
        print("SKIP: no CUDA GPU")
        return 77
    ds = args.loop == "ds"
    rounds = args.rounds or (8 if ds else 40)
    steps = args.steps or (3 if ds else 5)
    warmup = args.warmup if args.warmup is not None else (3 if ds else 20)
    lib = ctypes.CDLL(None)
    ours = hasattr(lib, "dsmemtrace_pause")
    if not ours:
        print("note: not running under libdsmemtrace.so; measuring torch's recorder only")
    rec = torch.cuda.memory._record_memory_history

    torch.manual_seed(0)
    torch.cuda.set_device(0)
    dev = torch.device("cuda", 0)
    if ours:
        lib.dsmemtrace_pause()  # building the model is not measured
    if args.loop == "transformer":
        step, desc = transformer_loop(torch, dev)
    elif args.loop == "tiny":
        step, desc = tiny_loop(torch, dev)
    else:
        step, desc = ds_loop(torch, dev, rest)

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
    for _ in range(warmup):  # allocator cache, cuBLAS, autotuning
        step()
    torch.cuda.synchronize()

    st0 = torch.cuda.memory_stats()
    step()
    st1 = torch.cuda.memory_stats()
    events_per_step = sum(st1.get(k, 0) - st0.get(k, 0) for k in ("allocation.all.allocated", "allocation.all.freed"))

    times = {m: [] for m in modes}
    t_all = time.perf_counter()
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
    env = {k: v for k, v in os.environ.items() if k.startswith("DSMEMTRACE_") and k != "DSMEMTRACE_DIR"}
    res = {
        "loop": args.loop,
        "desc": desc,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0),
        "preloaded": ours,
        "dsmemtrace_env": env,
        "rounds": rounds,
        "steps_per_round": steps,
        # steps run while recording (each round's settling step included):
        # DSMEMTRACE_SELFTIME's totals divided by this are the hook's time per step
        "recorded_steps": rounds * (steps + 1) if ours else 0,
        "measured_s": time.perf_counter() - t_all,
        "median_step_ms": med,
        "ratio_to_off": {m: med[m] / med["off"] for m in modes},
        "allocator_events_per_step": events_per_step,
        "ns_per_event_over_off": {m: (med[m] - med["off"]) * 1e6 / max(events_per_step, 1) for m in modes},
        "all_ms": times,
    }
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"{desc} on {res['gpu']}, torch {res['torch']}; {(env or 'defaults') if ours else 'no preload'}")
    print(f"  {events_per_step} allocator events per step; {rounds} rounds of {steps} steps per mode")
    for m in modes:
        print(f"  {m:10s} median {med[m]:8.2f} ms/step   ratio {med[m] / med['off']:.4f}"
              f"   {res['ns_per_event_over_off'][m]:8.0f} ns per event over off")
    if ds:
        import torch.distributed as dist
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
