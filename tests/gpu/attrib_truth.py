#!/usr/bin/env python3
"""Ground truth for the attribution rules (issue 5), from PyTorch itself.

    python3 tests/gpu/attrib_truth.py LOOP OUT.json [--steps N] [--frames]

LOOP: mlp | transformer | transformer_ckpt (activation checkpointing).
Each step is an NVTX "train_step" range; torch's counters are read and the
peaks reset after each (as loops.py does).  The script tags, by storage
address, every tensor whose role PyTorch itself tells us:
  parameters        the model's parameters and buffers after .to(device)
  gradients         p.grad in register_post_accumulate_grad_hook
  optimizer_states  the tensors in optimizer.state after each step()
  activations       tensors saved for backward (saved_tensors_hooks),
                    parameter storages excluded
Tags carry the step in which they were seen (parameters: 0 = for good) and
the allocator's running count of allocations then ("nalloc"), which names
the allocation exactly (the latest one at that address up to that count).
With --frames, torch.cuda.memory._record_memory_history(stacks="python")
runs during the steps, and the allocator's own trace (action, addr, size,
innermost Python frame) is written to OUT.frames.json, to check the
tracer's Python frames against torch's.

OUT.json: {"steps": [...counters...], "tags": [{"ptr", "nbytes", "category",
"step"}], ...}.  Exit 0 ok, 77 no torch/GPU.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("loop", choices=("mlp", "transformer", "transformer_ckpt"))
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--frames", action="store_true")
    a = ap.parse_args()
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    try:
        import torch
    except Exception:  # noqa: BLE001
        print("SKIP: no torch")
        return 77
    if not torch.cuda.is_available():
        print("SKIP: no GPU")
        return 77
    sys.path.insert(0, HERE)
    import loops

    dev = torch.device("cuda", 0)
    torch.cuda.set_device(0)
    torch.manual_seed(1234)
    F = torch.nn.functional
    tags = []
    state = {"step": 0}

    def tag(t, cat, step=None):
        if t is None or not t.is_cuda:
            return
        st = t.untyped_storage()
        # which allocation this storage is: the allocator's running count of
        # allocations when it was seen (the latest allocation at this address
        # up to that count) — an address is reused within a step
        n = torch.cuda.memory_stats(0).get("allocation.all.allocated")
        tags.append({"ptr": st.data_ptr(), "nbytes": st.nbytes(), "category": cat,
                     "step": state["step"] if step is None else step, "nalloc": n})

    if a.loop == "mlp":
        model = loops.make_mlp(torch, dev)
        batch = (512, 2048)
    else:
        model = loops.make_transformer(torch, dev, checkpoint=a.loop == "transformer_ckpt")
    params = list(model.parameters())
    # module state: parameters and buffers (e.g. an attention mask) — saved
    # for backward or not, it is the model's, not an activation
    param_ptrs = {p.untyped_storage().data_ptr() for p in params}
    param_ptrs |= {b.untyped_storage().data_ptr() for b in model.buffers() if b.is_cuda}
    for b in model.buffers():
        tag(b, "parameters", 0)
    for p in params:
        tag(p, "parameters", 0)
        p.register_post_accumulate_grad_hook(lambda p: tag(p.grad, "gradients"))
    opt = loops.adamw(torch, params)

    def pack(t):
        if t.is_cuda and t.untyped_storage().data_ptr() not in param_ptrs:
            tag(t, "activations")
        return t

    def unpack(t):
        return t

    if a.loop == "mlp":
        def fwd():
            x = torch.randn(*batch, device=dev)
            y = torch.randn(*batch, device=dev)
            return F.mse_loss(model(x), y)
    else:
        seq, d, classes = 512, 512, 1024

        def fwd():
            x = torch.randn(8, seq, d, device=dev)
            y = torch.randint(0, classes, (8, seq), device=dev)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = model(x)
            return F.cross_entropy(out.float().view(-1, classes), y.view(-1))

    def step(k):
        state["step"] = k
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            loss = fwd()
        loss.backward()
        opt.step()
        for s in opt.state.values():
            for v in s.values():
                if torch.is_tensor(v):
                    tag(v, "optimizer_states")
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    if a.frames:
        torch.cuda.memory._record_memory_history(stacks="python", max_entries=1_000_000)
    res = loops.run_steps(torch, step, a.steps)
    loss = res.pop("last_loss")
    out = {"loop": a.loop, "pid": os.getpid(), "device": 0, "steps": res["steps"], "baseline": res["baseline"],
           "final_loss": repr(float(loss.item())), "tags": tags, "torch": torch.__version__}
    if a.frames:
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        ev = []
        for e in (snap.get("device_traces") or [[]])[0]:
            fr = e.get("frames") or []
            py = [f for f in fr if not str(f.get("filename", "")).startswith("??") and
                  str(f.get("filename", "")).endswith(".py")]
            inner = py[0] if py else None
            ev.append({"action": e.get("action"), "addr": e.get("addr"), "size": e.get("size"),
                       "frame": inner and {"filename": inner.get("filename"), "line": inner.get("line"),
                                           "name": inner.get("name")}})
        with open(a.out.replace(".json", ".frames.json"), "w") as f:
            json.dump(ev, f)
    with open(a.out, "w") as f:
        json.dump(out, f)
    print(f"loop={a.loop} steps={a.steps} tags={len(tags)} final_loss={out['final_loss']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
