#!/usr/bin/env python3
"""Supervised fine-tuning of an OPT causal LM with DeepSpeed, shaped like
DeepSpeed-Chat's step 1 (training/step1_supervised_finetuning/main.py) so a
traced run answers the seed note's questions — but self-contained: the model
is built from the public OPT configuration with random weights and trained on
synthetic tokens, so nothing is downloaded.

    torchrun --nproc_per_node 2 examples/deepspeed_sft/main.py --model opt-125m --zero_stage 3
    LD_PRELOAD=$PWD/build/interpose/libdsmemtrace.so deepspeed --num_gpus 2 examples/deepspeed_sft/main.py ...

Each iteration is an NVTX range "train_step" (unless --no_step_markers); after
every step the script reads torch's counters (max_memory_allocated,
memory_allocated, max_memory_reserved, memory_reserved), emits an NVTX mark
"dsmemtrace:reset" and resets the peak — so the trace carries the reference it
must equal.  Rank r writes them to --counters_out (".rankR" inserted).

Flags follow DeepSpeed-Chat's names where they exist.
"""
import argparse
import json
import logging
import os
import re
import sys
import time

OPT = {  # the public facebook/opt-* configurations
    "opt-125m": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, ffn_dim=3072),
    "opt-350m": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, ffn_dim=4096,
                     word_embed_proj_dim=512, do_layer_norm_before=False),
    "opt-1.3b": dict(hidden_size=2048, num_hidden_layers=24, num_attention_heads=32, ffn_dim=8192),
    "opt-6.7b": dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, ffn_dim=16384),
    "opt-13b": dict(hidden_size=5120, num_hidden_layers=40, num_attention_heads=40, ffn_dim=20480),
}


def model_key(name):
    """The OPT table's key for --model: the name itself or a path's basename
    (facebook/opt-1.3b); None when unknown."""
    key = os.path.basename(name.rstrip("/"))
    return key if key in OPT else None


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", "--model_name_or_path", dest="model", default="opt-125m",
                    help="one of " + ", ".join(OPT) + " (a path's basename is matched too)")
    ap.add_argument("--per_device_train_batch_size", type=int, default=4)
    ap.add_argument("--max_seq_len", type=int, default=256)
    ap.add_argument("--zero_stage", type=int, default=2)
    ap.add_argument("--offload", action="store_true", help="optimizer (and, stage 3, parameter) offload to CPU")
    ap.add_argument("--offload_param", choices=("auto", "none", "cpu"), default="auto",
                    help="with --offload: where parameters go (auto: cpu, as DeepSpeed-Chat; none: optimizer "
                         "offload only)")
    ap.add_argument("--gradient_checkpointing", action="store_true")
    ap.add_argument("--gradient_accumulation_steps", type=int, default=1)
    ap.add_argument("--dtype", choices=("fp16", "bf16"), default="bf16")
    ap.add_argument("--overlap_comm", type=int, default=1)
    ap.add_argument("--reduce_bucket_size", type=float, default=5e8)
    ap.add_argument("--allgather_bucket_size", type=float, default=5e8)
    ap.add_argument("--steps", type=int, default=8, help="optimizer steps")
    ap.add_argument("--steps_per_print", type=int, default=10)
    ap.add_argument("--learning_rate", type=float, default=1e-5)
    ap.add_argument("--no_step_markers", action="store_true")
    ap.add_argument("--counters_out", default="", help="write torch's per-step counters here (JSON)")
    ap.add_argument("--local_rank", type=int, default=-1)
    a = ap.parse_args(argv)
    if model_key(a.model) is None:
        ap.error(f"unknown model {a.model}: one of {', '.join(OPT)}")
    return a


def ds_config(a, world):
    """Like dschat/utils/ds_utils.py get_train_ds_config."""
    off = "cpu" if a.offload else "none"
    off_param = off if a.offload_param == "auto" else a.offload_param
    zero = {
        "stage": a.zero_stage,
        "overlap_comm": bool(a.overlap_comm),
        "offload_param": {"device": off_param},
        "offload_optimizer": {"device": off},
        "stage3_param_persistence_threshold": 1e4,
        "stage3_max_live_parameters": 3e7,
        "stage3_prefetch_bucket_size": 3e7,
        "memory_efficient_linear": False,
        "reduce_bucket_size": a.reduce_bucket_size,
        "allgather_bucket_size": a.allgather_bucket_size,
    }
    c = {
        "train_micro_batch_size_per_gpu": a.per_device_train_batch_size,
        "train_batch_size": a.per_device_train_batch_size * world * a.gradient_accumulation_steps,
        "gradient_accumulation_steps": a.gradient_accumulation_steps,
        "steps_per_print": a.steps_per_print,
        "zero_optimization": zero,
        "gradient_clipping": 1.0,
        "prescale_gradients": False,
        "wall_clock_breakdown": False,
        # with --offload the optimizer steps on the CPU copy: DeepSpeed-Chat
        # uses DeepSpeedCPUAdam (a compiled op); this example passes torch's
        # AdamW, which DeepSpeed accepts when told so
        "zero_force_ds_cpu_optimizer": False,
    }
    if a.dtype == "fp16":
        c["fp16"] = {"enabled": True, "loss_scale_window": 100}
    else:
        c["bf16"] = {"enabled": True}
    return c


TPUT_RE = re.compile(r"global_step=(\d+),.*MemAllocated=([0-9.]+)GB, MaxMemAllocated=([0-9.]+)GB")


def parse_tput(msg):
    """DeepSpeed's ThroughputTimer line (utils/timer.py, printed every
    steps_per_print optimizer steps from the third on):
    {"global_step", "mem_allocated_gb", "max_mem_allocated_gb"} or None.
    Its numbers are round(x / 1024**3, 2) of torch's memory_allocated() and
    max_memory_allocated() at the end of DeepSpeedEngine.step."""
    m = TPUT_RE.search(msg)
    if not m:
        return None
    return {"global_step": int(m.group(1)), "mem_allocated_gb": float(m.group(2)),
            "max_mem_allocated_gb": float(m.group(3))}


def partition_sizes(opt):
    """DeepSpeed's own GPU-resident model-state tensors after training, by
    our category names: {category: {"bytes", "tensors"}} plus "optimizer" (the
    class).  ZeRO-1/2: the flat bit16 groups (padding included), the fp32
    master partitions and Adam's states of those; ZeRO-3: the bit16 partition
    buffer, the fp32 partitions, the flat gradient-partition buffer and the
    states.  Only tensors on a CUDA device count; what is not found is left out."""
    import torch

    out = {"optimizer": type(opt).__name__}
    seen = set()

    def add(cat, tensors):
        d = out.setdefault(cat, {"bytes": 0, "tensors": 0})
        for t in tensors:
            if not isinstance(t, torch.Tensor) or not t.is_cuda or t.numel() == 0:
                continue
            st = t.untyped_storage()
            key = (st.data_ptr(), st.nbytes())
            if key in seen:  # views of one buffer count once
                continue
            seen.add(key)
            d["bytes"] += st.nbytes()
            d["tensors"] += 1

    buf = getattr(opt, "lp_param_buffer", None)
    if buf is not None:  # ZeRO-3 with defragmentation: one buffer
        add("parameters", [buf])
    else:
        add("parameters", getattr(opt, "bit16_groups_flat", None) or getattr(opt, "fp16_partitioned_groups_flat", []))
    masters = getattr(opt, "single_partition_of_fp32_groups", None) or getattr(opt, "fp32_partitioned_groups_flat", [])
    add("master_weights", masters)
    g = getattr(opt, "grad_partitions_flat_buffer", None)
    add("gradients", [g] if g is not None else [])
    inner = getattr(opt, "optimizer", None)
    states = []
    for m in masters:
        st = inner.state.get(m, {}) if inner is not None else {}
        states.extend(v for v in st.values() if isinstance(v, torch.Tensor))
    add("optimizer_states", states)
    return out


_hf_ds_config = None


def build_engine(a, world):
    """The model (random weights from the OPT configuration), torch's AdamW
    and the DeepSpeed engine for the parsed flags: (engine, optimizer,
    model, OPT config).  Needs deepspeed.init_distributed() and the device
    set; also used by bench/gpu/overhead.py."""
    import torch
    import deepspeed
    from transformers import AutoModelForCausalLM, OPTConfig

    key = model_key(a.model)  # known: parse() rejects the others
    cfg = OPTConfig(vocab_size=50272, max_position_embeddings=2048, **OPT[key])
    conf = ds_config(a, world)
    global _hf_ds_config
    if a.zero_stage == 3:
        # as DeepSpeed-Chat's create_hf_model: tell transformers about ZeRO-3
        # so it builds the model inside zero.Init and gathers partitioned
        # parameters for its weight initialisation (a bare zero.Init breaks
        # transformers 5's _init_weights on empty partitions)
        from transformers.integrations import HfDeepSpeedConfig
        _hf_ds_config = HfDeepSpeedConfig(conf)  # must stay alive (transformers keeps a weak reference)
    model = AutoModelForCausalLM.from_config(cfg)
    if a.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    opt = torch.optim.AdamW(model.parameters(), lr=a.learning_rate, betas=(0.9, 0.95))
    engine, opt, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=conf)
    return engine, opt, model, cfg


def main():
    a = parse()
    import torch
    import deepspeed

    deepspeed.init_distributed()
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    torch.cuda.set_device(local)
    torch.manual_seed(1234)
    key = model_key(a.model)
    conf = ds_config(a, world)
    engine, opt, model, cfg = build_engine(a, world)
    tput = []  # ThroughputTimer lines of the current step (DeepSpeed logs them on every rank)

    class Tput(logging.Handler):
        def emit(self, record):
            t = parse_tput(record.getMessage())
            if t:
                tput.append(t)
                if rank == 0:
                    print("ThroughputTimer: " + record.getMessage(), flush=True)

    # DeepSpeed 0.19 logs at WARNING, so the timer's INFO line (printed by
    # the DeepSpeed the seed ran) is dropped; let it reach our handler (the
    # console handler keeps its WARNING level: nothing else gets printed)
    from deepspeed.utils import logger as ds_logger
    ds_logger.setLevel(logging.INFO)
    ds_logger.addHandler(Tput())
    dev = torch.device("cuda", local)
    g = torch.Generator(device="cpu").manual_seed(4321 + rank)
    nvtx = torch.cuda.nvtx

    def counters():
        c = {"max_allocated": torch.cuda.max_memory_allocated(local), "allocated": torch.cuda.memory_allocated(local),
             "max_reserved": torch.cuda.max_memory_reserved(local), "reserved": torch.cuda.memory_reserved(local)}
        nvtx.mark("dsmemtrace:reset")
        torch.cuda.reset_peak_memory_stats(local)
        return c

    steps, baseline = [], counters()
    t0 = time.perf_counter()
    loss, oom = None, None
    try:
        for k in range(1, a.steps + 1):
            if not a.no_step_markers:
                nvtx.range_push("train_step")
            for _ in range(a.gradient_accumulation_steps):
                ids = torch.randint(0, cfg.vocab_size, (a.per_device_train_batch_size, a.max_seq_len), generator=g)
                ids = ids.to(dev)
                loss = engine(input_ids=ids, labels=ids, use_cache=False).loss
                engine.backward(loss)
                engine.step()
            if not a.no_step_markers:
                nvtx.range_pop()
            c = counters()
            c["step"] = k
            c["loss"] = float(loss.item())
            if tput:
                c["throughput_timer"] = tput[-1]
            tput.clear()
            steps.append(c)
            if rank == 0:
                print(f"step {k}: loss {c['loss']:.4f} max_allocated {c['max_allocated']} allocated {c['allocated']}",
                      flush=True)
    except torch.OutOfMemoryError as e:
        # on purpose in the grid's OOM row: keep what torch says and what
        # was measured so far, then leave without the collective teardown
        oom = {"step": len(steps) + 1, "message": str(e).splitlines()[0][:300],
               "max_allocated": torch.cuda.max_memory_allocated(local),
               "allocated": torch.cuda.memory_allocated(local), "reserved": torch.cuda.memory_reserved(local)}
        print(f"rank {rank}: out of memory in step {oom['step']}: {oom['message']}", file=sys.stderr, flush=True)
    if oom is None:
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    try:
        parts = partition_sizes(engine.optimizer)
    except Exception as e:  # informational: never fail the run for it
        parts = {"error": repr(e)}
    if a.counters_out:
        out = a.counters_out.replace(".json", f".rank{rank}.json")
        with open(out, "w") as f:
            json.dump({"rank": rank, "device": local, "world_size": world, "pid": os.getpid(), "model": key,
                       "zero_stage": a.zero_stage, "offload": a.offload, "steps": steps, "baseline": baseline,
                       "loop_s": dt, "deepspeed": deepspeed.__version__, "torch": torch.__version__,
                       "params": sum(p.ds_numel if hasattr(p, "ds_numel") else p.numel() for p in model.parameters()),
                       "final_loss": repr(float(loss.item())) if loss is not None else None,
                       "partitions": parts, "oom": oom,
                       "config": {"offload_param": conf["zero_optimization"]["offload_param"]["device"],
                                  "offload_optimizer": conf["zero_optimization"]["offload_optimizer"]["device"],
                                  "micro_batch": a.per_device_train_batch_size, "seq": a.max_seq_len,
                                  "reduce_bucket_size": a.reduce_bucket_size,
                                  "allgather_bucket_size": a.allgather_bucket_size}}, f, indent=1)
    if oom is not None:
        return 3
    if rank == 0:
        print(f"done: {a.steps} steps in {dt:.2f} s", flush=True)
    import torch.distributed as dist
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
