#!/usr/bin/env python3
"""examples/deepspeed_sft/main.py without torch or DeepSpeed (issue 6 part 8):
its argument handling and ds_config(), checked against where DeepSpeed-Chat's
get_train_ds_config puts each setting (/work/shared/DEEPSPEED.md section 2).
torch, deepspeed and transformers are imported inside main() only, so the
module imports on any python3; a stub in sys.modules makes sure none of them
is touched.

usage: sft_config.py MAIN_PY
"""
import contextlib
import importlib.util
import io
import sys

MAIN = sys.argv[1]


class Forbidden:
    def __getattr__(self, name):
        raise AssertionError("torch/deepspeed touched at import or in ds_config()")


for m in ("torch", "deepspeed", "transformers"):
    sys.modules[m] = Forbidden()
spec = importlib.util.spec_from_file_location("sft_main", MAIN)
sft = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sft)

fails = []


def want(what, got, exp):
    if got != exp:
        fails.append("%s: %r, expected %r" % (what, got, exp))


# defaults
a = sft.parse([])
want("default model", a.model, "opt-125m")
want("default dtype", a.dtype, "bf16")
c = sft.ds_config(a, 1)
z = c["zero_optimization"]
want("default stage", z["stage"], 2)
want("default offload_param", z["offload_param"], {"device": "none"})
want("default offload_optimizer", z["offload_optimizer"], {"device": "none"})
want("default overlap_comm", z["overlap_comm"], True)
want("default reduce_bucket_size", z["reduce_bucket_size"], 5e8)
want("default allgather_bucket_size", z["allgather_bucket_size"], 5e8)
want("bf16", c.get("bf16"), {"enabled": True})
want("no fp16 with bf16", "fp16" in c, False)
want("micro-batch", c["train_micro_batch_size_per_gpu"], 4)
want("train_batch_size 4 x 1 x 1", c["train_batch_size"], 4)

# DeepSpeed-Chat's flags, --name value and --name=value
a = sft.parse(["--model_name_or_path", "facebook/opt-1.3b", "--zero_stage", "3", "--offload",
               "--per_device_train_batch_size=2", "--max_seq_len", "512", "--gradient_accumulation_steps", "3",
               "--dtype", "fp16", "--overlap_comm", "0", "--reduce_bucket_size", "2e8",
               "--allgather_bucket_size=1e8", "--steps_per_print", "7"])
want("model path kept", a.model, "facebook/opt-1.3b")
want("model key", sft.model_key(a.model), "opt-1.3b")
want("max_seq_len", a.max_seq_len, 512)
c = sft.ds_config(a, 2)
z = c["zero_optimization"]
want("stage", z["stage"], 3)
want("offload_param", z["offload_param"], {"device": "cpu"})
want("offload_optimizer", z["offload_optimizer"], {"device": "cpu"})
want("overlap_comm", z["overlap_comm"], False)
want("reduce_bucket_size", z["reduce_bucket_size"], 2e8)
want("allgather_bucket_size", z["allgather_bucket_size"], 1e8)
for k, v in (("stage3_param_persistence_threshold", 1e4), ("stage3_max_live_parameters", 3e7),
             ("stage3_prefetch_bucket_size", 3e7), ("memory_efficient_linear", False)):
    want(k, z.get(k), v)
want("fp16", c.get("fp16"), {"enabled": True, "loss_scale_window": 100})
want("no bf16 with fp16", "bf16" in c, False)
want("micro-batch", c["train_micro_batch_size_per_gpu"], 2)
want("gradient_accumulation_steps", c["gradient_accumulation_steps"], 3)
want("train_batch_size = 2 x 2 x 3", c["train_batch_size"], 12)
want("steps_per_print", c["steps_per_print"], 7)
want("gradient_clipping", c["gradient_clipping"], 1.0)
want("prescale_gradients", c["prescale_gradients"], False)
want("wall_clock_breakdown", c["wall_clock_breakdown"], False)
want("settings at the top level", sorted(k for k in c if k in ("stage", "offload_param", "overlap_comm")), [])
want("train_batch_size, world 8", sft.ds_config(a, 8)["train_batch_size"], 48)

# every model of the table, by name and by path
for k in sft.OPT:
    want("model " + k, sft.model_key(sft.parse(["--model", "/models/" + k + "/"]).model), k)

# an unknown model is rejected by the parser (exit 2, before torch is imported)
for bad in (["--model", "llama-7b"], ["--model_name_or_path", "facebook/opt-2.7b"]):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            sft.parse(bad)
        fails.append("%r accepted" % bad)
    except SystemExit as e:
        want("exit status for %r" % bad, e.code, 2)
        if "unknown model" not in err.getvalue():
            fails.append("no 'unknown model' message for %r: %r" % (bad, err.getvalue()))
err = io.StringIO()
try:
    with contextlib.redirect_stderr(err):
        sft.parse(["--dtype", "fp32"])
    fails.append("--dtype fp32 accepted")
except SystemExit as e:
    want("exit status for --dtype fp32", e.code, 2)

# --offload_param: auto follows --offload (DeepSpeed-Chat), none keeps the
# parameters on the GPU (optimizer offload only), cpu without --offload
z = sft.ds_config(sft.parse(["--zero_stage", "3", "--offload"]), 2)["zero_optimization"]
want("offload: params", z["offload_param"], {"device": "cpu"})
want("offload: optimizer", z["offload_optimizer"], {"device": "cpu"})
z = sft.ds_config(sft.parse(["--zero_stage", "3", "--offload", "--offload_param", "none"]), 2)["zero_optimization"]
want("optimizer offload only: params", z["offload_param"], {"device": "none"})
want("optimizer offload only: optimizer", z["offload_optimizer"], {"device": "cpu"})
z = sft.ds_config(sft.parse(["--zero_stage", "3", "--offload_param", "cpu"]), 2)["zero_optimization"]
want("param offload only: params", z["offload_param"], {"device": "cpu"})
want("param offload only: optimizer", z["offload_optimizer"], {"device": "none"})

# DeepSpeed 0.19.8's ThroughputTimer line (utils/timer.py format string)
line = ("epoch=0/micro_step=4/global_step=4, RunningAvgSamplesPerSec=12.5, CurrSamplesPerSec=13.1, "
        "MemAllocated=10.8GB, MaxMemAllocated=16.85GB")
want("ThroughputTimer line", sft.parse_tput(line),
     {"global_step": 4, "mem_allocated_gb": 10.8, "max_mem_allocated_gb": 16.85})
want("not a ThroughputTimer line", sft.parse_tput("[INFO] DeepSpeed Flops Profiler Enabled: False"), None)

if fails:
    print("\n".join(fails))
    sys.exit(1)
print("ok")
