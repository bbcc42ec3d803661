#!/usr/bin/env python3
"""PyTorch training loops for the dsmemtrace GPU check (tests/gpu/run.sh).

    python3 tests/gpu/loops.py LOOP OUT.json [--steps N]

LOOP is one of: mlp, transformer_ckpt, transformer_ckpt_expandable,
side_stream, oom, empty_cache.  Each step runs inside the NVTX range
"train_step".  Right before the first push and right after every pop the
loop reads PyTorch's own counters (max_memory_allocated, memory_allocated,
max_memory_reserved, memory_reserved) and then resets the peaks, so step k's
numbers cover exactly the window dsmemdecode calls step k:
    step 1   = push of range 1 .. pop of range 1
    step k>1 = pop of range k-1 .. pop of range k
Nothing touches the GPU allocator between a pop and its reading, and the
cyclic garbage collector is off while the steps run, so no tensor can be
freed at an unpredictable point.

Prints "final_loss=<repr>" and "param_checksum=<repr>" (run.sh compares
them between runs with and without the preload: the library must not change
results); seeds and deterministic settings make that comparison meaningful.

Exit codes: 0 ok, 77 no torch / no GPU, 2 usage, 1 anything else.
"""
import argparse
import gc
import json
import os
import sys
import time

LOOPS = ("mlp", "transformer_ckpt", "transformer_ckpt_expandable", "side_stream", "oom", "empty_cache", "pause_resume")
EXPANDABLE = "expandable_segments:True"


def skip(msg):
    print(f"SKIP: {msg}", flush=True)
    sys.exit(77)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("loop", choices=LOOPS)
    ap.add_argument("out", help="where to write the per-step counters (JSON)")
    ap.add_argument("--steps", type=int, default=8)
    args = ap.parse_args()
    if args.steps < 1:
        ap.error("--steps must be >= 1")

    notes = []
    if args.loop == "transformer_ckpt_expandable":
        conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
        if EXPANDABLE not in conf:
            # run.sh sets it; set it here too (before torch is imported) so
            # the loop means the same when started by hand.
            os.environ["PYTORCH_CUDA_ALLOC_CONF"] = (conf + "," if conf else "") + EXPANDABLE
            notes.append("PYTORCH_CUDA_ALLOC_CONF was not set by the driver; loops.py set it")
    # cuBLAS is deterministic only with a fixed workspace config, read when
    # its first handle is created: set it before torch touches the GPU.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means "no torch"
        skip(f"torch not importable ({type(e).__name__}: {e})")
    if not torch.cuda.is_available() or torch.cuda.device_count() < 1:
        skip("torch sees no CUDA device")

    torch.cuda.set_device(0)
    dev = torch.device("cuda", 0)
    deterministic = True
    try:
        torch.use_deterministic_algorithms(True, warn_only=True)
    except Exception as e:  # noqa: BLE001
        deterministic = False
        notes.append(f"use_deterministic_algorithms failed: {e}")
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(1234)
    torch.cuda.manual_seed_all(1234)

    loop = LOOP_FNS[args.loop.replace("_expandable", "")]
    step_fn, params, extra = loop(torch, dev, args.steps)

    result = run_steps(torch, step_fn, args.steps)

    loss = result.pop("last_loss")
    final_loss = repr(float(loss.item()))
    with torch.no_grad():
        checksum = repr(float(sum(p.detach().double().sum() for p in params).item()))
    stats = torch.cuda.memory_stats(0)
    snapshot_info = segment_info(torch)

    out = {
        "loop": args.loop,
        "pid": os.getpid(),
        "nsteps": args.steps,
        "steps": result["steps"],
        "baseline": result["baseline"],
        "loop_s": result["loop_s"],
        "final_loss": final_loss,
        "param_checksum": checksum,
        "deterministic": deterministic,
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "expandable": EXPANDABLE in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "segments": snapshot_info,
        "num_ooms": int(stats.get("num_ooms", 0)),
        "num_alloc_retries": int(stats.get("num_alloc_retries", 0)),
        "preloaded": "libdsmemtrace" in os.environ.get("LD_PRELOAD", ""),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0),
        "notes": notes + extra.get("notes", []),
    }
    out.update({k: (v.fn() if isinstance(v, _Lazy) else v) for k, v in extra.items() if k != "notes"})
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    os.replace(tmp, args.out)

    print(f"loop={args.loop} steps={args.steps} loop_s={result['loop_s']:.3f}")
    print(f"final_loss={final_loss}")
    print(f"param_checksum={checksum}")
    return 0


def read_counters(torch):
    """PyTorch's counters for device 0, then a peak reset.  Host-side only:
    none of these calls allocates GPU memory."""
    ma = torch.cuda.max_memory_allocated(0)
    a = torch.cuda.memory_allocated(0)
    mr = torch.cuda.max_memory_reserved(0)
    r = torch.cuda.memory_reserved(0)
    torch.cuda.reset_peak_memory_stats(0)
    return {"max_allocated": int(ma), "allocated": int(a), "max_reserved": int(mr), "reserved": int(r)}


def run_steps(torch, step_fn, nsteps):
    nvtx = torch.cuda.nvtx
    steps = []
    gc.collect()
    gc.disable()
    try:
        loss = None
        t0 = time.perf_counter()
        baseline = read_counters(torch)  # right before the first push
        for k in range(1, nsteps + 1):
            nvtx.range_push("train_step")
            loss = step_fn(k)
            nvtx.range_pop()
            c = read_counters(torch)  # right after the pop
            c["step"] = k
            steps.append(c)
        torch.cuda.synchronize()
        loop_s = time.perf_counter() - t0
    finally:
        gc.enable()
    return {"steps": steps, "baseline": baseline, "loop_s": loop_s, "last_loss": loss}


def segment_info(torch):
    """How many segments the allocator holds and whether they are expandable
    (host-side snapshot; nothing is allocated)."""
    try:
        segs = [s for s in torch.cuda.memory_snapshot() if s.get("device", 0) == 0]
    except Exception as e:  # noqa: BLE001
        return {"error": str(e)}
    return {
        "count": len(segs),
        "expandable": sum(1 for s in segs if s.get("is_expandable")),
        "total_size": int(sum(s.get("total_size", 0) for s in segs)),
    }


# ---------------------------------------------------------------------------
# models

def make_mlp(torch, dev, width=2048, layers=4):
    nn = torch.nn
    mods = []
    for i in range(layers):
        mods.append(nn.Linear(width, width))
        if i != layers - 1:
            mods.append(nn.GELU())
    return nn.Sequential(*mods).to(dev)


def make_transformer(torch, dev, d=512, heads=8, layers=4, seq=512, classes=1024, checkpoint=True):
    import torch.utils.checkpoint as ckpt

    nn = torch.nn
    F = torch.nn.functional

    class Block(nn.Module):
        """Pre-norm block with hand-written attention (plain matmuls and
        softmax, deterministic, no fused SDPA kernels)."""

        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.ln2 = nn.LayerNorm(d)
            self.fc1 = nn.Linear(d, 4 * d)
            self.fc2 = nn.Linear(4 * d, d)
            self.register_buffer("mask", torch.triu(torch.ones(seq, seq), diagonal=1).bool(), persistent=False)

        def forward(self, x):
            B, T, D = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, heads, D // heads).permute(2, 0, 3, 1, 4)
            att = (q @ k.transpose(-2, -1)) * (1.0 / (D // heads) ** 0.5)
            att = att.masked_fill(self.mask[:T, :T], float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).reshape(B, T, D)
            x = x + self.proj(y)
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, classes)

        def forward(self, x):
            for blk in self.blocks:
                x = ckpt.checkpoint(blk, x, use_reentrant=False) if checkpoint else blk(x)
            return self.head(self.ln(x))

    return Model().to(dev)


def adamw(torch, params):
    return torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01)


# ---------------------------------------------------------------------------
# loops: each returns (step_fn(k) -> detached loss tensor, params, extra)

def loop_mlp(torch, dev, nsteps, hook=None):
    F = torch.nn.functional
    model = make_mlp(torch, dev)
    opt = adamw(torch, model.parameters())
    batch, width = 512, 2048

    def step(k):
        x = torch.randn(batch, width, device=dev)
        y = torch.randn(batch, width, device=dev)
        out = model(x)
        loss = F.mse_loss(out, y)
        if hook:
            hook(k, "forward")
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if hook:
            hook(k, "optimizer")
        return loss.detach()

    return step, list(model.parameters()), {}


def loop_transformer_ckpt(torch, dev, nsteps):
    F = torch.nn.functional
    batch, seq, d, classes = 8, 512, 512, 1024
    model = make_transformer(torch, dev, d=d, seq=seq, classes=classes)
    opt = adamw(torch, model.parameters())

    def step(k):
        x = torch.randn(batch, seq, d, device=dev)
        tgt = torch.randint(0, classes, (batch, seq), device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, classes), tgt.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    return step, list(model.parameters()), {}


def loop_side_stream(torch, dev, nsteps):
    """MLP whose batches are made on a side stream and whose activation
    statistics are computed there; record_stream keeps each tensor alive for
    the stream that uses it (frees are deferred until its work is done)."""
    F = torch.nn.functional
    model = make_mlp(torch, dev)
    opt = adamw(torch, model.parameters())
    side = torch.cuda.Stream(device=dev)
    batch, width = 512, 2048
    stats = []

    def step(k):
        main = torch.cuda.current_stream(dev)
        side.wait_stream(main)
        with torch.cuda.stream(side):
            x = torch.randn(batch, width, device=dev)
            y = torch.randn(batch, width, device=dev)
        main.wait_stream(side)
        x.record_stream(main)
        y.record_stream(main)
        out = model(x)
        loss = F.mse_loss(out, y)
        loss.backward()
        h = out.detach()
        side.wait_stream(main)
        with torch.cuda.stream(side):
            s = (h.float() ** 2).mean()
        h.record_stream(side)
        opt.step()
        opt.zero_grad(set_to_none=True)
        main.wait_stream(side)
        s.record_stream(main)
        stats.append(s)
        return loss.detach()

    def finish():
        return [repr(float(t.item())) for t in stats]

    return step, list(model.parameters()), {"side_stream_stats": _Lazy(finish)}


def loop_oom(torch, dev, nsteps):
    """Each step, with activations live, asks for more than the whole GPU;
    the allocator frees its cached blocks (cudaFree), retries, and raises
    OutOfMemoryError, which the loop catches before going on."""
    oom_error = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError
    _free, total = torch.cuda.mem_get_info(0)
    too_big = int(total) + (1 << 30)
    caught = []

    def hook(k, where):
        if where != "forward":
            return
        try:
            t = torch.empty(too_big, dtype=torch.uint8, device=dev)
            del t
            caught.append(False)
        except oom_error:
            caught.append(True)

    step, params, extra = loop_mlp(torch, dev, nsteps, hook=hook)
    extra = dict(extra, oom_request_bytes=too_big, oom_caught=_Lazy(lambda: sum(caught)))
    return step, params, extra


def loop_empty_cache(torch, dev, nsteps):
    """MLP; in the middle step a 1 GiB temporary is made and dropped, and
    after the optimizer step torch.cuda.empty_cache() returns the cached
    segments to the driver (cudaFree)."""
    mid = max(1, nsteps // 2)

    def hook(k, where):
        if k != mid:
            return
        if where == "forward":
            big = torch.empty(1 << 30, dtype=torch.uint8, device=dev)
            del big
        elif where == "optimizer":
            torch.cuda.empty_cache()

    step, params, extra = loop_mlp(torch, dev, nsteps, hook=hook)
    return step, params, dict(extra, empty_cache_step=mid)


def loop_pause_resume(torch, dev, nsteps):
    """MLP; tracing is paused (dsmemtrace_pause through ctypes) for part of
    the middle step: a tensor made before the pause is freed during it, one
    made during it lives on and is freed two steps later, and torch's cache
    grows by a segment while paused.  The decoder flags that step and
    resynchronises from the allocator's totals, so every other step must
    still equal torch's counters.  Without the preload pause/resume are
    absent and the loop does the same work."""
    import ctypes

    lib = ctypes.CDLL(None)
    pause = getattr(lib, "dsmemtrace_pause", None)
    resume = getattr(lib, "dsmemtrace_resume", None)
    mid = max(2, nsteps // 2)
    keep = {}

    def hook(k, where):
        if k == mid - 1 and where == "forward":
            keep["pre"] = torch.empty(32 << 20, dtype=torch.uint8, device=dev)
        elif k == mid and where == "forward":
            if pause:
                pause()
            keep.pop("pre", None)
            keep["during"] = torch.empty(48 << 20, dtype=torch.uint8, device=dev)
            keep["segment"] = torch.empty(300 << 20, dtype=torch.uint8, device=dev)
            keep.pop("segment")
        elif k == mid and where == "optimizer":
            if resume:
                resume()
        elif k == mid + 2 and where == "forward":
            keep.pop("during", None)

    step, params, extra = loop_mlp(torch, dev, nsteps, hook=hook)
    return step, params, dict(extra, pause_step=mid)


class _Lazy:
    """A value computed after the steps (reading it may synchronize)."""

    def __init__(self, fn):
        self.fn = fn


LOOP_FNS = {
    "mlp": loop_mlp,
    "transformer_ckpt": loop_transformer_ckpt,
    "side_stream": loop_side_stream,
    "oom": loop_oom,
    "empty_cache": loop_empty_cache,
    "pause_resume": loop_pause_resume,
}


if __name__ == "__main__":
    sys.exit(main())
