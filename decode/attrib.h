/* Attribution rules: which category and phase every allocated byte gets.
 * All of them live in attrib.c (documented one by one, with their evidence,
 * in docs/attribution.md); decode.c only gathers the evidence (Python
 * frames, NVTX ranges, threads, lifetimes, sizes) and asks.  Nothing here
 * depends on the decoder's state. */
#ifndef DSMT_DEC_ATTRIB_H
#define DSMT_DEC_ATTRIB_H

#include <stddef.h>
#include <stdint.h>

/* Categories: exactly one per byte.  The first DSMT_NCAT_ALLOC are those of
 * allocated (tensor) bytes; `cached` (reserved but free) is the last. */
enum dsmt_cat {
	DSMT_CAT_PARAMETERS,
	DSMT_CAT_GATHERED,   /* gathered_parameters: ZeRO-3 all-gathered full parameters */
	DSMT_CAT_MASTER,     /* master_weights */
	DSMT_CAT_OPTSTATES,  /* optimizer_states */
	DSMT_CAT_GRADIENTS,
	DSMT_CAT_ACTIVATIONS,
	DSMT_CAT_TEMPORARIES,
	DSMT_CAT_BUCKETS,    /* reduce/IPG buckets, all-gather and reduce-scatter staging */
	DSMT_CAT_COMM,       /* communication */
	DSMT_CAT_WORKSPACE,
	DSMT_CAT_OTHER,
	DSMT_CAT_CACHED,
	DSMT_NCAT,
	DSMT_NCAT_ALLOC = DSMT_CAT_CACHED,
	DSMT_CAT_NONE = 15, /* no evidence (never reported) */
};

enum dsmt_phase {
	DSMT_PH_NONE, /* unknown / not given */
	DSMT_PH_INIT,
	DSMT_PH_FORWARD,
	DSMT_PH_BACKWARD,
	DSMT_PH_STEP, /* the optimizer step */
	DSMT_PH_EVAL,
	DSMT_NPHASE,
};

const char *dsmt_cat_name(unsigned cat);     /* "parameters", ... "cached"; NULL past the end */
const char *dsmt_phase_name(unsigned phase); /* "init", ...; NULL for NONE or past the end */

/* What a name (a Python frame, or an NVTX range name) says. */
enum {
	AF_SKIP = 1,      /* a wrapper frame: not the allocating function */
	AF_DIRECT = 2,    /* the category holds only for the innermost meaningful frame */
	AF_TRANSIENT = 4, /* freed within the phase it was allocated in: temporaries */
	AF_RECOMPUTE = 8, /* activation checkpointing: allocations in backward recompute activations */
	AF_WS1_GATHER = 16, /* at world size 1 this gather allocates the full parameter (gathered) */
};

struct attrib_ev {
	uint8_t cat;   /* DSMT_CAT_* or DSMT_CAT_NONE */
	uint8_t phase; /* DSMT_PH_* (NONE: no evidence) */
	uint8_t flags; /* AF_* that apply to the allocation */
	uint8_t rule;  /* index + 1 of the name rule that gave cat (0: none), for --verbose/docs */
};

/* One Python frame, innermost first. */
struct attrib_frame {
	const char *file, *qualname; /* NULL when the code object is unknown */
};

/* Evidence of a Python stack (frames innermost first).  unknown: set when a
 * frame's code object is unknown (its definition may come later). */
void attrib_pystack(const struct attrib_frame *f, size_t n, struct attrib_ev *out);

/* Evidence of one NVTX range name (DeepSpeed pushes function qualnames). */
void attrib_nvtx_name(const char *name, struct attrib_ev *out);

/* Evidence of a range pushed inside another: the inner range's evidence
 * where it has some, else the outer's (packed as attrib_pack). */
uint32_t attrib_nvtx_push(uint32_t outer, const struct attrib_ev *inner);

static inline uint32_t attrib_pack(const struct attrib_ev *e)
{
	return (uint32_t)e->cat | (uint32_t)e->phase << 4 | (uint32_t)e->flags << 8 | (uint32_t)e->rule << 16;
}
static inline struct attrib_ev attrib_unpack(uint32_t k)
{
	struct attrib_ev e = {(uint8_t)(k & 15), (uint8_t)((k >> 4) & 15), (uint8_t)((k >> 8) & 0xff),
			      (uint8_t)(k >> 16)};
	return e;
}
#define ATTRIB_NONE ((uint32_t)DSMT_CAT_NONE) /* packed "no evidence" */

/* Is a thread with this name one of torch's autograd engine threads? */
int attrib_thread_is_autograd(const char *name);

/* Library class of a module path (native evidence, driver-level categories) */
enum { LIB_OTHER, LIB_TORCH /* libc10_cuda: the caching allocator */, LIB_NCCL, LIB_WORKSPACE };
int attrib_module_class(const char *path);

/* The phase of an event, from its evidence, strongest first:
 * global: the process-wide phase machine (INIT before the first step
 * boundary, else FORWARD / BACKWARD / STEP from DeepSpeed's ranges and the
 * markers; EVAL resolved by the caller); py: the Python frames' phase;
 * autograd: the event's thread is an autograd engine thread; nv: its own
 * innermost NVTX range's phase; bw_seen: an autograd thread has been active
 * since the step began (the thread that called backward is then past it).
 * (Inline: it runs for nearly every categorised block.) */
static inline unsigned attrib_phase(unsigned global, unsigned py, int autograd, unsigned nv, int bw_seen)
{
	if (global == DSMT_PH_INIT)
		return DSMT_PH_INIT; /* before the first step boundary */
	if (py)
		return py; /* torch/optim frames: step; Tensor.backward: backward */
	if (autograd)
		return DSMT_PH_BACKWARD;
	if (nv)
		return nv; /* e.g. inside DeepSpeedZeroOptimizer_Stage3.step */
	if (global == DSMT_PH_FORWARD && bw_seen)
		return DSMT_PH_STEP; /* the thread that called backward, after it */
	return global ? global : DSMT_PH_INIT;
}

/* Everything known about one allocation when it is categorised. */
struct attrib_in {
	uint64_t size;
	uint8_t ph_alloc;   /* phase at the allocation */
	uint8_t ph_free;    /* phase at the free; DSMT_PH_NONE: still live (snapshot) */
	uint8_t crossed;    /* a step boundary lay between allocation and free (or snapshot) */
	uint8_t steps;      /* steps begun since the allocation (the phase machine entering forward): 0, 1, 2 = more */
	uint8_t bw_since;   /* a backward ran since the allocation (its step's, or a later one) */
	uint8_t has_py;     /* the allocation carries Python frames */
	struct attrib_ev py; /* Python frames' evidence */
	struct attrib_ev nv; /* innermost classified NVTX range of the allocating thread */
	uint8_t native;     /* LIB_* of the native stack / site (LIB_OTHER: nothing) */
	uint8_t bucket;     /* size is exactly a reduce bucket (reduce_bucket_size x 2 or 4) */
	uint8_t param_size; /* a live parameters allocation has exactly this size */
	uint8_t world1;     /* world size 1 */
	uint8_t libws;      /* allocated on a thread, in the op (same Python stack, no free between) in which a
			     * workspace library (cuBLAS...) allocated device memory itself: creating a handle,
			     * which torch then gives a workspace from its caching allocator */
};

/* The category; *rule (if not NULL) says which rule decided (ATTRIB_R_*).
 * in->param_size is consulted only when in->ph_alloc is BACKWARD, so the
 * caller may leave it 0 otherwise.  The result depends on nothing but *in
 * (attrib_key packs it, for callers that remember results). */
unsigned attrib_category(const struct attrib_in *in, unsigned *rule);

static inline uint64_t attrib_key(const struct attrib_in *in)
{
	/* the evidence without its rule index (16 bits each: cat, phase, flags) */
	return (uint64_t)(attrib_pack(&in->py) & 0xffff) | (uint64_t)(attrib_pack(&in->nv) & 0xffff) << 16 |
	       (uint64_t)(in->ph_alloc & 7) << 32 | (uint64_t)(in->ph_free & 7) << 35 |
	       (uint64_t)(in->crossed != 0) << 38 | (uint64_t)(in->steps > 2 ? 2 : in->steps) << 49 | (uint64_t)(in->has_py != 0) << 40 |
	       (uint64_t)(in->native & 3) << 41 | (uint64_t)(in->bucket != 0) << 43 | (uint64_t)(in->param_size != 0) << 44 |
	       (uint64_t)(in->world1 != 0) << 45 | (uint64_t)1 << 46 | (uint64_t)(in->bw_since != 0) << 47 |
	       (uint64_t)(in->libws != 0) << 48;
}

enum { /* attrib_category rules, in order (docs/attribution.md) */
	ATTRIB_R_NATIVE = 1, ATTRIB_R_BUCKET, ATTRIB_R_PY, ATTRIB_R_PY_TRANSIENT, ATTRIB_R_RECOMPUTE,
	ATTRIB_R_NVTX, ATTRIB_R_NVTX_TRANSIENT, ATTRIB_R_GRAD_SIZE, ATTRIB_R_FWD_BWD, ATTRIB_R_INFLIGHT,
	ATTRIB_R_SAME_PHASE, ATTRIB_R_PERSIST, ATTRIB_R_LATER, ATTRIB_R_OTHER, ATTRIB_R_HANDLE_WS, ATTRIB_R_HELD_OVER,
};

/* reduce_bucket_size (elements) from the recorded command line (META
 * cmdline: NUL-separated arguments): --reduce_bucket_size N,
 * --reduce-bucket-size N (or =N), or "reduce_bucket_size": N inside an
 * argument (an inline JSON config); N may be written 5e8.  0 when absent.
 * deepspeed: the process runs DeepSpeed (then absent means its default). */
uint64_t attrib_bucket_elems(const char *cmdline, size_t len, int deepspeed);
#define ATTRIB_DS_BUCKET_DEFAULT 500000000ULL /* runtime/zero/config.py: reduce_bucket_size 5e8 */

/* Does an allocation of `size` bytes hold exactly `elems` elements of 2 or
 * 4 bytes (the caching allocator rounds blocks up to 512 bytes, and a large
 * block may keep up to 1 MiB it did not split off)? */
static inline int attrib_is_bucket(uint64_t size, uint64_t elems)
{
	if (!elems)
		return 0;
	for (uint64_t es = 2; es <= 4; es += 2) {
		uint64_t b = elems * es, r = (b + 511) & ~(uint64_t)511;
		if (size == r || (r > ((uint64_t)1 << 20) && size > r && size - r < ((uint64_t)1 << 20)))
			return 1;
	}
	return 0;
}

#endif
