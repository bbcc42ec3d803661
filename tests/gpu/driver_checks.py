#!/usr/bin/env python3
"""Driver-level GPU checks for dsmemtrace (issue 4), run by tests/gpu/run_driver.sh.

    python3 tests/gpu/driver_checks.py CHECK OUT.json [--steps N]
    torchrun --nproc_per_node 2 tests/gpu/driver_checks.py nccl OUT.json

CHECK is one of:
  expandable  transformer loop with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
              (torch maps its segments with cuMemCreate/cuMemMap: reserved must
              come from the driver level)
  async       MLP loop with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
  graphs      MLP forward+backward captured once in a CUDA graph, replayed per step
  profiler    MLP loop; torch.profiler.profile(activities=[CPU, CUDA]) around
              steps 3..5: prints the number of CUDA events it recorded
  nccl        one rank of a 2-rank NCCL job (torchrun): all-reduce of 64 MiB per step

Each writes OUT.json (OUT.rankR.json for nccl) with torch's per-step counters
as loops.py does (the windows dsmemdecode calls steps), NVML's and the CUDA
runtime's view of the device after the last step (torch.cuda.mem_get_info:
device-wide used bytes; torch.cuda.memory_reserved), the loss and a parameter
checksum.  Exit codes: 0 ok, 77 no torch / GPU, 2 usage, 1 anything else.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKS = ("expandable", "async", "graphs", "profiler", "nccl")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("check", choices=CHECKS)
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=8)
    args = ap.parse_args()

    conf = {"expandable": "expandable_segments:True", "async": "backend:cudaMallocAsync"}.get(args.check)
    if conf:
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = conf
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        print(f"SKIP: torch not importable ({e})")
        return 77
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device")
        return 77
    sys.path.insert(0, HERE)
    import loops  # noqa: E402  (read_counters, run_steps, models)

    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    torch.manual_seed(1234)
    torch.cuda.manual_seed_all(1234)
    torch.backends.cuda.matmul.allow_tf32 = False
    extra = {}

    if args.check == "expandable":
        step, params, _ = loops.loop_transformer_ckpt(torch, dev, args.steps)
    elif args.check in ("async", "profiler"):
        step, params, _ = loops.loop_mlp(torch, dev, args.steps)
    elif args.check == "graphs":
        step, params = graphs_loop(torch, dev)
    else:
        step, params = nccl_loop(torch, dev, rank, extra)

    if args.check == "profiler":
        step = profiled(torch, step, extra)

    if local != 0:
        # loops.read_counters reads device 0; a rank on another device reads its own
        loops.read_counters = lambda t: read_counters_dev(t, local)
    result = loops.run_steps(torch, step, args.steps)
    loss = result.pop("last_loss")
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info(local)
    with torch.no_grad():
        checksum = repr(float(sum(p.detach().double().sum() for p in params).item()))
    out = {
        "check": args.check,
        "pid": os.getpid(),
        "rank": rank,
        "device": local,
        "nsteps": args.steps,
        "steps": result["steps"],
        "baseline": result["baseline"],
        "final_loss": repr(float(loss.item())),
        "param_checksum": checksum,
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "device_used_end": int(total - free),
        "device_total": int(total),
        "reserved_end": int(torch.cuda.memory_reserved(local)),
        "preloaded": "libdsmemtrace" in os.environ.get("LD_PRELOAD", ""),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())) if args.check == "nccl" else None,
    }
    out.update(extra)
    path = args.out if args.check != "nccl" else args.out.replace(".json", f".rank{rank}.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"check={args.check} rank={rank} final_loss={out['final_loss']} param_checksum={checksum}")
    for k in ("cuda_events", "nccl"):
        if out.get(k) is not None:
            print(f"{k}={out[k]}")
    if args.check == "nccl":
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()
    return 0


def read_counters_dev(torch, d):
    ma = torch.cuda.max_memory_allocated(d)
    a = torch.cuda.memory_allocated(d)
    mr = torch.cuda.max_memory_reserved(d)
    r = torch.cuda.memory_reserved(d)
    torch.cuda.reset_peak_memory_stats(d)
    return {"max_allocated": int(ma), "allocated": int(a), "max_reserved": int(mr), "reserved": int(r)}


def graphs_loop(torch, dev):
    """Forward+backward of an MLP captured in one CUDA graph (static input,
    output and gradients), replayed each step; the optimizer step runs eagerly."""
    F = torch.nn.functional
    model = _mlp(torch, dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(256, 1024, device=dev)
    y = torch.randn(256, 1024, device=dev)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up on a side stream, as the docs require
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            F.mse_loss(model(x), y).backward()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        static_loss = F.mse_loss(model(x), y)
        static_loss.backward()

    def step(k):
        x.copy_(torch.randn_like(x))
        g.replay()
        opt.step()
        return static_loss.detach().clone()

    return step, list(model.parameters())


def _mlp(torch, dev):
    layers = []
    for _ in range(3):
        layers += [torch.nn.Linear(1024, 1024), torch.nn.GELU()]
    return torch.nn.Sequential(*layers).to(dev)


def nccl_loop(torch, dev, rank, extra):
    import torch.distributed as dist

    dist.init_process_group("nccl", device_id=dev)
    model = _mlp(torch, dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    buf = torch.ones(16 << 20, device=dev)  # 64 MiB fp32, all-reduced every step
    F = torch.nn.functional

    def step(k):
        x = torch.randn(256, 1024, device=dev)
        loss = F.mse_loss(model(x), x)
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        dist.all_reduce(buf)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    extra["world_size"] = dist.get_world_size()
    return step, list(model.parameters())


def profiled(torch, step, extra):
    """Steps 3..5 run inside torch.profiler with CUDA activities; the number
    of CUDA events it recorded goes into extra["cuda_events"]."""
    from torch.profiler import ProfilerActivity, profile

    state = {}

    def wrapped(k):
        if k == 3:
            state["p"] = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
            state["p"].__enter__()
        r = step(k)
        if k == 5:
            torch.cuda.synchronize()
            p = state.pop("p")
            p.__exit__(None, None, None)
            evs = p.events()
            extra["cuda_events"] = sum(1 for e in evs if str(getattr(e, "device_type", "")).endswith("CUDA"))
            extra["profiler_events"] = len(evs)
        return r

    return wrapped


if __name__ == "__main__":
    sys.exit(main())
