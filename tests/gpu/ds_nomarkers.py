#!/usr/bin/env python3
"""A DeepSpeed run traced without step markers (examples/deepspeed_sft/main.py
--no_step_markers; tests/decode/h200/ds_nomarkers): the decoder must find
the steps from DeepSpeed's own NVTX ranges, and the trace must carry the
NVTX names DeepSpeed 0.19.8 pushes for a ZeRO-3 bf16 run without offload
(DEEPSPEED.md section 4: its table of decorated functions, HEAD, read at
0.19.6).

  - step rule "deepspeed" (steps from DeepSpeedEngine.forward);
  - every step's peak_allocated equals torch's max_memory_allocated, every
    step's end_allocated but the last equals memory_allocated; the last
    step ends where the next forward would begin, so it may be lower by the
    loss tensors the script still held (at most 1 MiB: reported);
  - every name of EXPECTED occurs among the trace's NVTX pushes; the names
    of the table that this configuration does not reach are listed in
    NOT_REACHED with the reason, and must not occur either (a name that
    starts occurring means the table's reading here is out of date).

usage: ds_nomarkers.py DSMEMDECODE DIR   (DIR: traces and traced.rankR.json)
"""
import glob
import json
import os
import re
import subprocess
import sys

S3 = "DeepSpeedZeroOptimizer_Stage3."
PC = "PartitionedParameterCoordinator."
OFF = "DeepSpeedZeRoOffload."
EXPECTED = [
    "DeepSpeedEngine.forward", "DeepSpeedEngine.backward", "DeepSpeedEngine.allreduce_gradients",
    S3 + "step", S3 + "_partition_all_parameters", S3 + "_overflow_check_and_loss_scale_update",
    S3 + "_get_norm_groups", S3 + "get_grad_norm_direct", S3 + "_prepare_sub_group",
    S3 + "_prepare_fp32_grad_for_sub_group", S3 + "unscale_and_clip_grads",
    S3 + "_reassign_or_swap_out_partitioned_parameters", S3 + "_release_sub_group", S3 + "_post_step",
    S3 + "zero_grad", S3 + "independent_gradient_partition_epilogue", S3 + "__add_grad_to_ipg_bucket",
    S3 + "__reduce_and_partition_ipg_grads", S3 + "__avg_scatter_grads", S3 + "partition_grads",
    S3 + "create_reduce_and_remove_grad_hooks.<locals>.wrapper.<locals>.reduce_partition_and_remove_grads",
    "free_param", "AllGatherCoalescedHandle.wait", "Init._convert_to_deepspeed_param.<locals>.all_gather_coalesced",
    "Init._all_gather", "Init._partition_param", "allgather_fn",
    PC + "fetch_sub_module", PC + "release_sub_module", PC + "release_and_reset_all",
    PC + "release_backward_leftovers", PC + "__all_gather_params", PC + "__release_param",
    PC + "__params_to_release", "get_all_parameters",
    OFF + "partition_all_parameters", OFF + "setup_zero_stage3_hooks.<locals>._start_of_forward_hook",
    OFF + "_register_deepspeed_module.<locals>._post_forward_module_hook",
    OFF + "_register_deepspeed_module.<locals>._run_before_backward_function",
    OFF + "_register_deepspeed_module.<locals>._run_after_backward_function",
    "reduce_scatter_coalesced", "reduce_scatter_fn",
    # wrapped calls: torch.cat's qualname, and the c10d Work handle's wait
    # (DEEPSPEED.md: "exact qualname unverified, likely PyCapsule.wait")
    "_VariableFunctionsClass.cat",
    "pybind11_detail_function_record_v1_system_libstdcpp_gxx_abi_1xxx_use_cxx11_abi_1.wait",
    # runtime/zero/utils.py: pushed at init here, not only with sanity checks
    "assert_ints_same_as_other_ranks", "assert_lst_len_same_as_other_ranks",
]
NOT_REACHED = {
    S3 + "has_overflow": "fp16 loss scaling only (the run is bf16)",
    S3 + "flatten_dense_tensors_aligned": "not pushed in this run (a path this configuration does not take)",
    S3 + "__avg_scatter_contiguous_grads": "reduce_scatter=False only",
    "NoGatherCoalescedHandle.wait": "one rank or offloaded parameters only",
    "AllReduceCoalescedHandle.wait": "not pushed in this run (a path this configuration does not take)",
    "Init._partition_param_sec": "hpZ (zero_hpz_partition_size > 1) only",
    PC + "__prefetch_nvme_param_partitions": "NVMe offload only",
    "update_recompute_parameters": "activation checkpointing with recompute only",
    "all_to_all_quant_reduce": "quantized gradients (zero_quantized_gradients) only",
    "all_to_all_loco_quant_reduce": "LoCo quantized gradients only",
    "MiCS_Optimizer.allreduce_mics_shard_grads": "MiCS only",
}
NVTX = re.compile(r'^\d+ NVTX_PUSH .*?name=\d+ "([^"]*)"')


def main():
    dec, d = sys.argv[1], sys.argv[2]
    bad = []
    for ref_path in sorted(glob.glob(os.path.join(d, "traced.rank*.json"))):
        with open(ref_path) as f:
            ref = json.load(f)
        rank = ref["rank"]
        trace = glob.glob(os.path.join(d, "*.rank%d.zst" % rank))[0]
        p = subprocess.run([dec, "--format", "json", trace], capture_output=True, text=True)
        proc = json.loads(p.stdout)["processes"][0]
        if proc["step_rule"] != "deepspeed":
            bad.append("rank %d: step rule %r, expected deepspeed" % (rank, proc["step_rule"]))
        rows = {r["step"]: r for r in proc["steps"] if r["device"] == ref["device"]}
        last = ref["steps"][-1]["step"]
        for t in ref["steps"]:
            r = rows.get(t["step"])
            if r is None:
                bad.append("rank %d step %d: not found" % (rank, t["step"]))
                continue
            if r["peak_allocated"] != t["max_allocated"]:
                bad.append("rank %d step %d: peak %d, torch %d" % (rank, t["step"], r["peak_allocated"],
                                                                  t["max_allocated"]))
            diff = r["end_allocated"] - t["allocated"]
            if t["step"] != last and diff:
                bad.append("rank %d step %d: end %+d against torch" % (rank, t["step"], diff))
            elif t["step"] == last and not -2 ** 20 <= diff <= 0:
                bad.append("rank %d last step: end %+d against torch (allowed: -1 MiB..0)" % (rank, diff))
            elif t["step"] == last:
                print("rank %d: %d steps, peaks equal; the last step's end %+d B (the held loss tensors)"
                      % (rank, len(ref["steps"]), diff))
        names = {}
        dump = subprocess.run([dec, "--dump", trace], capture_output=True, text=True).stdout
        for line in dump.splitlines():
            m = NVTX.match(line)
            if m:
                names[m.group(1)] = names.get(m.group(1), 0) + 1
        missing = [n for n in EXPECTED if n not in names]
        reached = [n for n in NOT_REACHED if n in names]
        bad += ["rank %d: NVTX name %s not in the trace" % (rank, n) for n in missing]
        bad += ["rank %d: NVTX name %s occurs (listed as not reached: %s)" % (rank, n, NOT_REACHED[n])
                for n in reached]
        print("rank %d: %d of %d expected DeepSpeed NVTX names present, %d pushes of them; %d table names not"
              " reached, none present" % (rank, len(EXPECTED) - len(missing), len(EXPECTED),
                                          sum(names.get(n, 0) for n in EXPECTED), len(NOT_REACHED)))
    for b in bad:
        print("FAIL: " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
