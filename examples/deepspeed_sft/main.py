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
import os
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
    zero = {
        "stage": a.zero_stage,
        "overlap_comm": bool(a.overlap_comm),
        "offload_param": {"device": off},
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


def main():
    a = parse()
    import torch
    import deepspeed
    from transformers import AutoModelForCausalLM, OPTConfig

    deepspeed.init_distributed()
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    torch.cuda.set_device(local)
    torch.manual_seed(1234)
    key = model_key(a.model)  # known: parse() rejects the others
    cfg = OPTConfig(vocab_size=50272, max_position_embeddings=2048, **OPT[key])
    conf = ds_config(a, world)
    dschf = None
    if a.zero_stage == 3:
        # as DeepSpeed-Chat's create_hf_model: tell transformers about ZeRO-3
        # so it builds the model inside zero.Init and gathers partitioned
        # parameters for its weight initialisation (a bare zero.Init breaks
        # transformers 5's _init_weights on empty partitions)
        from transformers.integrations import HfDeepSpeedConfig
        dschf = HfDeepSpeedConfig(conf)  # noqa: F841 (must stay alive)
    model = AutoModelForCausalLM.from_config(cfg)
    if a.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    opt = torch.optim.AdamW(model.parameters(), lr=a.learning_rate, betas=(0.9, 0.95))
    engine, opt, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=conf)
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
    loss = None
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
        steps.append(c)
        if rank == 0:
            print(f"step {k}: loss {c['loss']:.4f} max_allocated {c['max_allocated']} allocated {c['allocated']}",
                  flush=True)
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    if a.counters_out:
        out = a.counters_out.replace(".json", f".rank{rank}.json")
        with open(out, "w") as f:
            json.dump({"rank": rank, "device": local, "world_size": world, "pid": os.getpid(), "model": key,
                       "zero_stage": a.zero_stage, "offload": a.offload, "steps": steps, "baseline": baseline,
                       "loop_s": dt, "deepspeed": deepspeed.__version__, "torch": torch.__version__,
                       "params": sum(p.ds_numel if hasattr(p, "ds_numel") else p.numel() for p in model.parameters()),
                       "final_loss": repr(float(loss.item()))}, f, indent=1)
    if rank == 0:
        print(f"done: {a.steps} steps in {dt:.2f} s", flush=True)
    import torch.distributed as dist
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
