/* Attribution rules, all of them (docs/attribution.md explains each one
 * with its evidence; /work/shared/DEEPSPEED.md section numbers in brackets).
 *
 *  1. names: one table (name_rules) maps Python frames (co_qualname + file)
 *     and NVTX range names (DeepSpeed pushes qualnames) to a category, a
 *     phase and flags.  DeepSpeed versions that name the same thing
 *     differently get one row each.  Wrapper frames are skipped.
 *  2. phases: attrib_phase.
 *  3. the decision for one allocation: attrib_category, rules in order. */
#include "attrib.h"

#include <stdlib.h>
#include <string.h>

static const char *const cat_names[DSMT_NCAT] = {
	"parameters", "gathered_parameters", "master_weights", "optimizer_states", "gradients", "activations",
	"temporaries", "buckets", "communication", "workspace", "other", "cached",
};

const char *dsmt_cat_name(unsigned cat) { return cat < DSMT_NCAT ? cat_names[cat] : NULL; }

const char *dsmt_phase_name(unsigned ph)
{
	static const char *const n[DSMT_NPHASE] = {NULL, "init", "forward", "backward", "step", "eval"};
	return ph < DSMT_NPHASE ? n[ph] : NULL;
}

/* ---- 1. names ------------------------------------------------------- */

enum { W_PY = 1, W_NVTX = 2, W_BOTH = 3 };

struct name_rule {
	const char *name;  /* qualname, matched as a suffix at a '.' boundary ("defragment" matches
			    * "DeepSpeedZeroOptimizer_Stage3.defragment"); NULL: any */
	const char *file;  /* the frame's file contains this; NULL: any (never matches NVTX) */
	const char *under; /* an outer frame's qualname ends so (Python frames only) */
	uint8_t cat, phase, flags, where;
};

#define C(x) DSMT_CAT_##x
#define P(x) DSMT_PH_##x
#define NONE_ DSMT_CAT_NONE
/* Order matters: the first row that matches a frame decides for it. */
static const struct name_rule name_rules[] = {
	/* -- wrappers, skipped when looking for the allocating function [5.1] -- */
	{"instrument_w_nvtx.<locals>.wrapped_fn", "deepspeed/utils/nvtx.py", NULL, NONE_, 0, AF_SKIP, W_PY},
	{NULL, "torch/utils/_contextlib.py", NULL, NONE_, 0, AF_SKIP, W_PY},
	{NULL, "torch/_dynamo/eval_frame.py", NULL, NONE_, 0, AF_SKIP, W_PY},
	{NULL, "torch/_dynamo/external_utils.py", NULL, NONE_, 0, AF_SKIP, W_PY},
	{"Optimizer.profile_hook_step.<locals>.wrapper", "torch/optim/optimizer.py", NULL, NONE_, P(STEP), AF_SKIP, W_PY},
	{"_use_grad_for_differentiable.<locals>._use_grad", "torch/optim/optimizer.py", NULL, NONE_, P(STEP), AF_SKIP, W_PY},
	{"Module._wrapped_call_impl", "torch/nn/modules/module.py", NULL, NONE_, 0, AF_SKIP, W_PY},
	{"Module._call_impl", "torch/nn/modules/module.py", NULL, NONE_, 0, AF_SKIP, W_PY},
	{"Function.apply", "torch/autograd/function.py", NULL, NONE_, 0, AF_SKIP, W_PY},
	{"BackwardCFunction.apply", "torch/autograd/function.py", NULL, NONE_, 0, AF_SKIP, W_PY},
	{"DeviceContext.__torch_function__", "torch/utils/_device.py", NULL, NONE_, 0, AF_SKIP, W_PY},
	/* torch helpers that allocate on their caller's behalf: the caller decides [5.1] */
	{"_flatten_dense_tensors", "torch/_utils.py", NULL, NONE_, 0, AF_SKIP, W_PY},
	{"align_dense_tensors", "deepspeed/runtime/utils.py", NULL, NONE_, 0, AF_SKIP, W_PY},

	/* -- activation checkpointing: recompute in backward [5.5] -- */
	{NULL, "torch/utils/checkpoint.py", NULL, NONE_, 0, AF_RECOMPUTE, W_PY},
	{NULL, "deepspeed/runtime/activation_checkpointing/checkpointing.py", NULL, NONE_, 0, AF_RECOMPUTE, W_PY},

	/* -- phases named by frames and ranges [4], [5.6 Phases] -- */
	{"DeepSpeedEngine.forward", NULL, NULL, NONE_, P(FORWARD), 0, W_BOTH},
	{"DeepSpeedEngine.backward", NULL, NULL, NONE_, P(BACKWARD), 0, W_BOTH},
	{"DeepSpeedZeroOptimizer_Stage3.backward", NULL, NULL, NONE_, P(BACKWARD), 0, W_BOTH}, /* 0.14.5 */
	{"Tensor.backward", "torch/_tensor.py", NULL, NONE_, P(BACKWARD), 0, W_PY},
	{"backward", "torch/autograd/__init__.py", NULL, NONE_, P(BACKWARD), 0, W_PY},
	{"_engine_run_backward", "torch/autograd/graph.py", NULL, NONE_, P(BACKWARD), 0, W_PY},
	{"DeepSpeedEngine.step", NULL, NULL, NONE_, P(STEP), 0, W_PY},
	{"DeepSpeedEngine._take_model_step", NULL, NULL, NONE_, P(STEP), 0, W_PY},
	{"DeepSpeedZeroOptimizer_Stage3.step", NULL, NULL, NONE_, P(STEP), 0, W_BOTH},
	{"SuperOffloadOptimizer_Stage3.step", NULL, NULL, NONE_, P(STEP), 0, W_BOTH},

	/* -- parameters [5.2], [5.3 #1], [5.4 #1], [5.6] -- */
	{"flatten_dense_tensors_aligned", NULL, "DeepSpeedZeroOptimizer.__init__", C(PARAMETERS), 0, 0, W_PY},
	{"defragment", NULL, NULL, C(PARAMETERS), 0, 0, W_PY}, /* HEAD: module fn; 0.14.5: Stage3 staticmethod */
	{"Init._partition_param", NULL, NULL, C(PARAMETERS), 0, 0, W_BOTH},
	{"Init._partition_param_sec", NULL, NULL, C(PARAMETERS), 0, 0, W_BOTH},
	{"_create_param_groups_fp16_flat_cpu_memory", NULL, NULL, C(PARAMETERS), 0, 0, W_PY},
	{"zero_wrapper_for_fp_tensor_constructor.<locals>.wrapped_fn", NULL, NULL, C(PARAMETERS), 0, 0, W_PY},
	{"DeepSpeedEngine._configure_distributed_model", NULL, NULL, C(PARAMETERS), 0, 0, W_PY},
	{"DeepSpeedEngine._cast_module_mixed_precision", NULL, NULL, C(PARAMETERS), 0, 0, W_PY},
	{"Module.to.<locals>.convert", "torch/nn/modules/module.py", NULL, C(PARAMETERS), 0, 0, W_PY},
	{"Module._apply", "torch/nn/modules/module.py", NULL, C(PARAMETERS), 0, 0, W_PY},
	{"Module.to", "torch/nn/modules/module.py", NULL, C(PARAMETERS), 0, 0, W_PY},
	{"Module.to_empty", "torch/nn/modules/module.py", NULL, C(PARAMETERS), 0, 0, W_PY},
	{"Module.cuda", "torch/nn/modules/module.py", NULL, C(PARAMETERS), 0, 0, W_PY},
	{"Module.half", "torch/nn/modules/module.py", NULL, C(PARAMETERS), 0, 0, W_PY},
	{"Module.bfloat16", "torch/nn/modules/module.py", NULL, C(PARAMETERS), 0, 0, W_PY},
	{"Module.float", "torch/nn/modules/module.py", NULL, C(PARAMETERS), 0, 0, W_PY},
	{"Module.type", "torch/nn/modules/module.py", NULL, C(PARAMETERS), 0, 0, W_PY},
	{NULL, "torch/nn/init.py", NULL, C(PARAMETERS), 0, 0, W_PY},
	{"Parameter.__new__", "torch/nn/parameter.py", NULL, C(PARAMETERS), 0, 0, W_PY},
	{"reset_parameters", NULL, NULL, C(PARAMETERS), 0, 0, W_PY},
	{"PreTrainedModel._init_weights", NULL, NULL, C(PARAMETERS), 0, 0, W_PY},
	{"PreTrainedModel._initialize_weights", NULL, NULL, C(PARAMETERS), 0, 0, W_PY},
	{"PreTrainedModel.init_weights", NULL, NULL, C(PARAMETERS), 0, 0, W_PY},
	{"__init__", "torch/nn/modules/", NULL, C(PARAMETERS), 0, AF_DIRECT, W_PY}, /* nn.Linear(..., device=) */

	/* -- gathered parameters, ZeRO-3 [5.4 #6, #8, #9, #16] -- */
	{"AllGatherCoalescedHandle.wait", NULL, NULL, C(GATHERED), 0, 0, W_BOTH},
	{"_all_gather_sequential", NULL, NULL, C(GATHERED), 0, 0, W_PY},
	{"NoGatherHandle.__init__", NULL, NULL, C(GATHERED), 0, 0, W_PY},
	{"NoGatherCoalescedHandle.__init__", NULL, NULL, C(GATHERED), 0, 0, W_PY},
	{"NoGatherCoalescedHandle.wait", NULL, NULL, C(GATHERED), 0, 0, W_NVTX},
	{"Init._allgather_params_coalesced", NULL, NULL, C(GATHERED), 0, 0, W_PY},
	{"Init._allgather_params_sequential", NULL, NULL, C(GATHERED), 0, 0, W_PY},
	{"Init._allgather_params", NULL, NULL, C(GATHERED), 0, 0, W_PY}, /* 0.14.5 */
	{"Init._allgather_param", NULL, NULL, C(GATHERED), 0, 0, W_PY},
	{"Init._all_gather", NULL, NULL, C(GATHERED), 0, 0, W_BOTH},
	{"PartitionedParameterCoordinator.fetch_sub_module", NULL, NULL, C(GATHERED), 0, 0, W_NVTX},

	/* -- buckets: reduce/IPG, all-gather and reduce-scatter staging [5.3 #4, #5], [5.4 #4, #7, #11] -- */
	{"_all_gather_dtype", NULL, NULL, C(BUCKETS), 0, 0, W_PY},
	{"_all_gather_coalesced", NULL, NULL, C(BUCKETS), 0, 0, W_PY},
	/* 0.14.5 gathers a single parameter inline here; at world size 1 (NoGather handles) the
	 * allocation in this range is the full parameter */
	{"Init._convert_to_deepspeed_param.<locals>.all_gather_coalesced", NULL, NULL, C(BUCKETS), 0, AF_WS1_GATHER,
	 W_BOTH},
	/* 0.19.8 pushes no range for all_gather_coalesced (docs/validation.md): the flat all-gather
	 * buffer is allocated directly in this one; the full parameters come later, in
	 * AllGatherCoalescedHandle.wait (at world size 1 here: NoGather handles) */
	{"PartitionedParameterCoordinator.__all_gather_params", NULL, NULL, C(BUCKETS), 0, AF_WS1_GATHER, W_BOTH},
	{"DeepSpeedZeroOptimizer.setup_buckets", NULL, NULL, C(BUCKETS), 0, 0, W_PY},     /* HEAD (>= 0.18.3) */
	{"DeepSpeedZeroOptimizer.backward", NULL, NULL, C(BUCKETS), P(BACKWARD), 0, W_PY}, /* 0.14.5 ipg_buffer */
	{"DeepSpeedZeroOptimizer.reduce_gradients", NULL, NULL, C(BUCKETS), 0, 0, W_PY},
	{"reduce_scatter_coalesced", NULL, NULL, C(BUCKETS), 0, 0, W_BOTH},
	{"all_to_all_quant_reduce", NULL, NULL, C(BUCKETS), 0, 0, W_BOTH},
	{"all_to_all_loco_quant_reduce", NULL, NULL, C(BUCKETS), 0, 0, W_BOTH},
	{"allreduce_bucket", NULL, NULL, C(BUCKETS), 0, 0, W_PY},
	{"allreduce_and_copy", NULL, NULL, C(BUCKETS), 0, 0, W_PY},
	{"allreduce_and_copy_with_multiple_ranks", NULL, NULL, C(BUCKETS), 0, 0, W_PY},
	{"allreduce_and_scatter", NULL, NULL, C(BUCKETS), 0, 0, W_PY},
	{"allreduce_no_retain", NULL, NULL, C(BUCKETS), 0, 0, W_PY},
	{"buffered_reduce_fallback", NULL, NULL, C(BUCKETS), 0, 0, W_PY},
	{"gradient_reduction_w_predivide", NULL, NULL, C(BUCKETS), 0, 0, W_PY},
	{"__avg_scatter_grads", NULL, NULL, C(BUCKETS), 0, 0, W_BOTH},
	{"__avg_scatter_contiguous_grads", NULL, NULL, C(BUCKETS), 0, 0, W_BOTH},
	{"__reduce_and_partition_ipg_grads", NULL, NULL, C(BUCKETS), 0, 0, W_BOTH},
	{"MiCS_Optimizer.allreduce_mics_shard_grads", NULL, NULL, C(BUCKETS), 0, 0, W_BOTH},

	/* -- master weights [5.3 #2], [5.4 #2], [5.5] -- */
	{"DeepSpeedZeroOptimizer.__init__", NULL, NULL, C(MASTER), 0, AF_DIRECT | AF_TRANSIENT, W_PY},
	{"_create_fp32_partitions", NULL, NULL, C(MASTER), 0, AF_TRANSIENT, W_PY},
	{"FP16_Optimizer.__init__", NULL, NULL, C(MASTER), 0, AF_DIRECT | AF_TRANSIENT, W_PY},
	{"BF16_Optimizer._setup_for_real_optimizer", NULL, NULL, C(MASTER), 0, AF_TRANSIENT, W_PY},

	/* -- gradients [5.3 #3, #7, #8, #9], [5.4 #3, #5, #12, #13] -- */
	{"copy_grads_in_partition", NULL, NULL, C(GRADIENTS), 0, 0, W_PY},
	{"get_all_grad_tensors", NULL, NULL, C(GRADIENTS), 0, 0, W_PY},
	{"get_flat_partition", NULL, NULL, C(GRADIENTS), 0, 0, W_PY},
	{"_fill_param_grad_accum_attribute", NULL, NULL, C(GRADIENTS), 0, 0, W_PY},
	{"fill_grad_accum_attribute", NULL, NULL, C(GRADIENTS), 0, 0, W_PY}, /* 0.14.5 */
	{"initialize_optimizer_states", NULL, NULL, C(GRADIENTS), 0, 0, W_PY},
	{"DeepSpeedZeroOptimizer.step", NULL, NULL, C(GRADIENTS), P(STEP), AF_DIRECT, W_PY},
	{"flatten_dense_tensors_aligned", NULL, "DeepSpeedZeroOptimizer.step", C(GRADIENTS), P(STEP), 0, W_PY},
	{"_prepare_fp32_grad_for_sub_group", NULL, NULL, C(GRADIENTS), 0, 0, W_BOTH},
	{"partition_grads", NULL, NULL, C(GRADIENTS), 0, 0, W_BOTH},
	/* ZeRO-3: first allocation the reduce bucket (size rule), the rest the flat gradient partitions */
	{"DeepSpeedZeroOptimizer_Stage3._setup_for_real_optimizer", NULL, NULL, C(GRADIENTS), 0, 0, W_PY},

	/* -- optimizer states [5.3 #10], [5.4 #14], [5.5]; temporaries when freed within the step -- */
	{"FusedAdam.step", NULL, NULL, C(OPTSTATES), P(STEP), AF_TRANSIENT, W_PY},
	{"DeepSpeedCPUAdam.step", NULL, NULL, C(OPTSTATES), P(STEP), AF_TRANSIENT, W_PY},
	{"DeepSpeedCPUAdam.step_subgroup", NULL, NULL, C(OPTSTATES), P(STEP), AF_TRANSIENT, W_PY},
	{NULL, "deepspeed/ops/adam/", NULL, C(OPTSTATES), P(STEP), AF_TRANSIENT, W_PY},
	{NULL, "deepspeed/ops/lamb/", NULL, C(OPTSTATES), P(STEP), AF_TRANSIENT, W_PY},
	{NULL, "deepspeed/ops/lion/", NULL, C(OPTSTATES), P(STEP), AF_TRANSIENT, W_PY},
	{NULL, "deepspeed/ops/adagrad/", NULL, C(OPTSTATES), P(STEP), AF_TRANSIENT, W_PY},
	{NULL, "torch/optim/", NULL, C(OPTSTATES), P(STEP), AF_TRANSIENT, W_PY}, /* _init_group, _multi_tensor_adam... */
	{"DeepSpeedZeroOptimizer._optimizer_step", NULL, NULL, C(OPTSTATES), P(STEP), AF_TRANSIENT, W_PY},
	{"DeepSpeedZeroOptimizer_Stage3._optimizer_step", NULL, NULL, C(OPTSTATES), P(STEP), AF_TRANSIENT, W_PY},

	/* -- temporaries of the optimizer step and of norms [5.3 #11, #14], [5.4 #15] -- */
	{"_constant_buffered_norm2", NULL, NULL, C(TEMPORARIES), 0, 0, W_PY},
	{"set_norm_for_param_grad_in_gpu", NULL, NULL, C(TEMPORARIES), 0, 0, W_PY},
	{"get_grad_norm_direct", NULL, NULL, C(TEMPORARIES), 0, 0, W_BOTH},
	{"_get_norm_groups", NULL, NULL, C(TEMPORARIES), 0, 0, W_BOTH},
	{"scaled_global_norm", NULL, NULL, C(TEMPORARIES), 0, 0, W_PY},
	{"has_overflow", NULL, NULL, C(TEMPORARIES), 0, 0, W_BOTH},
	{"_has_inf_or_nan", NULL, NULL, C(TEMPORARIES), 0, 0, W_PY},
	{"has_overflow_serial", NULL, NULL, C(TEMPORARIES), 0, 0, W_PY},
	{"_overflow_check_and_loss_scale_update", NULL, NULL, C(TEMPORARIES), 0, 0, W_BOTH},
	{"unscale_and_clip_grads", NULL, NULL, C(TEMPORARIES), 0, 0, W_BOTH},
	{"complete_grad_norm_calculation_for_cpu_offload", NULL, NULL, C(TEMPORARIES), 0, 0, W_PY},
	{"async_inplace_copy_grad_to_fp32_buffer_from_gpu", NULL, NULL, C(TEMPORARIES), 0, 0, W_PY},
	{"async_accumulate_grad_in_cpu_via_gpu", NULL, NULL, C(TEMPORARIES), 0, 0, W_PY},

	/* -- communication libraries called from Python -- */
	{NULL, "torch/distributed/", NULL, C(COMM), 0, 0, W_PY},
	{NULL, "deepspeed/comm/", NULL, C(COMM), 0, 0, W_PY},
};
#undef C
#undef P

#define NRULES (sizeof(name_rules) / sizeof(name_rules[0]))

/* s ends with suf, at a '.' boundary or as a whole */
static int qual_suffix(const char *s, const char *suf)
{
	size_t n = strlen(s), m = strlen(suf);
	if (m > n || strcmp(s + n - m, suf))
		return 0;
	return m == n || s[n - m - 1] == '.';
}

static int rule_matches(const struct name_rule *r, const struct attrib_frame *f, size_t i, size_t n, int nvtx)
{
	if (nvtx) {
		if (!(r->where & W_NVTX) || r->file || r->under || !r->name)
			return 0;
		return qual_suffix(f[i].qualname, r->name);
	}
	if (!(r->where & W_PY))
		return 0;
	if (r->file && (!f[i].file || !strstr(f[i].file, r->file)))
		return 0;
	if (r->name && !qual_suffix(f[i].qualname, r->name))
		return 0;
	if (r->under) {
		size_t j = i + 1;
		while (j < n && !(f[j].qualname && qual_suffix(f[j].qualname, r->under)))
			j++;
		if (j == n)
			return 0;
	}
	return 1;
}

static const struct name_rule *first_rule(const struct attrib_frame *f, size_t i, size_t n, int nvtx, size_t *idx)
{
	for (size_t k = 0; k < NRULES; k++)
		if (rule_matches(&name_rules[k], f, i, n, nvtx)) {
			*idx = k;
			return &name_rules[k];
		}
	return NULL;
}

/* Innermost frame with a category decides it; innermost frame with a phase
 * decides that (wrappers may carry a phase); AF_DIRECT categories count only
 * for the innermost non-wrapper frame; flags of every frame up to the one
 * that decided the category add up (a recompute frame further out still
 * marks the allocation). */
void attrib_pystack(const struct attrib_frame *f, size_t n, struct attrib_ev *out)
{
	*out = (struct attrib_ev){DSMT_CAT_NONE, DSMT_PH_NONE, 0, 0};
	size_t meaningful = 0;
	for (size_t i = 0; i < n; i++) {
		if (!f[i].qualname)
			continue;
		size_t k;
		const struct name_rule *r = first_rule(f, i, n, 0, &k);
		int skip = r && (r->flags & AF_SKIP);
		if (r && r->phase && !out->phase)
			out->phase = r->phase;
		if (!skip) {
			if (r && (r->flags & AF_RECOMPUTE))
				out->flags |= AF_RECOMPUTE;
			if (r && r->cat != DSMT_CAT_NONE && out->cat == DSMT_CAT_NONE &&
			    (!(r->flags & AF_DIRECT) || meaningful == 0)) {
				out->cat = r->cat;
				out->flags |= r->flags & (AF_TRANSIENT | AF_WS1_GATHER);
				out->rule = (uint8_t)(k + 1);
			}
			meaningful++;
		}
	}
}

void attrib_nvtx_name(const char *name, struct attrib_ev *out)
{
	*out = (struct attrib_ev){DSMT_CAT_NONE, DSMT_PH_NONE, 0, 0};
	struct attrib_frame f = {NULL, name};
	size_t k;
	const struct name_rule *r = name ? first_rule(&f, 0, 1, 1, &k) : NULL;
	if (!r)
		return;
	out->cat = r->cat;
	out->phase = r->phase;
	out->flags = r->flags & (AF_TRANSIENT | AF_WS1_GATHER);
	out->rule = r->cat != DSMT_CAT_NONE ? (uint8_t)(k + 1) : 0;
}

/* An unknown range inside a classified one (e.g. DeepSpeed's wrapped `cat`
 * inside AllGatherCoalescedHandle.wait) keeps the outer evidence. */
uint32_t attrib_nvtx_push(uint32_t outer, const struct attrib_ev *in)
{
	struct attrib_ev o = attrib_unpack(outer);
	if (in->cat != DSMT_CAT_NONE) {
		o.cat = in->cat;
		o.flags = in->flags;
		o.rule = in->rule;
	}
	if (in->phase)
		o.phase = in->phase;
	return attrib_pack(&o);
}

/* torch names its autograd device threads pt_autograd_<device> (older
 * versions leave them unnamed) */
int attrib_thread_is_autograd(const char *name)
{
	return name && !strncmp(name, "pt_autograd_", 12);
}

/* The library a native frame or call site lies in (driver level: the
 * existing nccl / workspace categories) */
int attrib_module_class(const char *path)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	if (!strncmp(b, "libc10_cuda", 11))
		return LIB_TORCH;
	if (strstr(path, "libnccl"))
		return LIB_NCCL;
	static const char *const ws[] = {"libcublas", "libcudnn", "libcusparse", "libcufft", "libcusolver"};
	for (size_t i = 0; i < sizeof(ws) / sizeof(ws[0]); i++)
		if (!strncmp(b, ws[i], strlen(ws[i])))
			return LIB_WORKSPACE;
	return LIB_OTHER;
}

/* ---- 2. phases ------------------------------------------------------ */

/* attrib_phase: attrib.h (inline) */

/* ---- 3. the decision ------------------------------------------------ */

unsigned attrib_category(const struct attrib_in *in, unsigned *rule)
{
	unsigned r, cat;
	int same_phase = in->ph_free != DSMT_PH_NONE && in->ph_free == in->ph_alloc && !in->crossed;
	if (in->native == LIB_WORKSPACE || in->native == LIB_NCCL) { /* the library that asked */
		r = ATTRIB_R_NATIVE;
		cat = in->native == LIB_WORKSPACE ? DSMT_CAT_WORKSPACE : DSMT_CAT_COMM;
	} else if (in->libws && (in->crossed || in->ph_free == DSMT_PH_NONE) && !in->param_size) {
		/* a library's handle workspace that torch allocated for it: in the op in which
		 * cuBLAS created a handle on this thread (its own driver allocation), kept past
		 * its phase (torch keeps one per handle and stream for the process's life) */
		r = ATTRIB_R_HANDLE_WS;
		cat = DSMT_CAT_WORKSPACE;
	} else if (in->bucket && (in->py.cat == DSMT_CAT_NONE || in->py.cat == DSMT_CAT_GRADIENTS ||
				  in->py.cat == DSMT_CAT_BUCKETS)) {
		/* exactly reduce_bucket_size elements; beats a frame naming a gradient
		 * buffer (ZeRO-3's _setup_for_real_optimizer allocates both) */
		r = ATTRIB_R_BUCKET;
		cat = DSMT_CAT_BUCKETS;
	} else if (in->py.cat != DSMT_CAT_NONE) {
		r = ATTRIB_R_PY;
		cat = in->py.cat;
		if ((in->py.flags & AF_WS1_GATHER) && in->world1)
			cat = DSMT_CAT_GATHERED;
		if ((in->py.flags & AF_TRANSIENT) && same_phase) {
			r = ATTRIB_R_PY_TRANSIENT;
			cat = DSMT_CAT_TEMPORARIES;
		}
	} else if ((in->py.flags & AF_RECOMPUTE) && in->ph_alloc == DSMT_PH_BACKWARD) {
		r = ATTRIB_R_RECOMPUTE;
		cat = DSMT_CAT_ACTIVATIONS;
	} else if (in->nv.cat != DSMT_CAT_NONE) {
		r = ATTRIB_R_NVTX;
		cat = in->nv.cat;
		if ((in->nv.flags & AF_WS1_GATHER) && in->world1)
			cat = DSMT_CAT_GATHERED;
		if ((in->nv.flags & AF_TRANSIENT) && same_phase) {
			r = ATTRIB_R_NVTX_TRANSIENT;
			cat = DSMT_CAT_TEMPORARIES;
		}
	} else if (in->ph_alloc == DSMT_PH_BACKWARD && in->param_size) {
		r = ATTRIB_R_GRAD_SIZE;
		cat = DSMT_CAT_GRADIENTS;
	} else if (in->ph_alloc == DSMT_PH_FORWARD && in->ph_free == DSMT_PH_BACKWARD) {
		r = ATTRIB_R_FWD_BWD;
		cat = DSMT_CAT_ACTIVATIONS;
	} else if (in->ph_alloc == DSMT_PH_FORWARD && in->ph_free == DSMT_PH_NONE && !in->crossed && !in->bw_since) {
		r = ATTRIB_R_INFLIGHT; /* live at a snapshot inside its step, backward still to come */
		cat = DSMT_CAT_ACTIVATIONS;
	} else if (same_phase) {
		r = ATTRIB_R_SAME_PHASE;
		cat = DSMT_CAT_TEMPORARIES;
	} else if (in->ph_alloc == DSMT_PH_FORWARD && in->steps == 1 && in->ph_free != DSMT_PH_NONE) {
		/* held over: the step's output (the loss) kept by the loop until the next step
		 * replaces it; freed there, so neither a leak nor a cache */
		r = ATTRIB_R_HELD_OVER;
		cat = DSMT_CAT_TEMPORARIES;
	} else if (in->crossed || in->ph_free == DSMT_PH_NONE) {
		/* alive across a step boundary (or still live at a snapshot after its phase) */
		r = ATTRIB_R_PERSIST;
		switch (in->ph_alloc) {
		case DSMT_PH_INIT: cat = DSMT_CAT_PARAMETERS; break;
		case DSMT_PH_STEP: cat = DSMT_CAT_OPTSTATES; break;
		case DSMT_PH_BACKWARD: cat = DSMT_CAT_GRADIENTS; break;
		default: cat = DSMT_CAT_OTHER; break;
		}
	} else if (in->ph_alloc == DSMT_PH_BACKWARD) {
		r = ATTRIB_R_LATER; /* allocated in backward, freed by the optimizer step */
		cat = DSMT_CAT_GRADIENTS;
	} else if (in->ph_alloc == DSMT_PH_FORWARD || in->ph_alloc == DSMT_PH_EVAL) {
		r = ATTRIB_R_LATER; /* kept past its phase within the step (the loss...) */
		cat = DSMT_CAT_TEMPORARIES;
	} else {
		r = ATTRIB_R_OTHER;
		cat = DSMT_CAT_OTHER;
	}
	if (rule)
		*rule = r;
	return cat;
}

/* ---- reduce buckets -------------------------------------------------- */

static int parse_count(const char *s, uint64_t *out)
{
	while (*s == ' ' || *s == '"' || *s == '\'')
		s++;
	char *e;
	double v = strtod(s, &e);
	if (e == s || v < 1 || v > 1e15)
		return 0;
	*out = (uint64_t)(v + 0.5);
	return 1;
}

uint64_t attrib_bucket_elems(const char *cmdline, size_t len, int deepspeed)
{
	static const char *const flags[] = {"--reduce_bucket_size", "--reduce-bucket-size"};
	uint64_t n = 0;
	int want = 0;
	for (const char *a = cmdline, *end = cmdline ? cmdline + len : NULL; a && a < end; a += strlen(a) + 1) {
		uint64_t v;
		if (want && parse_count(a, &v))
			n = v;
		want = 0;
		for (size_t k = 0; k < 2; k++) {
			size_t fl = strlen(flags[k]);
			if (!strcmp(a, flags[k]))
				want = 1;
			else if (!strncmp(a, flags[k], fl) && a[fl] == '=' && parse_count(a + fl + 1, &v))
				n = v;
		}
		const char *j = strstr(a, "\"reduce_bucket_size\"");
		if (j) { /* an inline JSON config */
			j = strchr(j + 20, ':');
			if (j && parse_count(j + 1, &v))
				n = v;
		}
	}
	return n ? n : deepspeed ? ATTRIB_DS_BUCKET_DEFAULT : 0;
}

/* attrib_is_bucket: attrib.h (inline) */
