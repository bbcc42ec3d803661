/* One pass over a trace file (a second one only when a MODULE or STRING
 * record came after an event whose replay depended on it): collects META,
 * STRING and MODULE records, decodes events (field order and delta state:
 * the "event records" section below, the only place that knows them), puts
 * them back in seq order (events already in order skip the reorder window)
 * and replays them into per-device live maps, cutting the run into segments
 * at every record that may be a step boundary.  Steps are then assembled
 * from the segments once all markers are known.  --dump walks the file once
 * more, printing every record. */
#include "decode.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <regex.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "attrib.h"
#include "format.h"
#include "hashmap.h"
#include "reader.h"
#include "reorder.h"
#include "symbol.h"
#include "varint.h"

#define STR_MAX ((size_t)1 << 20)      /* longest string kept */
#define ARENA_MAX ((size_t)256 << 20)  /* all strings together */
#define META_MAX 4096
#define MODULES_MAX ((size_t)1 << 20)
#define THREADS_MAX ((size_t)1 << 20)
#define NVTX_DEPTH_MAX 256
#define STACK_DUMP_MAX 256
#define DEV1_MAX 254 /* dev1 255 = out of range */

enum { PASS_DEFS, PASS_REPLAY, PASS_DUMP };

struct str_ent {
	size_t off;
	uint32_t len;
};

/* What the module holding a call site is (driver-level categories; the
 * rule is attrib_module_class) */
enum { CLS_OTHER = LIB_OTHER, CLS_TORCH = LIB_TORCH /* libc10_cuda */, CLS_NCCL = LIB_NCCL /* libnccl */,
       CLS_WORKSPACE = LIB_WORKSPACE /* libcublas(Lt), libcudnn, libcusparse, libcufft, libcusolver */ };

struct module {
	uint64_t base, lo, hi;
	char *path;
	int is_torch;
	int cls; /* CLS_* */
	uint8_t *bid; /* build-id (raw bytes) */
	size_t bn;
};

/* Python definitions (format 1.2) */
struct pycode {
	char *file, *qual;
	uint8_t *lt; /* co_linetable */
	size_t ltn;
	int64_t firstline;
	uint64_t pyver;
};

struct idxrange { /* frames of a PYSTACK (code, instr pairs) or ips of a STACK */
	size_t off;
	uint32_t n;
};

struct nvtx_ent {
	uint64_t name, seq, ts;
	uint32_t prev_nvk; /* the thread's NVTX evidence before this push */
	uint32_t prev_top; /* the thread's NVTX node before this push */
};

/* NVTX ranges open on a thread, as a tree of pushes (node 0: none) */
struct nvnode {
	uint64_t name;
	uint32_t parent;
};

struct domstack {
	uint64_t domain;
	struct nvtx_ent *v;
	uint32_t n, cap;
	uint64_t overflow; /* pushes beyond NVTX_DEPTH_MAX not kept */
};

struct thread {
	uint64_t tid;
	uint64_t gen; /* frame generation of the delta state */
	uint64_t seq, ts, ptr, site, tot_alloc, tot_res;
	char *name;
	struct domstack *ds;
	uint32_t nds;
	uint32_t idx; /* in ctx.thr */
	int autograd;   /* a torch autograd engine thread (by name) */
	uint32_t nvk;   /* attribution: packed NVTX evidence of its innermost classified range */
	uint32_t nvtop; /* its innermost open range (ctx.nvn; 0: none) */
	uint32_t ws_py; /* attribution: 1 + the Python stack of a workspace library's driver allocation on
			 * this thread (cuBLAS creating a handle), until the op ends (0: none) */
};

/* Driver level: the category of each device byte (exactly one each).
 * CAT_TORCH: the bytes counted into reserved (torch segments from cudaMalloc,
 * torch's driver allocations and expandable-segment handles). */
enum { CAT_OTHER, CAT_TORCH, CAT_NCCL, CAT_WORKSPACE, CAT_STATICS, CAT_MANAGED, NCAT };

/* A device's numbers at the first moment its driver level reached its run
 * maximum (the breakdown). */
struct snap {
	uint64_t seq, ts, dlev, alloc, res, imported;
	uint64_t cat[NCAT];
	int taken;
};

/* Attribution: one record per live tensor block (ctx.arec, index in the
 * live map's aux).  What is known at its allocation; the category is
 * decided from it at its free or at a snapshot (attrib.h). */
struct arec {
	uint64_t seq, site, size;
	uint32_t seg;     /* ctx.segs.n at the allocation: a step boundary since? */
	uint32_t tidx, pystack, stack;
	uint32_t nvk;     /* the thread's NVTX evidence (packed) */
	uint32_t fwd;     /* 1 + the DeepSpeed forward it fell in (0: none): eval or not */
	uint32_t epoch;   /* the pause epoch of the allocation (after pauses) */
	uint32_t cat_seg; /* the segment in which `cat` was decided */
	uint32_t bw_gen;  /* ctx.bw_gen at the allocation */
	uint32_t fwd_gen; /* ctx.fwd_gen at the allocation */
	uint32_t group;   /* interned (site, pystack, stack, cat) for `cat` (UINT32_MAX: none yet) */
	uint8_t gph;      /* the process-wide phase then */
	uint8_t flags;    /* AR_* */
	uint8_t dev1;
	uint8_t cat, ph;  /* decided category while live (AR_CAT), resolved phase (0: not yet) */
	uint8_t oom;      /* 1 + the first reported OOM of its device it was live at (0: none); it
			   * was live at every later one of that device until its free (oom_freed) */
};
enum {
	AR_BW_SEEN = 1,
	AR_CAT = 2,
	AR_PARAM = 4, /* counted in ctx.psizes */
	AR_LIVE = 8,
	AR_LIBWS = 16, /* allocated in the op in which a workspace library allocated on this thread */
};

/* pending sums of a peak: blocks live at the peak and freed since */
struct pend {
	uint64_t gen;
	uint64_t cat[DSMT_NCAT], tmp[DSMT_NPHASE];
};

struct tpend { /* --top: one freed block live at the peak */
	uint32_t g;
	uint64_t bytes;
};

struct dev {
	struct dsmt_hmap tens; /* ptr -> size, aux = the epoch of the ALLOC (below), or with
				* attribution the index of its struct arec (which holds the epoch) */
	uint64_t alloc, res;   /* current tensor-allocated / torch-reserved bytes */
	uint64_t pk_alloc, pk_res, allocs, frees; /* of the open segment */
	uint64_t synced;       /* the last epoch whose first torch event resynced it */
	int used;
	/* driver level: bytes the driver handed the process (dlev), by category,
	 * and bytes imported from other processes */
	uint64_t dlev, pk_dlev, run_pk, imported;
	uint64_t cat[NCAT];
	struct snap snap;
	uint64_t snap_ptr; /* the allocation that took the snapshot */
	int snap_live;     /* nothing changed on the device since */
	/* attribution: the open segment's peak (its first moment) and what was
	 * live then and freed since */
	uint64_t pk_seq, pk_ts, pk_res_at, pk_gen;
	uint32_t pk_tidx, pk_node;
	int pk_has;        /* the allocation that made the peak: record pk_idx while it lives, then
			    * pk_rec (a copy taken when it is freed) (else the segment's start) */
	uint32_t pk_idx;
	int pk_copied;
	struct arec pk_rec;
	struct pend pend;
	uint64_t snap_gen; /* the driver-level snapshot: blocks live then, freed since */
	uint64_t tl_last[4]; /* timeline: alloc, res, dlev, imported as last put in it */
	struct pend snap_pend;
	struct tpend *tp;  /* --top: pending groups of the peak (pend.gen) */
	size_t tpn, tpcap;
	uint64_t tp_gen;
	struct dsmt_block *pbp; /* --peak-blocks: blocks of the peak freed since (pbp_gen) */
	size_t pbpn, pbpcap;
	uint64_t pbp_gen;
};

struct segstat {
	uint64_t pk_alloc, end_alloc, pk_res, end_res, allocs, frees;
	uint64_t pk_dev, end_dev;
	size_t pk_si, end_si; /* build_rows: the segments holding the peak and the end */
	int seen;
};

/* attribution of one segment on one device (parallel to ctx.stats) */
struct segattr {
	uint64_t pk_cat[DSMT_NCAT], end_cat[DSMT_NCAT];
	uint64_t pk_tmp[DSMT_NPHASE], end_tmp[DSMT_NPHASE];
	uint64_t pk_ts;
	uint32_t pk_node;
	uint8_t pk_phase;
	uint32_t top_off, ntop;
	size_t pb_off, npb; /* --peak-blocks: into ctx.pbv */
};

struct gkey {
	uint64_t site, pystack, stack;
	uint32_t cat;
};

struct topent {
	uint32_t g;
	uint64_t bytes, count;
};

struct gacc {
	uint64_t bytes, count, tag;
};

struct seg {
	uint64_t end_seq, end_ts;
	size_t off;    /* into ctx.stats */
	uint32_t ndev; /* stats for dev1 = 1..ndev */
	uint64_t pk_hp, end_hp; /* pinned host memory (process-wide) */
};

/* A VMM handle (cuMemCreate / cuMemImportFromShareableHandle): its bytes
 * leave when the last reference (creation, retain, mapping) goes. */
struct vhandle {
	uint64_t handle, size;
	uint32_t refs;  /* 0: free slot (next free slot in size) */
	uint8_t dev1, level, cat, res;
};

/* An NVML sample (SAMPLE record), replayed before event next_seq */
struct sample {
	uint64_t next_seq, ts, proc_used, dev_at; /* dev_at: the device level when replayed */
	uint32_t dev1, flags;
};

/* A host-memory sample (HOST record), before event next_seq */
struct hostsm {
	uint64_t next_seq, ts, rss, vsz;
	uint64_t n; /* record order (ties) */
};

/* The process-wide phase as host samples see it, from seq + 1 on */
struct phchg {
	uint64_t seq;
	uint8_t ph;
};

struct timed {
	uint64_t t, ptr, size; /* t: ts units */
	uint32_t dev1, op;
	uint64_t n; /* replay order (ties) */
};

struct srcrec {
	uint64_t seq, ts, via, reason, name;
};

struct range {
	uint64_t s_seq, s_ts, e_seq, e_ts;
};

struct mark {
	uint64_t seq, ts;
};

/* a main-thread DeepSpeedEngine.forward push */
struct fwd {
	uint64_t seq, ts;
	int backward; /* a main-thread DeepSpeedEngine.backward push followed before the next forward */
};

/* tracing paused: from the first PAUSE of a group to the RESUME after it */
struct stretch {
	uint64_t from_seq, to_seq; /* to_seq UINT64_MAX: never resumed */
};

#define VEC(T) struct { T *v; size_t n, cap; }

static int vec_grow(void **v, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t nc = *cap ? *cap * 2 : 16;
	while (nc < need)
		nc *= 2;
	void *nv = realloc(*v, nc * elem);
	if (!nv)
		return -1;
	*v = nv;
	*cap = nc;
	return 0;
}
#define VPUSH(vec) (vec_grow((void **)&(vec).v, &(vec).cap, (vec).n + 1, sizeof(*(vec).v)) ? NULL : &(vec).v[(vec).n++])

struct ctx {
	const char *path;
	FILE *err;
	const struct dsmt_opts *o;
	struct dsmt_reader rd;
	int mode;
	FILE *dump;
	int is_header;
	const uint8_t *fbuf; /* current frame's records */

	/* definitions (pass 1) */
	struct dsmt_hmap strmap; /* id -> index into strs */
	VEC(struct str_ent) strs;
	char *arena;
	size_t arena_len, arena_cap;
	uint64_t strings_dropped;
	VEC(struct module) mods;
	VEC(struct dsmt_meta) meta;
	VEC(struct module) torch; /* libc10_cuda* ranges */
	/* Python frames and native stacks (format 1.2 PYCODE, PYSTACK; STACK) */
	struct dsmt_hmap pycmap, pysmap, stkmap; /* id -> index */
	VEC(struct pycode) pyc;
	VEC(struct idxrange) pys, stk;
	VEC(uint64_t) pyframes; /* code, instr pairs */
	VEC(uint64_t) ips;
	uint64_t py_dropped;    /* definitions beyond the limits */
	int attrib, top;        /* o->attrib, o->top */
	int tl_on;              /* o->timeline (with attribution) */
	int series_on, tsnap_on; /* o->series (--html), o->tsnap (--torch-snapshot): log the replay */
	int pblk;               /* o->peak_blocks */
	uint64_t bucket_elems;  /* reduce_bucket_size (elements; 0: unknown) */
	int world1;             /* META world_size 1 */

	/* threads */
	struct dsmt_hmap thrmap; /* tid -> index */
	VEC(struct thread) thr;
	struct thread *cur;
	uint64_t gen;

	/* step markers */
	regex_t re;
	int have_re;

	/* where the file stops */
	int status; /* DSMT_NEXT_END / _TRUNC / _DAMAGED */
	char stopmsg[320];
	int nomem;
	int collect_defs; /* this pass records META/STRING/MODULE */
	int ignore_totals; /* o->ignore_totals */
	/* torch events' tot_reserved (the replay after a pause needs it) costs
	 * time: it is kept from the frame after the first PAUSE or RESUME on,
	 * and from the start when a replay needs it for an earlier event */
	int res_seen, track_res;

	/* module statics (STATIC, STATIC_FREE) whose record came after their
	 * load/unload time (aux: CUPTI's CLOCK_REALTIME timestamp): found by the
	 * first replay; a second one applies them at that time (sorted by t) */
	VEC(struct timed) timed;
	int timed_late, timed_known;
	uint64_t t0_ns, unit_ns; /* META start_realtime_ns, ts_unit_ns (0: not read yet) */

	/* replay state: everything from `ro` to the end is reset by replay_reset */
	struct dsmt_reorder ro;
	struct dsmt_hmap rematch; /* name id -> 1 match, 2 no match */
	struct dsmt_hmap open_seq, open_ts; /* START range_id -> seq / ts */
	VEC(struct range) ranges;
	VEC(struct mark) marks;
	VEC(struct seg) segs;
	VEC(struct segstat) stats;
	struct dev *dev[256];
	struct dev *fast[256]; /* dev[] for the torch fast path; all NULL once postpause */
	unsigned maxdev1;
	struct dsmt_hmap rt; /* runtime ptr -> size, aux = dev1 | api << 8 | torch << 16 */
	/* decisions taken before the definition they depend on was seen: if one
	 * of them turns out different at the end, the replay runs again */
	struct dsmt_hmap unres_sites, unres_names;
	int unres_overflow;
	uint64_t events, ooms, lost, last_ts;
	/* DeepSpeed steps: main-thread forward pushes */
	VEC(struct fwd) fwds;
	uint64_t main_tid; /* META pid: the main thread's tid */
	int main_tid_set;
	/* pauses.  Every RESUME group starts an epoch (1, 2, ...); from the first
	 * on (postpause) torch events take the out-of-line path: each device
	 * resyncs to the allocator's totals at its first torch event of an
	 * epoch, reserved follows tot_reserved, and blocks live in the map from
	 * an earlier epoch may have been freed while paused. */
	VEC(struct stretch) stretches;
	int paused, postpause;
	uint64_t epoch;
	uint64_t pauses, pause_seq;
	uint64_t resyncs, pause_unk_free, pause_stale, pause_rt_unk_free; /* expected after a pause */
	int need_res; /* a torch event replayed after a pause lacked its tot_reserved */
	uint64_t unk_free, unk_free_seq, unk_free_ptr, dbl_alloc, dbl_alloc_seq;
	uint64_t rt_unk_free, rt_unk_seq, rt_unk_ptr;
	uint64_t nodev, nodev_seq, pop_empty, nvtx_overflow;
	uint64_t tot_checked, tot_bad, tot_bad_seq, tot_bad_replay, tot_bad_alloc;
	/* driver level.  dm: allocations by address (driver, runtime, host
	 * pinned, IPC imports): ptr -> size, aux: see DM_* */
	struct dsmt_hmap dm;
	struct dsmt_hmap hnd;  /* VMM handle -> index into hv */
	VEC(struct vhandle) hv;
	uint64_t hv_free;      /* 1 + first free slot of hv (0: none) */
	struct dsmt_hmap vmap; /* mapped va -> handle, aux: VM_REF */
	struct dsmt_hmap vimp; /* mapped va of an imported handle -> size, aux = dev1 */
	uint64_t hp, pk_hp;    /* pinned host bytes; the open segment's peak */
	int has_drv;           /* a DRV or SOURCE record was replayed */
	uint64_t src_via;      /* the current SOURCE's via (SRC_UNKNOWN before any) */
	VEC(struct srcrec) srcs;
	uint64_t srcs_dropped;
	uint64_t drv_ops[DSMT_DRV_OPS];
	VEC(struct sample) samples;
	VEC(uint32_t) pend;    /* samples not yet replayed, by next_seq (from pend_head) */
	size_t pend_head;
	uint64_t sample_due;   /* next_seq of pend[pend_head] (UINT64_MAX: none) */
	uint64_t samples_dropped;
	VEC(struct hostsm) hosts; /* HOST records */
	VEC(struct dsmt_oom) oomv; /* the first DSMT_OOM_MAX OOM events */
	uint64_t hosts_dropped;
	VEC(struct phchg) phchg;  /* attribution: phase changes (host samples' phase) */
	uint8_t host_ph;          /* the last phase in phchg */
	uint64_t last_rt_free_ptr; /* the last runtime FREE (DSMT_VIA_UNDER_RT check) */
	uint32_t last_rt_free_tidx;
	uint64_t drv_unk_free, drv_unk_free_seq, drv_unk_free_ptr;
	uint64_t drv_unk_unmap, drv_unk_unmap_seq, drv_unk_unmap_ptr;
	uint64_t drv_unk_handle, drv_unk_handle_seq, drv_unk_handle_h;
	uint64_t drv_nodev, drv_nodev_seq, drv_overflow;
	size_t timed_next; /* timed[] applied so far */
	/* attribution (replay state) */
	VEC(struct arec) ar;
	uint64_t ar_free;         /* 1 + first free record (0: none); a free record's seq links on */
	uint8_t ph;               /* the process-wide phase (DSMT_PH_*) */
	int bw_seen;              /* an autograd thread was active since the step began */
	uint32_t fwd_gen;         /* step stretches begun so far (phase machine entering FORWARD) */
	uint32_t bw_gen;          /* backward passes begun so far (a main-thread .backward, or
				   * autograd threads becoming active in a step) */
	uint32_t cur_fwd;         /* 1 + the open DeepSpeed forward (0: none) */
	VEC(struct nvnode) nvn;   /* NVTX range tree (node 0 unused) */
	uint64_t nvn_dropped;
	struct dsmt_hmap pyev;    /* pystack id -> packed evidence (aux) */
	struct dsmt_hmap natcls;  /* stack id -> 1 + LIB_* of its frames */
	struct dsmt_hmap psizes;  /* size -> live parameters blocks of that size */
	struct dsmt_hmap unres_py; /* pystack / stack ids used before their definition */
	VEC(struct segattr) sattr;
	VEC(struct topent) tops;
	VEC(struct dsmt_block) pbv; /* --peak-blocks, by segment and device (segattr.pb_off) */
	VEC(struct gkey) gk;      /* interned groups */
	struct dsmt_hmap gmap;    /* hash -> group (linear probing on the hash) */
	VEC(struct gacc) gacc;    /* per group accumulator (tag) */
	VEC(uint32_t) gtouch;
	uint64_t gtag;
	int ar_overflow;
	/* the timeline (tl_on): entries in replay order, ts in trace units and
	 * names as string ids until build_timeline; tl_ar: per attribution
	 * record, 1 + the index of its block's ADD entry (category pending) */
	VEC(struct dsmt_tl_ev) tl;
	VEC(uint64_t) tl_ar;
	uint64_t tl_hp; /* pinned host bytes as last put in it */
#define NATC 64
	uint32_t natc[NATC][2];     /* native_class: stack -> class (direct-mapped) */
#define CATMEMO 1024
	uint64_t catmemo[CATMEMO][2]; /* attrib_key -> category */
	/* the replay's log (--html, --torch-snapshot; replay_logged) */
	VEC(struct dsmt_tlent) hl;   /* level changes (series) */
	VEC(struct dsmt_tlent) hlch; /* category changes at interval starts (C entries) */
	size_t hl_seg_start;         /* hl.n when the open interval began */
	VEC(uint32_t) hl_ar;         /* attribution record -> 1 + its block's A entry in hl */
	uint64_t hl_alloc[256], hl_res[256], hl_dev[256], hl_hp; /* the levels last logged */
	uint64_t hl_t0, hl_unit;     /* ts -> CLOCK_REALTIME ns */
	VEC(struct dsmt_tev) tev;    /* allocator events (torch snapshot) */
};

static void msg(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void msg(struct ctx *c, const char *fmt, ...)
{
	va_list ap;
	fprintf(c->err, "dsmemdecode: %s: ", c->path);
	va_start(ap, fmt);
	vfprintf(c->err, fmt, ap);
	va_end(ap);
	fputc('\n', c->err);
}

/* ---- definitions ---------------------------------------------------- */

static const char *str_get(struct ctx *c, uint64_t id, size_t *len)
{
	struct dsmt_hent *h = dsmt_hmap_get(&c->strmap, id);
	if (!h) {
		if (len)
			*len = 0;
		return NULL;
	}
	struct str_ent *s = &c->strs.v[h->v];
	if (len)
		*len = s->len;
	return c->arena + s->off;
}

static void str_add(struct ctx *c, uint64_t id, const uint8_t *s, size_t n)
{
	if (n > STR_MAX)
		n = STR_MAX;
	if (c->arena_len + n + 1 > ARENA_MAX) {
		c->strings_dropped++;
		return;
	}
	if (vec_grow((void **)&c->arena, &c->arena_cap, c->arena_len + n + 1, 1)) {
		c->nomem = 1;
		return;
	}
	int created;
	struct dsmt_hent *h = dsmt_hmap_put(&c->strmap, id, &created);
	struct str_ent *e = created ? VPUSH(c->strs) : &c->strs.v[h ? h->v : 0];
	if (!h || !e) {
		c->nomem = 1;
		return;
	}
	if (created)
		h->v = c->strs.n - 1;
	e->off = c->arena_len;
	e->len = (uint32_t)n;
	memcpy(c->arena + c->arena_len, s, n);
	c->arena[c->arena_len + n] = 0;
	c->arena_len += n + 1;
}

static char *dupn(const uint8_t *s, size_t n)
{
	if (n > STR_MAX)
		n = STR_MAX;
	char *d = malloc(n + 1);
	if (d) {
		memcpy(d, s, n);
		d[n] = 0;
	}
	return d;
}

static void meta_add(struct ctx *c, const uint8_t *k, size_t kn, const uint8_t *v, size_t vn)
{
	if (vn > STR_MAX)
		vn = STR_MAX;
	char *key = dupn(k, kn), *val = dupn(v, vn);
	if (!key || !val)
		goto fail;
	for (size_t i = 0; i < c->meta.n; i++) {
		if (strcmp(c->meta.v[i].key, key) == 0) {
			free(c->meta.v[i].val);
			free(key);
			c->meta.v[i].val = val;
			c->meta.v[i].val_len = vn;
			return;
		}
	}
	if (c->meta.n >= META_MAX)
		goto fail;
	struct dsmt_meta *m = VPUSH(c->meta);
	if (!m)
		goto fail;
	m->key = key;
	m->val = val;
	m->val_len = vn;
	return;
fail:
	free(key);
	free(val);
}

static const char *meta_get(struct dsmt_meta *m, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(m[i].key, key) == 0)
			return m[i].val;
	return NULL;
}

const char *dsmt_meta_get(const struct dsmt_process *p, const char *key)
{
	return meta_get(p->meta, p->nmeta, key);
}

int dsmt_meta_int(const struct dsmt_process *p, const char *key, long long *v)
{
	const char *s = dsmt_meta_get(p, key);
	char *e;
	if (!s || !*s)
		return 0;
	errno = 0;
	long long x = strtoll(s, &e, 10);
	if (*e || errno)
		return 0;
	*v = x;
	return 1;
}

/* Python code objects, Python stacks and native stacks, by id (a later
 * record with the same id replaces an earlier one) */
#define PYCODES_MAX ((size_t)1 << 22)
#define FRAMES_MAX ((size_t)1 << 27) /* code/instr pairs and native ips, each */
#define LT_MAX ((size_t)1 << 16)     /* longest linetable kept */

static void pycode_add(struct ctx *c, uint64_t id, const uint8_t *file, size_t fn, const uint8_t *qual, size_t qn,
		       uint64_t first, const uint8_t *lt, size_t ln, uint64_t pyver)
{
	int created;
	if (c->pyc.n >= PYCODES_MAX && !dsmt_hmap_get(&c->pycmap, id)) {
		c->py_dropped++;
		return;
	}
	struct dsmt_hent *h = dsmt_hmap_put(&c->pycmap, id, &created);
	struct pycode *pc = !h ? NULL : created ? VPUSH(c->pyc) : &c->pyc.v[h->v];
	if (!pc) {
		c->nomem = 1;
		return;
	}
	if (created)
		h->v = c->pyc.n - 1;
	else {
		free(pc->file);
		free(pc->qual);
		free(pc->lt);
	}
	if (ln > LT_MAX)
		ln = 0; /* lines unknown */
	pc->file = dupn(file, fn);
	pc->qual = dupn(qual, qn);
	pc->lt = ln ? malloc(ln) : NULL;
	if (pc->lt)
		memcpy(pc->lt, lt, ln);
	pc->ltn = pc->lt ? ln : 0;
	pc->firstline = first > INT32_MAX ? 0 : (int64_t)first;
	pc->pyver = pyver;
	if (!pc->file || !pc->qual)
		c->nomem = 1;
}

/* n pairs (code, instr) or n ips read from cu into vec; a record that ends
 * early keeps what it holds */
static void idx_add(struct ctx *c, struct dsmt_hmap *map, void *rvec, void *vvec, uint64_t id, uint64_t n,
		    struct dsmt_cur *cu, int pairs)
{
	VEC(struct idxrange) *rv = rvec;
	VEC(uint64_t) *vv = vvec;
	size_t per = pairs ? 2 : 1, off = vv->n;
	uint64_t ip = 0;
	uint32_t k = 0;
	for (uint64_t i = 0; i < n && cu->p < cu->end && !cu->bad; i++) {
		if (vv->n + per > FRAMES_MAX) {
			c->py_dropped++;
			break;
		}
		if (vec_grow((void **)&vv->v, &vv->cap, vv->n + per, sizeof(uint64_t))) {
			c->nomem = 1;
			return;
		}
		if (pairs) {
			vv->v[vv->n++] = dsmt_cur_u(cu);
			vv->v[vv->n++] = dsmt_cur_u(cu);
		} else {
			ip = i ? ip + (uint64_t)dsmt_cur_s(cu) : dsmt_cur_u(cu);
			vv->v[vv->n++] = ip;
		}
		k++;
	}
	int created;
	struct dsmt_hent *h = dsmt_hmap_put(map, id, &created);
	struct idxrange *r = !h ? NULL : created ? VPUSH(*rv) : &rv->v[h->v];
	if (!r) {
		c->nomem = 1;
		return;
	}
	if (created)
		h->v = rv->n - 1;
	r->off = off;
	r->n = k;
}

static void pystack_add(struct ctx *c, uint64_t id, uint64_t n, struct dsmt_cur *cu)
{
	idx_add(c, &c->pysmap, &c->pys, &c->pyframes, id, n, cu, 1);
}

static void stack_add(struct ctx *c, uint64_t id, uint64_t n, struct dsmt_cur *cu)
{
	struct dsmt_cur c2 = *cu;
	idx_add(c, &c->stkmap, &c->stk, &c->ips, id, n, &c2, 0);
}

static const struct pycode *pycode_get(struct ctx *c, uint64_t id)
{
	struct dsmt_hent *h = dsmt_hmap_get(&c->pycmap, id);
	return h ? &c->pyc.v[h->v] : NULL;
}

static const struct idxrange *range_get(struct dsmt_hmap *m, const struct idxrange *v, uint64_t id)
{
	struct dsmt_hent *h = id ? dsmt_hmap_get(m, id) : NULL;
	return h ? &v[h->v] : NULL;
}

static int is_torch_path(const char *path)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	return strncmp(b, "libc10_cuda", 11) == 0;
}

/* CLS_* of a module's path (categories of driver-level bytes) */
static int path_class(const char *path) { return attrib_module_class(path); }

static int site_is_torch(struct ctx *c, uint64_t site)
{
	for (size_t i = 0; i < c->torch.n; i++)
		if (site >= c->torch.v[i].lo && site < c->torch.v[i].hi)
			return 1;
	return 0;
}

#define UNRES_MAX ((size_t)1 << 20)

static void unresolved(struct ctx *c, struct dsmt_hmap *set, uint64_t key)
{
	if (dsmt_hmap_size(set) >= UNRES_MAX) {
		c->unres_overflow = 1;
		return;
	}
	int created;
	if (!dsmt_hmap_put(set, key, &created))
		c->unres_overflow = 1;
}

/* Is this cudaMalloc call site torch's caching allocator?  A site in no
 * module seen so far is remembered: its MODULE record may come later. */
static int site_is_torch_now(struct ctx *c, uint64_t site)
{
	if (site_is_torch(c, site))
		return 1;
	for (size_t i = 0; i < c->mods.n; i++)
		if (site >= c->mods.v[i].lo && site < c->mods.v[i].hi)
			return 0;
	unresolved(c, &c->unres_sites, site);
	return 0;
}

/* CLS_* of the module holding site, -1 when it lies in no module seen so far */
static int site_class(struct ctx *c, uint64_t site)
{
	if (site_is_torch(c, site))
		return CLS_TORCH;
	for (size_t i = 0; i < c->mods.n; i++)
		if (site >= c->mods.v[i].lo && site < c->mods.v[i].hi)
			return c->mods.v[i].cls;
	return -1;
}

/* The same, remembering a site in no module (CLS_OTHER for now): its
 * MODULE record may come later. */
static int site_class_now(struct ctx *c, uint64_t site)
{
	int k = site_class(c, site);
	if (k >= 0)
		return k;
	unresolved(c, &c->unres_sites, site);
	return CLS_OTHER;
}

/* ---- printing helpers (dump) ---------------------------------------- */

/* Quoted and escaped, at most STR_MAX bytes (the longest string kept). */
static void put_esc(FILE *f, const char *s, size_t n)
{
	if (n > STR_MAX)
		n = STR_MAX;
	fputc('"', f);
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch == 0)
			fputs("\\0", f);
		else if (ch == '\n')
			fputs("\\n", f);
		else if (ch < 0x20 || ch >= 0x7f)
			fprintf(f, "\\x%02x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

static void put_strid(struct ctx *c, const char *field, uint64_t id)
{
	size_t n;
	const char *s = str_get(c, id, &n);
	fprintf(c->dump, " %s=%" PRIu64, field, id);
	if (s) {
		fputc(' ', c->dump);
		put_esc(c->dump, s, n);
	}
}

static const char *api_name(unsigned api)
{
	switch (api) {
	case DSMT_API_TORCH: return "torch";
	case DSMT_API_CUDA_MALLOC: return "cudaMalloc";
	case DSMT_API_CUDA_MALLOC_ASYNC: return "cudaMallocAsync";
	case DSMT_API_CUDA_MALLOC_MANAGED: return "cudaMallocManaged";
	case DSMT_API_CUDA_HOST_ALLOC: return "cudaHostAlloc";
	case DSMT_API_CUDA_HOST_REGISTER: return "cudaHostRegister";
	case DSMT_API_CUDA_FREE: return "cudaFree";
	case DSMT_API_CUDA_FREE_HOST: return "cudaFreeHost";
	default: return NULL;
	}
}

const char *dsmt_drv_op_name(unsigned op)
{
	static const char *const n[] = {
		[DSMT_DRV_ALLOC] = "alloc", [DSMT_DRV_FREE] = "free", [DSMT_DRV_ALLOC_MANAGED] = "alloc_managed",
		[DSMT_DRV_ALLOC_HOST] = "alloc_host", [DSMT_DRV_FREE_HOST] = "free_host",
		[DSMT_DRV_HOST_REGISTER] = "host_register", [DSMT_DRV_HOST_UNREGISTER] = "host_unregister",
		[DSMT_DRV_ALLOC_ASYNC] = "alloc_async", [DSMT_DRV_FREE_ASYNC] = "free_async",
		[DSMT_DRV_CREATE] = "create", [DSMT_DRV_RELEASE] = "release", [DSMT_DRV_RETAIN] = "retain",
		[DSMT_DRV_MAP] = "map", [DSMT_DRV_UNMAP] = "unmap", [DSMT_DRV_SET_ACCESS] = "set_access",
		[DSMT_DRV_RESERVE] = "reserve", [DSMT_DRV_ADDR_FREE] = "addr_free", [DSMT_DRV_IMPORT] = "import",
		[DSMT_DRV_IPC_OPEN] = "ipc_open", [DSMT_DRV_IPC_CLOSE] = "ipc_close",
		[DSMT_DRV_POOL_CREATE] = "pool_create", [DSMT_DRV_POOL_DESTROY] = "pool_destroy",
		[DSMT_DRV_POOL_TRIM] = "pool_trim", [DSMT_DRV_CTX_CREATE] = "ctx_create",
		[DSMT_DRV_CTX_DESTROY] = "ctx_destroy", [DSMT_DRV_STATIC] = "static",
		[DSMT_DRV_STATIC_FREE] = "static_free",
	};
	return op < sizeof(n) / sizeof(n[0]) ? n[op] : NULL;
}

static const char *via_name(uint64_t via)
{
	switch (via) {
	case DSMT_VIA_NONE: return "none";
	case DSMT_VIA_CUPTI: return "cupti";
	case DSMT_VIA_DLSYM: return "dlsym";
	case DSMT_VIA_ACTIVITY: return "activity";
	default: return NULL;
	}
}

static const char *src_reason_name(uint64_t r)
{
	switch (r) {
	case DSMT_SRC_START: return "start";
	case DSMT_SRC_YIELD: return "yield";
	case DSMT_SRC_REFUSED: return "refused";
	case DSMT_SRC_NO_CUPTI: return "no_cupti";
	case DSMT_SRC_DISABLED: return "disabled";
	case DSMT_SRC_FOREIGN: return "foreign";
	default: return NULL;
	}
}

/* " via=NAME": DRV (flags): the low 4 bits, "+rt" for DSMT_VIA_UNDER_RT,
 * any other bit as "+0x.."; SOURCE: the whole value */
static void put_via(FILE *f, uint64_t via, int drv)
{
	uint64_t base = drv ? via & 0xf : via;
	const char *n = via_name(base);
	if (n)
		fprintf(f, " via=%s", n);
	else
		fprintf(f, " via=%" PRIu64, base);
	if (drv && (via & DSMT_VIA_UNDER_RT))
		fputs("+rt", f);
	if (drv && (via & ~(uint64_t)0x1f))
		fprintf(f, "+0x%" PRIx64, via & ~(uint64_t)0x1f);
}

static void put_dev(FILE *f, uint64_t dev1)
{
	if (dev1 == 0)
		fputs(" dev=host", f);
	else
		fprintf(f, " dev=%" PRIu64, dev1 - 1);
}

/* ---- replay --------------------------------------------------------- */

static struct dev *getdev_slow(struct ctx *c, unsigned dev1, uint64_t seq)
{
	if (dev1 == 0 || dev1 > DEV1_MAX) {
		if (!c->nodev++)
			c->nodev_seq = seq;
		return NULL;
	}
	struct dev *d = c->dev[dev1];
	if (!d) {
		d = calloc(1, sizeof(*d));
		if (!d) {
			c->nomem = 1;
			return NULL;
		}
		c->dev[dev1] = d;
		if (dev1 > c->maxdev1)
			c->maxdev1 = dev1;
	}
	if (!c->postpause)
		c->fast[dev1] = d;
	return d;
}

/* The device of an allocator event (NULL: none, counted) */
static inline struct dev *getdev(struct ctx *c, unsigned dev1, uint64_t seq)
{
	struct dev *d = c->fast[dev1]; /* dev1 <= 255; fast[0] and fast[255] stay NULL */
	if (__builtin_expect(d != NULL, 1))
		return d;
	return getdev_slow(c, dev1, seq);
}

static void timed_due(struct ctx *c, uint64_t seq, uint64_t ts);
static void attrib_config(struct ctx *c);
static void attrib_close_seg(struct ctx *c, size_t off, uint64_t seq, uint64_t ts);

/* The process-wide phase machine (attribution): INIT until the first step
 * boundary; a step marker or a main-thread DeepSpeedEngine.forward begins
 * FORWARD (fwd: 1 + that forward), its .backward BACKWARD, the end of the
 * backward STEP (the optimizer). */
static void ph_note(struct ctx *c, uint64_t seq);

static void set_phase(struct ctx *c, uint64_t seq, unsigned ph, uint32_t fwd)
{
	if (ph == DSMT_PH_FORWARD && (c->ph != DSMT_PH_FORWARD || c->bw_seen))
		c->fwd_gen++; /* a step's stretch begins (not again at a marker's push right after its pop) */
	if (ph == DSMT_PH_FORWARD) {
		c->bw_seen = 0;
		c->cur_fwd = fwd;
	}
	if (ph == DSMT_PH_BACKWARD && c->ph != DSMT_PH_BACKWARD)
		c->bw_gen++;
	c->ph = (uint8_t)ph;
	ph_note(c, seq);
}

/* The process-wide phase for host samples: the phase machine, with the
 * stretch of a step after an autograd thread became active counted as
 * backward (without DeepSpeed's ranges nothing process-wide says where the
 * optimizer begins).  Noted at every change, with the seq of the event that
 * made it. */
static void ph_note(struct ctx *c, uint64_t seq)
{
	unsigned ph = c->ph;
	if (ph == DSMT_PH_FORWARD && c->bw_seen)
		ph = DSMT_PH_BACKWARD;
	if (ph == c->host_ph)
		return;
	struct phchg *p = VPUSH(c->phchg);
	if (!p) {
		c->nomem = 1;
		return;
	}
	*p = (struct phchg){seq, (uint8_t)ph};
	c->host_ph = (uint8_t)ph;
}

#define NVNODES_MAX ((size_t)1 << 24)

/* A range pushed on thread t: a node in the tree of open ranges */
static void nv_push(struct ctx *c, struct thread *t, uint64_t name)
{
	if (c->nvn.n >= NVNODES_MAX) {
		c->nvn_dropped++;
		t->nvtop = 0;
		return;
	}
	if (!c->nvn.n) { /* node 0: none */
		struct nvnode *z = VPUSH(c->nvn);
		if (!z) {
			c->nomem = 1;
			return;
		}
		memset(z, 0, sizeof(*z));
	}
	struct nvnode *n = VPUSH(c->nvn);
	if (!n) {
		c->nomem = 1;
		return;
	}
	n->name = name;
	n->parent = t->nvtop;
	t->nvtop = (uint32_t)(c->nvn.n - 1);
}

static void hl_close(struct ctx *c);

static void close_segment(struct ctx *c, uint64_t seq, uint64_t ts)
{
	if (c->timed_known && c->timed_next < c->timed.n) /* statics loaded before the boundary */
		timed_due(c, seq, ts);
	struct seg *s = VPUSH(c->segs);
	if (!s || vec_grow((void **)&c->stats.v, &c->stats.cap, c->stats.n + c->maxdev1,
			   sizeof(*c->stats.v))) {
		if (s)
			c->segs.n--;
		c->nomem = 1;
		return;
	}
	s->end_seq = seq;
	s->end_ts = ts;
	s->off = c->stats.n;
	s->ndev = c->maxdev1;
	s->pk_hp = c->pk_hp;
	s->end_hp = c->hp;
	c->pk_hp = c->hp;
	for (unsigned i = 1; i <= c->maxdev1; i++) {
		struct segstat *st = &c->stats.v[c->stats.n++];
		struct dev *d = c->dev[i];
		if (!d) {
			memset(st, 0, sizeof(*st));
			continue;
		}
		st->pk_alloc = d->pk_alloc;
		st->end_alloc = d->alloc;
		st->pk_res = d->pk_res;
		st->end_res = d->res;
		st->allocs = d->allocs;
		st->frees = d->frees;
		st->pk_dev = d->pk_dlev;
		st->end_dev = d->dlev;
		d->pk_alloc = d->alloc; /* the next interval's peak starts at the current value */
		d->pk_res = d->res;
		d->pk_dlev = d->dlev;
		d->allocs = d->frees = 0;
	}
	if (c->attrib)
		attrib_close_seg(c, s->off, seq, ts);
	if (c->series_on)
		hl_close(c);
}

/* A matching range ended at (seq, ts): close the interval there and keep
 * the range for step building. */
static void end_range(struct ctx *c, uint64_t start_seq, uint64_t start_ts, uint64_t seq, uint64_t ts)
{
	close_segment(c, seq, ts);
	struct range *r = VPUSH(c->ranges);
	if (!r) {
		c->nomem = 1;
		return;
	}
	*r = (struct range){start_seq, start_ts, seq, ts};
}

/* What an NVTX name is to the step finder (bits). */
enum { NC_KNOWN = 1, NC_MARKER = 2 /* matches --step-marker */, NC_FWD = 4, NC_BWD = 8 };
#define DS_FORWARD "DeepSpeedEngine.forward"
#define DS_BACKWARD "DeepSpeedEngine.backward"

/* ... and, with attribution, what it says (attrib_nvtx_name, packed, bits 8..31) */
static unsigned name_class_of(struct ctx *c, const char *s)
{
	unsigned k = NC_KNOWN;
	if (c->have_re && regexec(&c->re, s, 0, NULL, 0) == 0)
		k |= NC_MARKER;
	if (!strcmp(s, DS_FORWARD))
		k |= NC_FWD;
	else if (!strcmp(s, DS_BACKWARD))
		k |= NC_BWD;
	if (c->attrib) {
		struct attrib_ev ev;
		attrib_nvtx_name(s, &ev);
		k |= attrib_pack(&ev) << 8;
	}
	return k;
}

/* name_class_of a name that means nothing */
static unsigned name_plain(struct ctx *c) { return NC_KNOWN | (c->attrib ? ATTRIB_NONE << 8 : 0); }

static unsigned name_class(struct ctx *c, uint64_t name)
{
	int created;
	struct dsmt_hent *h = dsmt_hmap_put(&c->rematch, name, &created);
	if (!h) {
		c->nomem = 1;
		return 0;
	}
	if (created) {
		const char *s = str_get(c, name, NULL);
		if (!s) { /* its STRING record may come later: decide again next time */
			dsmt_hmap_del(&c->rematch, name, NULL);
			unresolved(c, &c->unres_names, name);
			return 0;
		}
		h->aux = name_class_of(c, s);
	}
	return h->aux;
}

static int name_matches(struct ctx *c, uint64_t name) { return (name_class(c, name) & NC_MARKER) != 0; }

/* Is thread index tidx the main thread (tid == META pid)? */
static int is_main_thread(struct ctx *c, uint32_t tidx)
{
	if (!c->main_tid_set) {
		const char *v = meta_get(c->meta.v, c->meta.n, "pid");
		char *e;
		unsigned long long x = v && *v ? strtoull(v, &e, 10) : 0;
		c->main_tid = v && *v && !*e ? (uint64_t)x : UINT64_MAX;
		c->main_tid_set = 1;
	}
	return c->thr.v[tidx].tid == c->main_tid;
}

static struct domstack *domstack(struct ctx *c, struct thread *t, uint64_t domain)
{
	for (uint32_t i = 0; i < t->nds; i++)
		if (t->ds[i].domain == domain)
			return &t->ds[i];
	struct domstack *nd = realloc(t->ds, (t->nds + 1) * sizeof(*nd));
	if (!nd) {
		c->nomem = 1;
		return NULL;
	}
	t->ds = nd;
	memset(&nd[t->nds], 0, sizeof(*nd));
	nd[t->nds].domain = domain;
	return &nd[t->nds++];
}

static inline void check_tot(struct ctx *c, uint64_t seq, const struct dsmt_event *e, const struct dev *d)
{
	if (c->ignore_totals) /* e is a torch ALLOC/FREE: it has them */
		return;
	c->tot_checked++;
	if (e->tot != d->alloc) {
		if (!c->tot_bad++) {
			c->tot_bad_seq = seq;
			c->tot_bad_replay = d->alloc;
			c->tot_bad_alloc = e->tot;
		}
	}
}


/* ---- attribution -----------------------------------------------------
 * Every live tensor block has a record (struct arec) of what was known at
 * its allocation.  Its category (attrib.c) is decided only when it matters:
 * when it is freed after a peak it was live at (then with its real
 * lifetime), or when a segment closes with it still live (then from what is
 * known so far, kept until a step boundary passes).  Each device keeps the
 * open segment's peak (its first moment) and the sums, by category, of the
 * blocks live then and freed since; at the segment's close the blocks still
 * live add to them.  The driver-level snapshot gets the same treatment. */

_Static_assert(DSMT_BK_NCAT == DSMT_NCAT && DSMT_BK_NPHASE == DSMT_NPHASE, "decode.h and attrib.h agree");

static void unres_id(struct ctx *c, uint64_t key) { unresolved(c, &c->unres_py, key); }

/* Packed Python evidence of a PYSTACK id (ATTRIB_NONE: none), cached */
static uint32_t py_evidence_slow(struct ctx *c, uint32_t id)
{
	int created;
	struct dsmt_hent *h = dsmt_hmap_put(&c->pyev, id, &created);
	if (!h) {
		c->nomem = 1;
		return ATTRIB_NONE;
	}
	if (!created)
		return h->aux;
	struct attrib_ev ev = {DSMT_CAT_NONE, DSMT_PH_NONE, 0, 0};
	const struct idxrange *r = range_get(&c->pysmap, c->pys.v, id);
	if (!r) {
		unres_id(c, id);
	} else {
		struct attrib_frame fs[64], *f = r->n <= 64 ? fs : malloc(r->n * sizeof(*f));
		if (!f) {
			c->nomem = 1;
			return ATTRIB_NONE;
		}
		for (uint32_t i = 0; i < r->n; i++) {
			const struct pycode *pc = pycode_get(c, c->pyframes.v[r->off + 2 * i]);
			f[i].file = pc ? pc->file : NULL;
			f[i].qualname = pc ? pc->qual : NULL;
			if (!pc)
				unres_id(c, id);
		}
		attrib_pystack(f, r->n, &ev);
		if (f != fs)
			free(f);
	}
	h->aux = attrib_pack(&ev);
	return h->aux;
}

static inline uint32_t py_evidence(struct ctx *c, uint32_t id)
{
	return id ? py_evidence_slow(c, id) : ATTRIB_NONE;
}

/* LIB_* of the libraries in a native stack: nccl or a workspace library
 * anywhere in it (the library that asked for memory), cached */
static unsigned native_class_slow(struct ctx *c, uint32_t stack)
{
	int created;
	struct dsmt_hent *h = dsmt_hmap_put(&c->natcls, stack, &created);
	if (!h) {
		c->nomem = 1;
		return LIB_OTHER;
	}
	if (!created)
		return h->aux;
	unsigned k = LIB_OTHER;
	const struct idxrange *r = range_get(&c->stkmap, c->stk.v, stack);
	if (!r)
		unres_id(c, (uint64_t)stack | (uint64_t)1 << 63);
	for (uint32_t i = 0; r && i < r->n && k == LIB_OTHER; i++) {
		int m = site_class_now(c, c->ips.v[r->off + i]);
		if (m == LIB_NCCL || m == LIB_WORKSPACE)
			k = (unsigned)m;
	}
	h->aux = k;
	return k;
}

static inline unsigned native_class(struct ctx *c, uint32_t stack)
{
	if (!stack)
		return LIB_OTHER;
	uint32_t *e = c->natc[stack & (NATC - 1)]; /* [0]: stack, [1]: class */
	if (e[0] != stack) {
		e[1] = native_class_slow(c, stack);
		e[0] = stack;
	}
	return e[1];
}

/* The phase of an event from its evidence; eval: a DeepSpeed forward with
 * no backward before the next forward (known once that one came) */
static inline unsigned phase_of(struct ctx *c, unsigned gph, uint32_t pystack, const struct thread *t, uint32_t nvk,
				int bw_seen, uint32_t fwd)
{
	struct attrib_ev py = attrib_unpack(py_evidence(c, pystack)), nv = attrib_unpack(nvk);
	unsigned ph = attrib_phase(gph, py.phase, t->autograd, nv.phase, bw_seen);
	if (ph == DSMT_PH_FORWARD && gph == DSMT_PH_FORWARD && fwd && fwd < c->fwds.n && !c->fwds.v[fwd - 1].backward)
		ph = DSMT_PH_EVAL;
	return ph;
}

static inline unsigned ar_phase(struct ctx *c, struct arec *r)
{
	if (!r->ph)
		r->ph = (uint8_t)phase_of(c, r->gph, r->pystack, &c->thr.v[r->tidx], r->nvk, r->flags & AR_BW_SEEN,
					  r->fwd);
	return r->ph;
}

/* The category of block r (size bytes) freed in phase ph_free (NONE: still
 * live); *ph: its allocation's phase.  attrib_category's answers are
 * remembered by their input (attrib_key) in a small direct-mapped table. */
static unsigned ar_category(struct ctx *c, struct arec *r, uint64_t size, unsigned ph_free, unsigned *ph)
{
	struct attrib_in in;
	in.size = size;
	in.ph_alloc = (uint8_t)ar_phase(c, r);
	in.ph_free = (uint8_t)ph_free;
	in.crossed = r->seg != c->segs.n;
	in.steps = (uint8_t)(c->fwd_gen - r->fwd_gen > 2 ? 2 : c->fwd_gen - r->fwd_gen);
	in.libws = (r->flags & AR_LIBWS) != 0;
	in.bw_since = r->bw_gen != c->bw_gen;
	in.has_py = r->pystack != 0;
	in.py = attrib_unpack(py_evidence(c, r->pystack));
	in.nv = attrib_unpack(r->nvk);
	in.native = (uint8_t)native_class(c, r->stack);
	in.bucket = (uint8_t)attrib_is_bucket(size, c->bucket_elems);
	/* consulted only for allocations in backward (attrib.h) */
	in.param_size = in.ph_alloc == DSMT_PH_BACKWARD && dsmt_hmap_get(&c->psizes, size) != NULL;
	in.world1 = (uint8_t)c->world1;
	*ph = in.ph_alloc;
	uint64_t key = attrib_key(&in);
	uint64_t *m = c->catmemo[(key ^ key >> 29 ^ key >> 47) & (CATMEMO - 1)];
	if (m[0] != key) {
		m[0] = key;
		m[1] = attrib_category(&in, NULL);
	}
	return (unsigned)m[1];
}

static void psize_add(struct ctx *c, uint64_t size, int d)
{
	int created;
	struct dsmt_hent *h = dsmt_hmap_put(&c->psizes, size, &created);
	if (!h) {
		c->nomem = 1;
		return;
	}
	h->v += (uint64_t)d;
	if (!h->v)
		dsmt_hmap_del(&c->psizes, size, NULL);
}

/* The category of a live block (at a snapshot): decided once, again only
 * after a step boundary passed */
static unsigned ar_live_cat(struct ctx *c, struct arec *r, uint64_t size, unsigned *ph)
{
	if ((r->flags & AR_CAT) && ((r->cat_seg == c->segs.n && r->bw_gen == c->bw_gen) || r->cat_seg != r->seg)) {
		*ph = ar_phase(c, r);
		return r->cat;
	}
	unsigned cat = ar_category(c, r, size, DSMT_PH_NONE, ph);
	if (cat != r->cat || !(r->flags & AR_CAT))
		r->group = UINT32_MAX;
	r->cat = (uint8_t)cat;
	r->cat_seg = (uint32_t)c->segs.n;
	r->flags |= AR_CAT;
	if ((cat == DSMT_CAT_PARAMETERS || cat == DSMT_CAT_GATHERED) && !(r->flags & AR_PARAM)) {
		r->flags |= AR_PARAM; /* the gradient size rule */
		psize_add(c, size, 1);
	}
	return cat;
}

/* A record for a block allocated by e at seq (its index; 0, a record that
 * means nothing, when memory runs out) */
static uint32_t ar_new(struct ctx *c, uint64_t seq, const struct dsmt_event *e)
{
	uint32_t i;
	if (!c->ar.n) { /* record 0 */
		struct arec *z = VPUSH(c->ar);
		if (!z) {
			c->nomem = 1;
			return 0;
		}
		memset(z, 0, sizeof(*z));
	}
	if (c->ar_free) {
		i = (uint32_t)(c->ar_free - 1);
		c->ar_free = c->ar.v[i].seq;
	} else {
		struct arec *nr = c->ar.n < UINT32_MAX - 1 ? VPUSH(c->ar) : NULL;
		if (!nr) {
			c->nomem = 1;
			return 0;
		}
		i = (uint32_t)(c->ar.n - 1);
	}
	struct arec *r = &c->ar.v[i];
	const struct thread *t = &c->thr.v[e->tidx];
	r->seq = seq;
	r->site = e->x;
	r->seg = (uint32_t)c->segs.n;
	r->tidx = e->tidx;
	r->pystack = e->pystack;
	r->stack = e->stack;
	r->nvk = t->nvk;
	r->fwd = c->cur_fwd;
	r->epoch = (uint32_t)c->epoch;
	r->cat_seg = 0;
	r->bw_gen = c->bw_gen;
	r->fwd_gen = c->fwd_gen;
	r->group = UINT32_MAX;
	r->gph = c->ph;
	r->flags = AR_LIVE | (c->bw_seen ? AR_BW_SEEN : 0);
	if (t->ws_py) { /* the op that created a cuBLAS (...) handle: torch gives it a workspace */
		if (t->ws_py == e->pystack + 1)
			r->flags |= AR_LIBWS;
		else
			c->thr.v[e->tidx].ws_py = 0;
	}
	r->size = e->size;
	r->dev1 = e->dev1;
	r->cat = 0;
	r->ph = 0;
	r->oom = 0;
	return i;
}

static void ar_release(struct ctx *c, uint32_t i, uint64_t size)
{
	if (!i)
		return;
	struct arec *r = &c->ar.v[i];
	if (r->flags & AR_PARAM)
		psize_add(c, size, -1);
	r->flags = 0;
	r->seq = c->ar_free;
	c->ar_free = (uint64_t)i + 1;
}

static void pend_add(struct pend *p, uint64_t gen, unsigned cat, unsigned ph, uint64_t size)
{
	if (p->gen != gen) {
		memset(p, 0, sizeof(*p));
		p->gen = gen;
	}
	p->cat[cat] += size;
	if (cat == DSMT_CAT_TEMPORARIES)
		p->tmp[ph] += size;
}

static uint32_t group_of(struct ctx *c, uint64_t site, uint64_t pystack, uint64_t stack, unsigned cat);

/* A block live at its device's peak (or snapshot) is freed: its category,
 * now with its lifetime, into the pending sums */
static __attribute__((noinline)) void attrib_freed_live(struct ctx *c, const struct dsmt_event *e, struct dev *d,
							uint64_t size, struct arec *r)
{
	const struct thread *t = &c->thr.v[e->tidx];
	unsigned ph_free = phase_of(c, c->ph, e->pystack, t, t->nvk, c->bw_seen, c->cur_fwd), ph;
	unsigned cat = ar_category(c, r, size, ph_free, &ph);
	if (r->seq <= d->pk_seq) {
		pend_add(&d->pend, d->pk_gen, cat, ph, size);
		if (c->top) {
			if (d->tp_gen != d->pk_gen) {
				d->tpn = 0;
				d->tp_gen = d->pk_gen;
			}
			if (vec_grow((void **)&d->tp, &d->tpcap, d->tpn + 1, sizeof(*d->tp))) {
				c->nomem = 1;
				return;
			}
			d->tp[d->tpn++] = (struct tpend){group_of(c, r->site, r->pystack, r->stack, cat), size};
		}
		if (c->pblk) {
			if (d->pbp_gen != d->pk_gen) {
				d->pbpn = 0;
				d->pbp_gen = d->pk_gen;
			}
			if (vec_grow((void **)&d->pbp, &d->pbpcap, d->pbpn + 1, sizeof(*d->pbp))) {
				c->nomem = 1;
				return;
			}
			d->pbp[d->pbpn++] = (struct dsmt_block){e->ptr, size, r->seq, cat};
		}
	}
	if (d->snap.taken && r->seq <= d->snap.seq)
		pend_add(&d->snap_pend, d->snap_gen, cat, ph, size);
}

/* Torch events of autograd threads mark the main thread as past its backward */
static inline void attrib_thread_seen(struct ctx *c, uint64_t seq, const struct dsmt_event *e)
{
	if (c->ph == DSMT_PH_FORWARD && !c->bw_seen && c->thr.v[e->tidx].autograd) {
		c->bw_seen = 1;
		c->bw_gen++;
		ph_note(c, seq);
	}
}

/* Block r (size bytes, category cat) into the breakdown of every reported
 * OOM of its device from its first one (r->oom) on: OOMs are in time order
 * and the block was live from before that one until now. */
static void oom_add(struct ctx *c, struct arec *r, uint64_t size, unsigned cat)
{
	for (size_t k = (size_t)r->oom - 1; k < c->oomv.n; k++)
		if (c->oomv.v[k].has_bk && c->oomv.v[k].device + 1 == (int)r->dev1)
			c->oomv.v[k].bk.cat[cat] += size;
	r->oom = 0;
}

/* A block live at a reported OOM is freed: its category, now that its
 * lifetime is known (as for a peak's blocks), into those OOMs' breakdowns */
static __attribute__((noinline)) void oom_freed(struct ctx *c, const struct dsmt_event *e, struct arec *r,
						uint64_t size)
{
	const struct thread *t = &c->thr.v[e->tidx];
	unsigned ph_free = phase_of(c, c->ph, e->pystack, t, t->nvk, c->bw_seen, c->cur_fwd), ph;
	oom_add(c, r, size, ar_category(c, r, size, ph_free, &ph));
}

static void tl_block(struct ctx *c, uint64_t ts, unsigned dev1, uint32_t i, uint64_t size);
static void tl_levels(struct ctx *c, uint64_t ts);
static void tl_unblock(struct ctx *c, uint64_t ts, const struct dsmt_event *e, struct arec *r, uint32_t i,
		       uint64_t size);

static inline void attrib_free(struct ctx *c, uint64_t seq, const struct dsmt_event *e, struct dev *d,
			       uint64_t size, uint32_t i)
{
	attrib_thread_seen(c, seq, e);
	c->thr.v[e->tidx].ws_py = 0; /* a free on the thread: the op that created a handle is over */
	struct arec *r = &c->ar.v[i];
	if (__builtin_expect(i == d->pk_idx && d->pk_has && !d->pk_copied, 0)) {
		d->pk_rec = *r; /* the peak's allocation goes: keep what it was */
		d->pk_copied = 1;
	}
	if (r->seq <= d->pk_seq || (d->snap.taken && r->seq <= d->snap.seq))
		attrib_freed_live(c, e, d, size, r);
	if (__builtin_expect(r->oom, 0))
		oom_freed(c, e, r, size);
	if (__builtin_expect(c->tl_on, 0)) {
		tl_unblock(c, e->ts, e, r, i, size);
		tl_levels(c, e->ts);
	}
	ar_release(c, i, size);
}

/* d reached a new peak at seq: through the allocation of record idx, or
 * otherwise (idx < 0: a resync, a cudaMallocAsync tensor) */
static void attrib_peak(struct ctx *c, struct dev *d, uint64_t seq, uint64_t ts, uint32_t tidx, int64_t idx)
{
	d->pk_seq = seq;
	d->pk_ts = ts;
	d->pk_res_at = d->res;
	d->pk_gen++;
	d->pk_has = idx >= 0;
	d->pk_tidx = tidx;
	d->pk_node = idx >= 0 ? c->thr.v[tidx].nvtop : 0;
	d->pk_idx = idx >= 0 ? (uint32_t)idx : 0;
	d->pk_copied = 0;
}

/* the record of the allocation that made d's peak */
static struct arec *pk_record(struct ctx *c, struct dev *d)
{
	return d->pk_copied ? &d->pk_rec : &c->ar.v[d->pk_idx];
}

static void replay_torch_slow(struct ctx *c, uint64_t seq, const struct dsmt_event *e);

/* A tensor block allocated or freed (torch ALLOC/FREE) on device d: the hot
 * path. */
static inline __attribute__((always_inline)) void replay_torch_dev(struct ctx *c, uint64_t seq,
								  const struct dsmt_event *e, struct dev *d)
{
	d->used = 1;
	if (e->type == DSMT_REC_ALLOC) {
		int created;
		struct dsmt_hent *h = dsmt_hmap_put(&d->tens, e->ptr, &created);
		if (!h) {
			c->nomem = 1;
			return;
		}
		if (!created) {
			if (!c->dbl_alloc++)
				c->dbl_alloc_seq = seq;
			d->alloc -= h->v;
			if (c->attrib) {
				if (c->tl_on)
					tl_unblock(c, e->ts, e, &c->ar.v[h->aux], h->aux, h->v);
				ar_release(c, h->aux, h->v);
			}
		}
		h->v = e->size;
		d->alloc += e->size;
		if (c->attrib) {
			attrib_thread_seen(c, seq, e);
			h->aux = ar_new(c, seq, e);
			if (__builtin_expect(c->tl_on, 0)) {
				tl_block(c, e->ts, e->dev1, h->aux, e->size);
				tl_levels(c, e->ts);
			}
		}
		if (d->alloc > d->pk_alloc) {
			d->pk_alloc = d->alloc;
			if (c->attrib)
				attrib_peak(c, d, seq, e->ts, e->tidx, h->aux);
		}
		d->allocs++;
	} else {
		d->frees++;
		struct dsmt_hent old;
		if (dsmt_hmap_del(&d->tens, e->ptr, &old)) {
			d->alloc -= old.v;
			if (c->attrib)
				attrib_free(c, seq, e, d, old.v, old.aux);
		} else if (!c->unk_free++) {
			c->unk_free_seq = seq;
			c->unk_free_ptr = e->ptr;
		}
	}
	check_tot(c, seq, e, d);
}

static inline __attribute__((always_inline)) void replay_torch(struct ctx *c, uint64_t seq,
							      const struct dsmt_event *e)
{
	struct dev *d = c->fast[e->dev1]; /* NULL: a new device, none, or after a pause */
	if (__builtin_expect(d != NULL, 1))
		replay_torch_dev(c, seq, e, d);
	else
		replay_torch_slow(c, seq, e);
}

/* A torch ALLOC/FREE once tracing has been paused and resumed (out of line).
 * Nothing was recorded while paused, so the live map may hold blocks freed
 * meanwhile (an entry from an earlier epoch) and lack blocks allocated
 * meanwhile.  A FREE of such a block subtracts the size it carries, an ALLOC
 * onto a stale entry replaces it; neither is an anomaly.  The first torch
 * event of a device in an epoch sets allocated to the allocator's total
 * after it (exact even if events were missed; the totals cross-check starts
 * there), and from the first resume on reserved is the allocator's
 * tot_reserved at every torch event (segments freed while paused are not
 * known otherwise). */
static __attribute__((noinline)) void replay_torch_post(struct ctx *c, uint64_t seq, const struct dsmt_event *e)
{
	struct dev *d = getdev(c, e->dev1, seq);
	if (!d)
		return;
	d->used = 1;
	if (e->type == DSMT_REC_ALLOC) {
		int created;
		struct dsmt_hent *h = dsmt_hmap_put(&d->tens, e->ptr, &created);
		if (!h) {
			c->nomem = 1;
			return;
		}
		if (!created) {
			uint32_t ep = c->attrib ? c->ar.v[h->aux].epoch : h->aux;
			if (ep < c->epoch) { /* freed while paused */
				c->pause_stale++;
			} else {
				if (!c->dbl_alloc++)
					c->dbl_alloc_seq = seq;
				d->alloc -= h->v;
			}
			if (c->attrib) {
				if (c->tl_on)
					tl_unblock(c, e->ts, e, &c->ar.v[h->aux], h->aux, h->v);
				ar_release(c, h->aux, h->v);
			}
		}
		h->v = e->size;
		h->aux = c->attrib ? ar_new(c, seq, e) : (uint32_t)c->epoch;
		if (c->tl_on)
			tl_block(c, e->ts, e->dev1, h->aux, e->size);
		d->alloc += e->size;
		d->allocs++;
	} else {
		d->frees++;
		struct dsmt_hent old;
		if (dsmt_hmap_del(&d->tens, e->ptr, &old)) {
			/* an older block may have been freed and its pointer reused while paused */
			uint32_t ep = c->attrib ? c->ar.v[old.aux].epoch : old.aux;
			d->alloc -= ep < c->epoch ? e->size : old.v;
			if (c->attrib)
				attrib_free(c, seq, e, d, old.v, old.aux);
		} else { /* allocated while paused */
			c->pause_unk_free++;
			d->alloc -= e->size;
		}
	}
	if (d->synced != c->epoch) {
		d->synced = c->epoch;
		d->alloc = e->tot;
		c->resyncs++;
	} else {
		check_tot(c, seq, e, d);
	}
	if (e->flags & DSMT_EVF_RES)
		d->res = e->res; /* tot_reserved (event.h) */
	else /* decoded before tot_reserved was kept: replay again with it */
		c->need_res = 1;
	if (d->alloc > d->pk_alloc) {
		d->pk_alloc = d->alloc;
		if (c->attrib) {
			struct dsmt_hent *h = e->type == DSMT_REC_ALLOC ? dsmt_hmap_get(&d->tens, e->ptr) : NULL;
			attrib_peak(c, d, seq, e->ts, e->tidx, h ? (int64_t)h->aux : -1);
		}
	}
	if (d->res > d->pk_res)
		d->pk_res = d->res;
	if (c->tl_on)
		tl_levels(c, e->ts);
}

/* A torch event without a fast[] device (out of line). */
static __attribute__((noinline)) void replay_torch_slow(struct ctx *c, uint64_t seq, const struct dsmt_event *e)
{
	if (c->postpause) {
		replay_torch_post(c, seq, e);
		return;
	}
	struct dev *d = getdev_slow(c, e->dev1, seq);
	if (d)
		replay_torch_dev(c, seq, e, d);
}

/* ---- driver level ----------------------------------------------------
 * `device` per device: bytes the driver handed the process (DRV allocations,
 * VMM handles by reference count, module statics, and runtime allocations
 * no driver event covers), by category; `imported` per device (IPC and
 * imported VMM handles); `host_pinned` process-wide.  None of it is on the
 * torch fast path: DRV and runtime events are rare. */

enum { OR_DRV = 1, OR_RT = 2 };           /* who recorded a dm entry */
enum { LV_DEV, LV_HOST, LV_IMP, LV_NONE }; /* which level its bytes count in */
#define DM_AUX(dev1, origin, level, cat, res) \
	((uint32_t)(dev1) | (uint32_t)(origin) << 8 | (uint32_t)(level) << 10 | (uint32_t)(cat) << 12 | \
	 (uint32_t)(res) << 16)
#define DM_DEV1(a) ((a) & 0xffu)
#define DM_ORIGIN(a) (((a) >> 8) & 3u)
#define DM_LEVEL(a) (((a) >> 10) & 3u)
#define DM_CAT(a) (((a) >> 12) & 7u)
#define DM_RES(a) (((a) >> 16) & 1u) /* the bytes count into reserved (torch, driver-recorded) */
#define SRC_UNKNOWN UINT64_MAX       /* no SOURCE record yet */
#define SRC_MAX 65536
#define SAMPLES_MAX ((size_t)1 << 22)
#define LIVE_MAX ((size_t)1 << 26) /* live dm / VMM handle / mapping entries */
#define VM_REF 1u /* vmap aux: the mapping holds a reference on its handle */

/* The device of a driver-level change; NULL for host or out of range. */
static struct dev *lvl_dev(struct ctx *c, unsigned dev1)
{
	if (dev1 == 0 || dev1 > DEV1_MAX)
		return NULL;
	return c->dev[dev1] ? c->dev[dev1] : getdev_slow(c, dev1, 0);
}

static void drv_nodev(struct ctx *c, uint64_t seq)
{
	if (!c->drv_nodev++)
		c->drv_nodev_seq = seq;
}

static void take_snap(struct dev *d, uint64_t seq, uint64_t ts, uint64_t ptr)
{
	struct snap *s = &d->snap;
	s->seq = seq;
	s->ts = ts;
	s->dlev = d->dlev;
	s->alloc = d->alloc;
	s->res = d->res;
	s->imported = d->imported;
	memcpy(s->cat, d->cat, sizeof(s->cat));
	s->taken = 1;
	d->snap_gen++; /* attribution: blocks live now and freed later count here */
	d->snap_ptr = ptr;
	d->snap_live = 1;
}

static void dev_add(struct dev *d, unsigned cat, int res, uint64_t size, uint64_t seq, uint64_t ts, uint64_t ptr)
{
	d->dlev += size;
	d->cat[cat] += size;
	if (res) {
		d->res += size;
		if (d->res > d->pk_res)
			d->pk_res = d->res;
	}
	if (d->dlev > d->pk_dlev)
		d->pk_dlev = d->dlev;
	d->snap_live = 0;
	if (d->dlev > d->run_pk) { /* the first moment at a new maximum */
		d->run_pk = d->dlev;
		take_snap(d, seq, ts, ptr);
	}
}

static void dev_sub(struct dev *d, unsigned cat, int res, uint64_t size)
{
	d->dlev -= size;
	d->cat[cat] -= size;
	if (res)
		d->res -= size;
	d->snap_live = 0;
}

static void hp_add(struct ctx *c, uint64_t size)
{
	c->hp += size;
	if (c->hp > c->pk_hp)
		c->pk_hp = c->hp;
}

/* Category (and whether it counts into reserved) of a driver allocation
 * from site: torch's allocator calling the driver itself (expandable
 * segments), not under a runtime call, is reserved. */
static unsigned drv_cat(struct ctx *c, uint64_t site, int under_rt, int *res)
{
	int k = site_class_now(c, site);
	*res = k == CLS_TORCH && !under_rt;
	return *res ? CAT_TORCH : k == CLS_NCCL ? CAT_NCCL : k == CLS_WORKSPACE ? CAT_WORKSPACE : CAT_OTHER;
}

/* Take the bytes of a dm entry out of its level. */
static void dm_drop(struct ctx *c, const struct dsmt_hent *h)
{
	uint32_t a = h->aux;
	struct dev *d;
	switch (DM_LEVEL(a)) {
	case LV_DEV:
		if ((d = lvl_dev(c, DM_DEV1(a))))
			dev_sub(d, DM_CAT(a), DM_RES(a), h->v);
		break;
	case LV_HOST:
		c->hp -= h->v;
		break;
	case LV_IMP:
		if ((d = lvl_dev(c, DM_DEV1(a))))
			d->imported -= h->v;
		break;
	}
}

/* A new allocation at ptr (one still live at the same address is replaced). */
static void dm_put(struct ctx *c, uint64_t seq, uint64_t ts, uint64_t ptr, uint64_t size, unsigned dev1,
		   unsigned origin, unsigned level, unsigned cat, int res)
{
	struct dev *d = NULL;
	if (level != LV_HOST && !(d = lvl_dev(c, dev1))) {
		drv_nodev(c, seq);
		return;
	}
	int created;
	struct dsmt_hent *h = dsmt_hmap_get(&c->dm, ptr);
	if (!h && dsmt_hmap_size(&c->dm) >= LIVE_MAX) {
		c->drv_overflow++;
		return;
	}
	if (!(h = dsmt_hmap_put(&c->dm, ptr, &created))) {
		c->nomem = 1;
		return;
	}
	if (!created)
		dm_drop(c, h);
	h->v = size;
	h->aux = DM_AUX(level == LV_HOST ? 0 : dev1, origin, level, cat, res);
	switch (level) {
	case LV_DEV:
		if (origin == OR_DRV)
			d->used = 1;
		dev_add(d, cat, res, size, seq, ts, ptr);
		break;
	case LV_HOST:
		hp_add(c, size);
		break;
	case LV_IMP:
		d->used = 1;
		d->imported += size;
		break;
	}
}

static int dm_free(struct ctx *c, uint64_t ptr)
{
	struct dsmt_hent old;
	if (!dsmt_hmap_del(&c->dm, ptr, &old))
		return 0;
	dm_drop(c, &old);
	return 1;
}

/* A runtime allocation (api 16-20): the driver event inside the same call,
 * if one was recorded, came first and already counts it (same address);
 * then only its category is the runtime call site's.  Otherwise it counts
 * as a runtime-origin entry. */
static void rt_level_alloc(struct ctx *c, uint64_t seq, const struct dsmt_event *e)
{
	unsigned level, cat = CAT_OTHER;
	switch (e->api) {
	case DSMT_API_CUDA_MALLOC:
	case DSMT_API_CUDA_MALLOC_ASYNC: {
		level = LV_DEV;
		if (site_is_torch(c, e->x)) {
			cat = CAT_TORCH; /* a torch segment: reserved counts it (c->rt) */
			break;
		}
		int k = site_class_now(c, e->x);
		cat = k == CLS_NCCL ? CAT_NCCL : k == CLS_WORKSPACE ? CAT_WORKSPACE : CAT_OTHER;
		break;
	}
	case DSMT_API_CUDA_MALLOC_MANAGED:
		level = LV_DEV;
		cat = CAT_MANAGED;
		break;
	case DSMT_API_CUDA_HOST_ALLOC:
	case DSMT_API_CUDA_HOST_REGISTER:
		level = LV_HOST;
		break;
	default:
		return;
	}
	struct dsmt_hent *h = dsmt_hmap_get(&c->dm, e->ptr);
	if (h && DM_ORIGIN(h->aux) == OR_DRV) { /* the same allocation */
		uint32_t a = h->aux;
		if (DM_LEVEL(a) != LV_DEV || level != LV_DEV || DM_CAT(a) == cat || DM_RES(a))
			return;
		struct dev *d = lvl_dev(c, DM_DEV1(a));
		if (!d)
			return;
		d->cat[DM_CAT(a)] -= h->v;
		d->cat[cat] += h->v;
		h->aux = DM_AUX(DM_DEV1(a), OR_DRV, LV_DEV, cat, 0);
		/* the snapshot taken by the driver event of this very call */
		if (d->snap_live && d->snap_ptr == e->ptr) {
			memcpy(d->snap.cat, d->cat, sizeof(d->snap.cat));
			d->snap.res = d->res;
			d->snap.alloc = d->alloc;
		}
		return;
	}
	dm_put(c, seq, e->ts, e->ptr, e->size, e->dev1, OR_RT, level, cat, 0);
}

/* A runtime free: takes runtime-origin entries only; a driver-origin one
 * goes with the driver free that follows, unless nothing records driver
 * calls now (SOURCE via 0). */
static void rt_level_free(struct ctx *c, const struct dsmt_event *e)
{
	if (e->api < DSMT_API_CUDA_MALLOC || e->api > DSMT_API_CUDA_FREE_HOST)
		return;
	c->last_rt_free_ptr = e->ptr;
	c->last_rt_free_tidx = e->tidx;
	struct dsmt_hent *h = dsmt_hmap_get(&c->dm, e->ptr);
	if (h && (DM_ORIGIN(h->aux) == OR_RT || c->src_via == DSMT_VIA_NONE))
		dm_free(c, e->ptr);
}

static void drv_unk_handle(struct ctx *c, uint64_t seq, uint64_t handle)
{
	if (!c->drv_unk_handle++) {
		c->drv_unk_handle_seq = seq;
		c->drv_unk_handle_h = handle;
	}
}

static struct vhandle *hv_get(struct ctx *c, uint64_t handle, uint32_t *idx)
{
	struct dsmt_hent *h = dsmt_hmap_get(&c->hnd, handle);
	if (!h)
		return NULL;
	*idx = (uint32_t)h->v;
	return &c->hv.v[h->v];
}

/* Drop one reference; the last one takes the handle's bytes. */
static void hv_unref(struct ctx *c, uint32_t idx)
{
	struct vhandle *v = &c->hv.v[idx];
	if (--v->refs)
		return;
	struct dev *d = lvl_dev(c, v->dev1);
	if (v->level == LV_DEV && d)
		dev_sub(d, v->cat, v->res, v->size);
	else if (v->level == LV_HOST)
		c->hp -= v->size;
	dsmt_hmap_del(&c->hnd, v->handle, NULL);
	v->size = c->hv_free; /* on the free list */
	c->hv_free = idx + 1;
}

/* A new handle (CREATE or IMPORT); a live one with the same value is dropped. */
static struct vhandle *hv_new(struct ctx *c, uint64_t handle)
{
	uint32_t idx;
	struct vhandle *v = hv_get(c, handle, &idx);
	if (v) {
		v->refs = 1;
		hv_unref(c, idx);
	}
	if (dsmt_hmap_size(&c->hnd) >= LIVE_MAX) {
		c->drv_overflow++;
		return NULL;
	}
	if (c->hv_free) {
		idx = (uint32_t)(c->hv_free - 1);
		c->hv_free = c->hv.v[idx].size;
	} else {
		struct vhandle *nv = VPUSH(c->hv);
		if (!nv) {
			c->nomem = 1;
			return NULL;
		}
		idx = (uint32_t)(c->hv.n - 1);
	}
	int created;
	struct dsmt_hent *h = dsmt_hmap_put(&c->hnd, handle, &created);
	if (!h) {
		c->nomem = 1;
		return NULL;
	}
	h->v = idx;
	v = &c->hv.v[idx];
	memset(v, 0, sizeof(*v));
	v->handle = handle;
	v->refs = 1;
	return v;
}

static void vm_unmap(struct ctx *c, uint64_t seq, uint64_t va)
{
	struct dsmt_hent m, im;
	if (!dsmt_hmap_del(&c->vmap, va, &m)) {
		if (!c->drv_unk_unmap++) {
			c->drv_unk_unmap_seq = seq;
			c->drv_unk_unmap_ptr = va;
		}
		return;
	}
	if (dsmt_hmap_del(&c->vimp, va, &im)) { /* a mapping of an imported handle */
		struct dev *d = lvl_dev(c, im.aux);
		if (d)
			d->imported -= im.v;
	}
	uint32_t idx;
	if ((m.aux & VM_REF) && hv_get(c, m.v, &idx))
		hv_unref(c, idx);
}

static uint64_t u64_meta(struct ctx *c, const char *key, uint64_t dflt);

/* Module statics: CUPTI delivers them in activity buffers, so their record
 * (its seq) comes up to a flush after the load; aux is the load time
 * (CLOCK_REALTIME ns).  One that came late is listed by the first replay
 * (which applies it where it is), and the replay runs again with the list:
 * then it is applied at its time (timed_due) and skipped here.  1: skip. */
#define TIMED_MAX ((size_t)1 << 20)
static int static_timed(struct ctx *c, const struct dsmt_event *e)
{
	if (!e->tot)
		return 0;
	if (!c->unit_ns) {
		c->t0_ns = u64_meta(c, "start_realtime_ns", 0);
		c->unit_ns = u64_meta(c, "ts_unit_ns", DSMT_TS_UNIT_NS);
		if (!c->unit_ns)
			c->unit_ns = DSMT_TS_UNIT_NS;
	}
	uint64_t t = e->tot > c->t0_ns ? (e->tot - c->t0_ns) / c->unit_ns : 0;
	if (t >= e->ts)
		return 0;
	if (c->timed_known) /* listed (the same test as when it was listed) */
		return c->timed.n <= TIMED_MAX;
	if (c->timed.n >= TIMED_MAX) {
		c->timed_late = 1;
		c->timed.n = TIMED_MAX + 1; /* too many: not placed (all of them, consistently) */
		return 0;
	}
	struct timed *x = VPUSH(c->timed);
	if (!x) {
		c->nomem = 1;
		return 0;
	}
	*x = (struct timed){t, e->ptr, e->size, e->dev1, (uint32_t)(e->api & 0x7f), c->timed.n};
	c->timed_late = 1;
	return 0;
}

/* Apply the listed statics whose time is <= ts (second replay). */
static void timed_due(struct ctx *c, uint64_t seq, uint64_t ts)
{
	while (c->timed_next < c->timed.n && c->timed.v[c->timed_next].t <= ts) {
		const struct timed *x = &c->timed.v[c->timed_next++];
		if (x->op == DSMT_DRV_STATIC)
			dm_put(c, seq, x->t, x->ptr, x->size, x->dev1, OR_DRV, LV_DEV, CAT_STATICS, 0);
		else if (!dm_free(c, x->ptr) && !c->drv_unk_free++) {
			c->drv_unk_free_seq = seq;
			c->drv_unk_free_ptr = x->ptr;
		}
	}
}

static void replay_drv(struct ctx *c, uint64_t seq, const struct dsmt_event *e)
{
	unsigned op = e->api & 0x7f, via = e->flags;
	int under_rt = (via & DSMT_VIA_UNDER_RT) != 0, res;
	c->has_drv = 1;
	c->drv_ops[op]++;
	uint32_t idx;
	struct vhandle *v;
	switch (op) {
	case DSMT_DRV_ALLOC:
	case DSMT_DRV_ALLOC_ASYNC: {
		unsigned cat = drv_cat(c, e->x, under_rt, &res);
		dm_put(c, seq, e->ts, e->ptr, e->size, e->dev1, OR_DRV, LV_DEV, cat, res);
		if (cat == CAT_WORKSPACE && c->attrib && e->tidx < c->thr.n)
			c->thr.v[e->tidx].ws_py = e->pystack + 1; /* attribution: AR_LIBWS */
		break;
	}
	case DSMT_DRV_ALLOC_MANAGED:
		dm_put(c, seq, e->ts, e->ptr, e->size, e->dev1, OR_DRV, LV_DEV, CAT_MANAGED, 0);
		break;
	case DSMT_DRV_STATIC:
		if (static_timed(c, e))
			break;
		dm_put(c, seq, e->ts, e->ptr, e->size, e->dev1, OR_DRV, LV_DEV, CAT_STATICS, 0);
		break;
	case DSMT_DRV_ALLOC_HOST:
	case DSMT_DRV_HOST_REGISTER:
		dm_put(c, seq, e->ts, e->ptr, e->size, e->dev1, OR_DRV, LV_HOST, CAT_OTHER, 0);
		break;
	case DSMT_DRV_IPC_OPEN:
		dm_put(c, seq, e->ts, e->ptr, e->size, e->dev1, OR_DRV, LV_IMP, CAT_OTHER, 0);
		break;
	case DSMT_DRV_STATIC_FREE:
		if (static_timed(c, e))
			break;
		/* fall through */
	case DSMT_DRV_FREE:
	case DSMT_DRV_FREE_ASYNC:
	case DSMT_DRV_FREE_HOST:
	case DSMT_DRV_HOST_UNREGISTER:
	case DSMT_DRV_IPC_CLOSE:
		if (dm_free(c, e->ptr) || e->ptr == 0)
			break;
		/* the runtime free of this very call took it (its allocation was
		 * recorded by the runtime only, while no driver source ran) */
		if (under_rt && e->ptr == c->last_rt_free_ptr && e->tidx == c->last_rt_free_tidx)
			break;
		if (c->postpause) { /* perhaps allocated while paused */
			c->pause_rt_unk_free++;
			break;
		}
		if (!c->drv_unk_free++) {
			c->drv_unk_free_seq = seq;
			c->drv_unk_free_ptr = e->ptr;
		}
		break;
	case DSMT_DRV_CREATE: { /* ptr = handle, aux = location type */
		unsigned level = e->tot == 1 ? LV_DEV : e->tot >= 2 && e->tot <= 4 ? LV_HOST : e->dev1 ? LV_DEV : LV_NONE;
		struct dev *d = NULL;
		if ((level == LV_DEV && !(d = lvl_dev(c, e->dev1))) || level == LV_NONE) {
			drv_nodev(c, seq);
			level = LV_NONE; /* tracked (references), not counted */
		}
		if (!(v = hv_new(c, e->ptr)))
			break;
		v->size = e->size;
		v->dev1 = e->dev1;
		v->level = (uint8_t)level;
		if (level == LV_DEV) {
			v->cat = (uint8_t)drv_cat(c, e->x, under_rt, &res);
			v->res = (uint8_t)res;
			d->used = 1;
			dev_add(d, v->cat, res, e->size, seq, e->ts, e->ptr);
		} else if (level == LV_HOST) {
			hp_add(c, e->size);
		}
		break;
	}
	case DSMT_DRV_IMPORT: /* ptr = handle; its size shows at its mappings */
		if ((v = hv_new(c, e->ptr))) {
			v->dev1 = e->dev1;
			v->level = LV_IMP;
		}
		break;
	case DSMT_DRV_RETAIN:
		if ((v = hv_get(c, e->ptr, &idx)) && v->refs < UINT32_MAX)
			v->refs++;
		else if (!v)
			drv_unk_handle(c, seq, e->ptr);
		break;
	case DSMT_DRV_RELEASE:
		if (hv_get(c, e->ptr, &idx))
			hv_unref(c, idx);
		else
			drv_unk_handle(c, seq, e->ptr);
		break;
	case DSMT_DRV_MAP: { /* ptr = va, aux = handle */
		if (dsmt_hmap_get(&c->vmap, e->ptr)) /* mapped again without an unmap */
			vm_unmap(c, seq, e->ptr);
		if (dsmt_hmap_size(&c->vmap) >= LIVE_MAX) {
			c->drv_overflow++;
			break;
		}
		int created;
		struct dsmt_hent *m = dsmt_hmap_put(&c->vmap, e->ptr, &created);
		if (!m) {
			c->nomem = 1;
			break;
		}
		m->v = e->tot;
		m->aux = 0;
		if (!(v = hv_get(c, e->tot, &idx))) {
			drv_unk_handle(c, seq, e->tot);
			break;
		}
		if (v->refs < UINT32_MAX) {
			v->refs++;
			m->aux = VM_REF;
		}
		if (v->level == LV_IMP) { /* imported bytes, on the mapping's device */
			unsigned dev1 = e->dev1 ? e->dev1 : v->dev1;
			struct dev *d = lvl_dev(c, dev1);
			struct dsmt_hent *im = d ? dsmt_hmap_put(&c->vimp, e->ptr, &created) : NULL;
			if (!d) {
				drv_nodev(c, seq);
			} else if (!im) {
				c->nomem = 1;
			} else {
				im->v = e->size;
				im->aux = dev1;
				d->imported += e->size;
				d->used = 1;
			}
		}
		break;
	}
	case DSMT_DRV_UNMAP:
		vm_unmap(c, seq, e->ptr);
		break;
	default: /* SET_ACCESS, RESERVE, ADDR_FREE (address space only), pools,
		  * contexts, ops this decoder does not know: counted only */
		break;
	}
}

/* ---- NVML samples: replayed before event next_seq.  The driver level
 * changes only at DRV and runtime events, so pending samples are replayed
 * there (and at the end): never on the torch fast path. ---- */

static int pend_less(struct ctx *c, uint32_t a, uint32_t b)
{
	uint64_t x = c->samples.v[a].next_seq, y = c->samples.v[b].next_seq;
	return x < y || (x == y && a < b);
}

static void sample_apply(struct ctx *c, struct sample *s)
{
	struct dev *d = s->dev1 && s->dev1 <= DEV1_MAX ? c->dev[s->dev1] : NULL;
	s->dev_at = d ? d->dlev : 0;
}

/* Replay the pending samples whose next_seq <= seq (a min-heap in pend). */
static void samples_due(struct ctx *c, uint64_t seq)
{
	uint32_t *h = c->pend.v;
	while (c->pend.n && c->samples.v[h[0]].next_seq <= seq) {
		sample_apply(c, &c->samples.v[h[0]]);
		h[0] = h[--c->pend.n];
		for (size_t i = 0;;) { /* sift down */
			size_t l = 2 * i + 1, m = i;
			if (l < c->pend.n && pend_less(c, h[l], h[m]))
				m = l;
			if (l + 1 < c->pend.n && pend_less(c, h[l + 1], h[m]))
				m = l + 1;
			if (m == i)
				break;
			uint32_t t = h[i];
			h[i] = h[m];
			h[m] = t;
			i = m;
		}
	}
	c->sample_due = c->pend.n ? c->samples.v[h[0]].next_seq : UINT64_MAX;
}

static void sample_add(struct ctx *c, const struct sample *in)
{
	if (c->samples.n >= SAMPLES_MAX) {
		c->samples_dropped++;
		return;
	}
	struct sample *s = VPUSH(c->samples);
	if (!s || vec_grow((void **)&c->pend.v, &c->pend.cap, c->pend.n + 1, sizeof(*c->pend.v))) {
		if (s)
			c->samples.n--;
		c->nomem = 1;
		return;
	}
	*s = *in;
	/* every event before c->ro.next is replayed: due samples first */
	samples_due(c, c->ro.next);
	if (s->next_seq <= c->ro.next) { /* already passed: here */
		sample_apply(c, s);
		return;
	}
	uint32_t *h = c->pend.v;
	size_t i = c->pend.n++;
	h[i] = (uint32_t)(c->samples.n - 1);
	while (i && pend_less(c, h[i], h[(i - 1) / 2])) { /* sift up */
		uint32_t t = h[i];
		h[i] = h[(i - 1) / 2];
		h[(i - 1) / 2] = t;
		i = (i - 1) / 2;
	}
	c->sample_due = c->samples.v[h[0]].next_seq;
}

static void replay_other(struct ctx *c, uint64_t seq, const struct dsmt_event *e);
static void replay_logged(struct ctx *c, uint64_t seq, const struct dsmt_event *e);

/* ---- the timeline (--perfetto) ---------------------------------------- */

static struct dsmt_tl_ev *tl_put(struct ctx *c, uint64_t ts, unsigned op, unsigned track, unsigned dev1,
				 uint64_t v)
{
	struct dsmt_tl_ev *t = VPUSH(c->tl);
	if (!t) {
		c->nomem = 1;
		return NULL;
	}
	*t = (struct dsmt_tl_ev){.ts_ns = ts, .v = v, .op = (uint8_t)op, .track = (uint8_t)track,
				 .dev1 = (uint8_t)dev1};
	return t;
}

/* After each event: the levels that changed */
static __attribute__((noinline)) void tl_levels(struct ctx *c, uint64_t ts)
{
	for (unsigned i = 1; i <= c->maxdev1; i++) {
		struct dev *d = c->dev[i];
		if (!d)
			continue;
		const uint64_t v[4] = {d->alloc, d->res, d->dlev, d->imported};
		for (unsigned k = 0; k < 4; k++)
			if (v[k] != d->tl_last[k]) {
				d->tl_last[k] = v[k];
				tl_put(c, ts, DSMT_TL_SET, DSMT_TL_ALLOCATED + k, i, v[k]);
			}
	}
	if (c->hp != c->tl_hp) {
		c->tl_hp = c->hp;
		tl_put(c, ts, DSMT_TL_SET, DSMT_TL_PINNED, 0, c->hp);
	}
}

/* A tensor block of attribution record i allocated: its ADD (category
 * decided at its free, or at the end) */
static void tl_block(struct ctx *c, uint64_t ts, unsigned dev1, uint32_t i, uint64_t size)
{
	if (!i || vec_grow((void **)&c->tl_ar.v, &c->tl_ar.cap, (size_t)i + 1, sizeof(*c->tl_ar.v))) {
		if (i)
			c->nomem = 1;
		tl_put(c, ts, DSMT_TL_ADD, DSMT_TL_CAT0 + DSMT_CAT_OTHER, dev1, size);
		return;
	}
	while (c->tl_ar.n <= i)
		c->tl_ar.v[c->tl_ar.n++] = 0;
	if (tl_put(c, ts, DSMT_TL_ADD, 0xff, dev1, size))
		c->tl_ar.v[i] = c->tl.n;
}

/* Block r (record i, size bytes) leaves (freed, or replaced): its category
 * now, for its ADD and this SUB */
static void tl_unblock(struct ctx *c, uint64_t ts, const struct dsmt_event *e, struct arec *r, uint32_t i,
		       uint64_t size)
{
	unsigned cat = DSMT_CAT_OTHER;
	if (i && i < c->tl_ar.n && c->tl_ar.v[i]) {
		const struct thread *t = &c->thr.v[e->tidx];
		unsigned ph_free = phase_of(c, c->ph, e->pystack, t, t->nvk, c->bw_seen, c->cur_fwd), ph;
		cat = ar_category(c, r, size, ph_free, &ph);
		c->tl.v[c->tl_ar.v[i] - 1].track = (uint8_t)(DSMT_TL_CAT0 + cat);
		c->tl_ar.v[i] = 0;
	}
	tl_put(c, ts, DSMT_TL_SUB, DSMT_TL_CAT0 + cat, r->dev1, size);
}

/* An NVTX event on the timeline (id: domain or range id) */
static void tl_nvtx(struct ctx *c, const struct dsmt_event *e, unsigned op, uint64_t id)
{
	struct dsmt_tl_ev *t = tl_put(c, e->ts, op, 0, 0, op == DSMT_TL_POP || op == DSMT_TL_END ? 0 : e->x);
	if (t) {
		t->id = id;
		t->thread = e->tidx;
	}
}

/* A block without a record (a cudaMallocAsync tensor: `other`) */
static void tl_other(struct ctx *c, uint64_t ts, unsigned dev1, uint64_t size, int add)
{
	tl_put(c, ts, add ? DSMT_TL_ADD : DSMT_TL_SUB, DSMT_TL_CAT0 + DSMT_CAT_OTHER, dev1, size);
}

/* Replay one event, in seq order. */
static inline __attribute__((always_inline)) void replay(struct ctx *c, uint64_t seq, const struct dsmt_event *e)
{
	if (__builtin_expect(c->series_on | c->tsnap_on, 0)) {
		replay_logged(c, seq, e);
		return;
	}
	c->events++;
	if (e->ts > c->last_ts)
		c->last_ts = e->ts;
	if (__builtin_expect(e->api == DSMT_API_TORCH, 1)) /* api is 0 for all but ALLOC/FREE */
		replay_torch(c, seq, e);
	else
		replay_other(c, seq, e);
}

/* A runtime ALLOC: torch segments (reserved) */
static void replay_rt_alloc(struct ctx *c, uint64_t seq, const struct dsmt_event *e)
{
	/* torch's segments: cudaMalloc from libc10_cuda; with
	 * backend:cudaMallocAsync every tensor is a cudaMallocAsync from there
	 * and that allocator reports nothing to c10's profiler hook, so those
	 * count as allocated too (bit 17) */
	int torch = (e->api == DSMT_API_CUDA_MALLOC || e->api == DSMT_API_CUDA_MALLOC_ASYNC) &&
		    site_is_torch_now(c, e->x);
	int tensor = torch && e->api == DSMT_API_CUDA_MALLOC_ASYNC;
	int created;
	struct dsmt_hent *h = dsmt_hmap_put(&c->rt, e->ptr, &created);
	if (!h) {
		c->nomem = 1;
		return;
	}
	if (!created && (h->aux >> 16) & 1) { /* replaced a live torch segment */
		struct dev *od = c->dev[h->aux & 0xff];
		if (od) {
			od->res -= h->v;
			if ((h->aux >> 17) & 1) {
				od->alloc -= h->v;
				if (c->tl_on)
					tl_other(c, e->ts, h->aux & 0xff, h->v, 0);
			}
		}
	}
	h->v = e->size;
	h->aux = e->dev1 | (uint32_t)e->api << 8 | (uint32_t)torch << 16 | (uint32_t)tensor << 17;
	if (torch) {
		struct dev *d = getdev(c, e->dev1, seq);
		if (!d) {
			h->aux &= ~(3u << 16);
			return;
		}
		d->used = 1;
		d->res += e->size;
		if (d->res > d->pk_res)
			d->pk_res = d->res;
		if (tensor) {
			d->alloc += e->size;
			d->allocs++;
			if (c->tl_on)
				tl_other(c, e->ts, e->dev1, e->size, 1);
			if (d->alloc > d->pk_alloc) {
				d->pk_alloc = d->alloc;
				if (c->attrib) /* no record: its bytes are `other` */
					attrib_peak(c, d, seq, e->ts, e->tidx, -1);
			}
		}
	}
}

static void replay_rt_free(struct ctx *c, uint64_t seq, const struct dsmt_event *e)
{
	struct dsmt_hent old;
	if (dsmt_hmap_del(&c->rt, e->ptr, &old)) {
		if ((old.aux >> 16) & 1) {
			struct dev *d = c->dev[old.aux & 0xff];
			if (d) {
				d->res -= old.v;
				if ((old.aux >> 17) & 1) {
					d->alloc -= old.v;
					d->frees++;
					if (c->tl_on)
						tl_other(c, e->ts, old.aux & 0xff, old.v, 0);
				}
			}
		}
	} else if (e->ptr != 0 && c->postpause) {
		c->pause_rt_unk_free++; /* perhaps allocated while paused */
	} else if (e->ptr != 0 && !c->rt_unk_free++) {
		c->rt_unk_seq = seq;
		c->rt_unk_ptr = e->ptr;
	}
}

/* An OOM event: the allocator's totals and ours, and with attribution the
 * live tensor bytes of its device by category, as known at that moment
 * (ar_category has no side effects; ar_live_cat's caching is left alone so
 * the rows come out the same with or without OOMs). */
static void bk_fill(uint64_t *cat, uint64_t *stale, uint64_t level, uint64_t res);

static void oom_report(struct ctx *c, uint64_t seq, const struct dsmt_event *e)
{
	if (c->oomv.n >= DSMT_OOM_MAX)
		return;
	struct dsmt_oom *o = VPUSH(c->oomv);
	if (!o) {
		c->nomem = 1;
		return;
	}
	memset(o, 0, sizeof(*o));
	o->seq = seq;
	o->ts_ns = e->ts; /* units until build_rows converts */
	o->device = (int)e->dev1 - 1;
	o->requested = e->size;
	o->torch_alloc = e->tot;
	o->torch_res = e->res;
	struct dev *d = e->dev1 && e->dev1 <= c->maxdev1 ? c->dev[e->dev1] : NULL;
	if (!d)
		return;
	o->alloc = d->alloc;
	o->res = d->res;
	if (!c->attrib)
		return;
	/* mark its device's live blocks not marked at an earlier OOM; each is
	 * categorised when freed, with its lifetime (oom_freed), or at the end
	 * of the trace (oom_finish) -- at the OOM itself an activation, say,
	 * cannot yet be told from anything else */
	size_t it = 0;
	struct dsmt_hent *h;
	while ((h = dsmt_hmap_next(&d->tens, &it)))
		if (!c->ar.v[h->aux].oom)
			c->ar.v[h->aux].oom = (uint8_t)c->oomv.n; /* <= DSMT_OOM_MAX */
	o->has_bk = 1;
}

/* The end of the trace: the reported OOMs' blocks still live are
 * categorised as the rows' live blocks are; then other and cached as for a
 * row */
static void oom_finish(struct ctx *c)
{
	if (!c->oomv.n)
		return;
	for (size_t i = 1; i < c->ar.n; i++) {
		struct arec *r = &c->ar.v[i];
		if (!(r->flags & AR_LIVE) || !r->oom)
			continue;
		unsigned ph;
		oom_add(c, r, r->size, ar_live_cat(c, r, r->size, &ph));
	}
	for (size_t k = 0; k < c->oomv.n; k++)
		if (c->oomv.v[k].has_bk)
			bk_fill(c->oomv.v[k].bk.cat, NULL, c->oomv.v[k].alloc, c->oomv.v[k].res);
}

/* Every other event: runtime allocations, driver level, OOM, NVTX, LOST,
 * PAUSE/RESUME. */
static void replay_other(struct ctx *c, uint64_t seq, const struct dsmt_event *e)
{
	if (seq >= c->sample_due) /* before the driver level moves on */
		samples_due(c, seq);
	if (c->timed_next < c->timed.n && c->timed_known)
		timed_due(c, seq, e->ts);
	switch (e->type) {
	case DSMT_REC_ALLOC:
		replay_rt_alloc(c, seq, e);
		rt_level_alloc(c, seq, e);
		break;
	case DSMT_REC_FREE:
		replay_rt_free(c, seq, e);
		rt_level_free(c, e);
		break;
	case DSMT_REC_DRV:
		replay_drv(c, seq, e);
		break;
	case DSMT_REC_SOURCE: {
		c->has_drv = 1;
		c->src_via = e->ptr;
		if (c->srcs.n >= SRC_MAX) {
			c->srcs_dropped++;
			break;
		}
		struct srcrec *r = VPUSH(c->srcs);
		if (!r) {
			c->nomem = 1;
			break;
		}
		*r = (struct srcrec){seq, e->ts, e->ptr, e->size, e->x};
		break;
	}
	case DSMT_REC_OOM:
		c->ooms++;
		oom_report(c, seq, e);
		if (c->tl_on)
			tl_put(c, e->ts, DSMT_TL_OOM, 0, e->dev1, e->size);
		break;
	case DSMT_REC_LOST:
		c->lost += e->size;
		break;
	case DSMT_REC_PAUSE: /* one per device (dev1 0: none known): the first starts the pause */
		if (!c->paused) {
			struct stretch *st = VPUSH(c->stretches);
			if (!st) {
				c->nomem = 1;
				break;
			}
			*st = (struct stretch){seq, UINT64_MAX};
			c->paused = 1;
			if (!c->pauses++)
				c->pause_seq = seq;
		}
		break;
	case DSMT_REC_RESUME: /* one per device with known totals (dev1 0: none) */
		if (c->paused) { /* the first of the group ends the pause */
			c->stretches.v[c->stretches.n - 1].to_seq = seq;
			c->paused = 0;
			c->epoch++;
		} else if (!c->postpause) {
			/* a RESUME without a PAUSE before it: the process was paused
			 * before its first allocation.  No paused interval, but the
			 * devices resync all the same.  (Later RESUMEs without a PAUSE
			 * belong to the group before them.) */
			c->epoch++;
		}
		if (!c->postpause) { /* torch events take replay_torch_post from here on */
			c->postpause = 1;
			memset(c->fast, 0, sizeof(c->fast));
		}
		if (e->dev1 && e->dev1 <= DEV1_MAX) {
			/* the allocator's totals at the resume: the numbers until the
			 * device's first torch event, which resyncs it */
			struct dev *d = getdev(c, e->dev1, seq);
			if (!d || d->synced == c->epoch)
				break;
			d->alloc = e->tot;
			d->res = e->x;
			if (d->alloc > d->pk_alloc) {
				d->pk_alloc = d->alloc;
				if (c->attrib)
					attrib_peak(c, d, seq, e->ts, e->tidx, -1);
			}
			if (d->res > d->pk_res)
				d->pk_res = d->res;
			if (d->alloc || d->res)
				d->used = 1;
		}
		break;
	case DSMT_REC_NVTX_PUSH: {
		struct domstack *s = domstack(c, &c->thr.v[e->tidx], e->ptr);
		if (!s)
			break;
		if (s->n >= NVTX_DEPTH_MAX) {
			s->overflow++;
			c->nvtx_overflow++;
			break;
		}
		if (s->n == s->cap) {
			uint32_t nc = s->cap ? s->cap * 2 : 8;
			struct nvtx_ent *nv = realloc(s->v, nc * sizeof(*nv));
			if (!nv) {
				c->nomem = 1;
				break;
			}
			s->v = nv;
			s->cap = nc;
		}
		struct thread *t = &c->thr.v[e->tidx];
		unsigned k = name_class(c, e->x);
		s->v[s->n++] = (struct nvtx_ent){e->x, seq, e->ts, t->nvk, t->nvtop};
		if (c->tl_on)
			tl_nvtx(c, e, DSMT_TL_PUSH, e->ptr);
		unsigned ph = 0; /* the process-wide phase from here (attribution) */
		if ((k & (NC_FWD | NC_BWD)) && is_main_thread(c, e->tidx)) {
			if (k & NC_FWD) { /* a possible step boundary */
				struct fwd *f = VPUSH(c->fwds);
				if (!f) {
					c->nomem = 1;
					break;
				}
				*f = (struct fwd){seq, e->ts, 0};
				k |= NC_MARKER;
			} else if (c->fwds.n) {
				c->fwds.v[c->fwds.n - 1].backward = 1;
			}
			ph = k & NC_FWD ? DSMT_PH_FORWARD : DSMT_PH_BACKWARD;
		}
		if (k & NC_MARKER) {
			close_segment(c, seq, e->ts);
			if (!ph)
				ph = DSMT_PH_FORWARD; /* a step marker: a step begins */
		}
		if (c->attrib) {
			struct attrib_ev ev = attrib_unpack(k >> 8);
			t->nvk = attrib_nvtx_push(t->nvk, &ev);
			nv_push(c, t, e->x);
			if (ph)
				set_phase(c, seq, ph, (k & NC_FWD) && ph == DSMT_PH_FORWARD ? (uint32_t)c->fwds.n : 0);
		}
		break;
	}
	case DSMT_REC_NVTX_POP: {
		struct domstack *s = domstack(c, &c->thr.v[e->tidx], e->ptr);
		if (!s)
			break;
		if (s->overflow) {
			s->overflow--;
			break;
		}
		if (!s->n) {
			c->pop_empty++;
			break;
		}
		struct nvtx_ent top = s->v[--s->n];
		if (c->tl_on)
			tl_nvtx(c, e, DSMT_TL_POP, e->ptr);
		unsigned k = name_class(c, top.name);
		if (k & NC_MARKER)
			end_range(c, top.seq, top.ts, seq, e->ts);
		if (c->attrib) {
			struct thread *t = &c->thr.v[e->tidx];
			t->nvk = top.prev_nvk;
			t->nvtop = top.prev_top;
			if (k & NC_MARKER) /* the next step's stretch begins */
				set_phase(c, seq, DSMT_PH_FORWARD, 0);
			else if ((k & NC_BWD) && is_main_thread(c, e->tidx))
				set_phase(c, seq, DSMT_PH_STEP, c->cur_fwd); /* past backward: the optimizer */
		}
		break;
	}
	case DSMT_REC_NVTX_START:
		if (c->tl_on)
			tl_nvtx(c, e, DSMT_TL_START, e->size);
		if (name_matches(c, e->x)) {
			int cr;
			struct dsmt_hent *a = dsmt_hmap_put(&c->open_seq, e->size, &cr);
			struct dsmt_hent *b = dsmt_hmap_put(&c->open_ts, e->size, &cr);
			if (!a || !b) {
				c->nomem = 1;
				break;
			}
			a->v = seq;
			b->v = e->ts;
			close_segment(c, seq, e->ts);
			if (c->attrib)
				set_phase(c, seq, DSMT_PH_FORWARD, 0);
		}
		break;
	case DSMT_REC_NVTX_END: {
		if (c->tl_on)
			tl_nvtx(c, e, DSMT_TL_END, e->size);
		struct dsmt_hent a, b;
		if (dsmt_hmap_del(&c->open_seq, e->size, &a) && dsmt_hmap_del(&c->open_ts, e->size, &b)) {
			end_range(c, a.v, b.v, seq, e->ts);
			if (c->attrib)
				set_phase(c, seq, DSMT_PH_FORWARD, 0);
		}
		break;
	}
	case DSMT_REC_NVTX_MARK:
		if (c->tl_on)
			tl_nvtx(c, e, DSMT_TL_MARK, 0);
		if (name_matches(c, e->x)) {
			close_segment(c, seq, e->ts);
			struct mark *m = VPUSH(c->marks);
			if (!m) {
				c->nomem = 1;
				break;
			}
			*m = (struct mark){seq, e->ts};
			if (c->attrib)
				set_phase(c, seq, DSMT_PH_FORWARD, 0);
		}
		break;
	default:
		break;
	}
	if (c->tl_on) /* the levels it changed (torch events: in their attribution paths) */
		tl_levels(c, e->ts);
}


/* ---- attribution: groups, segments ----------------------------------- */

/* ---- the replay's log (--html, --torch-snapshot) ---------------------
 * Every event goes through here instead of replay()'s fast path: the
 * level changes it made (series: a tensor block's category is known at its
 * free, or at the end of the run), and the allocator events in torch's
 * terms (blocks with the group of their frames, torch's segments). */

#define HL_MAX ((size_t)1 << 31) /* entries of either log */
#define TS_GROUP DSMT_CAT_NONE   /* group_of's category for a torch-snapshot stack */

static uint64_t hl_ns(struct ctx *c, uint64_t ts)
{
	if (!c->hl_unit) {
		c->hl_t0 = u64_meta(c, "start_realtime_ns", 0);
		c->hl_unit = u64_meta(c, "ts_unit_ns", DSMT_TS_UNIT_NS);
		if (!c->hl_unit)
			c->hl_unit = DSMT_TS_UNIT_NS;
	}
	return c->hl_t0 + ts * c->hl_unit;
}

static uint32_t hl_push(struct ctx *c, uint64_t ts, unsigned dev1, unsigned op, uint64_t size, uint64_t lvl,
			uint32_t blk)
{
	struct dsmt_tlent *t = c->hl.n < HL_MAX ? VPUSH(c->hl) : NULL;
	if (!t) {
		c->nomem = 1;
		return UINT32_MAX;
	}
	*t = (struct dsmt_tlent){ts, size, lvl, blk, (uint8_t)dev1, (uint8_t)op, DSMT_CAT_OTHER, DSMT_CAT_OTHER};
	return (uint32_t)(c->hl.n - 1);
}

/* Block `link` (an A entry) has category cat in the open interval: its A
 * entry's when allocated in it, else a C entry at the interval's start
 * when it differs from the last interval's (pad: the category so far). */
static void hl_recat(struct ctx *c, uint32_t link, unsigned cat)
{
	struct dsmt_tlent *a = &c->hl.v[link];
	if (link >= c->hl_seg_start) {
		a->cat = a->pad = (uint8_t)cat;
		return;
	}
	if (a->pad == cat)
		return;
	struct dsmt_tlent *m = c->hlch.n < HL_MAX ? VPUSH(c->hlch) : NULL;
	if (!m) {
		c->nomem = 1;
		return;
	}
	*m = (struct dsmt_tlent){a->ts_ns, a->size, c->hl_seg_start, link, a->dev1, DSMT_TL_C, (uint8_t)cat, a->pad};
	a->pad = (uint8_t)cat;
}

/* An interval closed (after attrib_close_seg decided the category of every
 * live block): those categories hold for it */
static void hl_close(struct ctx *c)
{
	for (size_t i = 1; c->attrib && i < c->ar.n && i < c->hl_ar.n; i++) {
		const struct arec *r = &c->ar.v[i];
		if ((r->flags & (AR_LIVE | AR_CAT)) == (AR_LIVE | AR_CAT) && c->hl_ar.v[i])
			hl_recat(c, c->hl_ar.v[i] - 1, r->cat);
	}
	c->hl_seg_start = c->hl.n;
}

static void tev_push(struct ctx *c, uint64_t ts, unsigned dev1, unsigned action, uint64_t addr, uint64_t size,
		     uint32_t stack)
{
	struct dsmt_tev *t = c->tev.n < HL_MAX ? VPUSH(c->tev) : NULL;
	if (!t) {
		c->nomem = 1;
		return;
	}
	*t = (struct dsmt_tev){ts, addr, size, stack, (uint8_t)action, (int)dev1 - 1};
}

/* the levels of device dev1 (0: pinned host) that moved since last logged */
static void hl_levels(struct ctx *c, uint64_t ts, unsigned dev1)
{
	if (!dev1) {
		if (c->hp != c->hl_hp)
			hl_push(c, ts, 0, DSMT_TL_H, 0, c->hl_hp = c->hp, 0);
		return;
	}
	const struct dev *d = c->dev[dev1];
	if (!d)
		return;
	if (d->alloc != c->hl_alloc[dev1])
		hl_push(c, ts, dev1, DSMT_TL_L, 0, c->hl_alloc[dev1] = d->alloc, 0);
	if (d->res != c->hl_res[dev1])
		hl_push(c, ts, dev1, DSMT_TL_R, 0, c->hl_res[dev1] = d->res, 0);
	if (d->dlev != c->hl_dev[dev1])
		hl_push(c, ts, dev1, DSMT_TL_D, 0, c->hl_dev[dev1] = d->dlev, 0);
}

static __attribute__((noinline)) void replay_logged(struct ctx *c, uint64_t seq, const struct dsmt_event *e)
{
	const int torch = e->api == DSMT_API_TORCH;
	const unsigned d1 = e->dev1;
	uint32_t link = UINT32_MAX, fstack = UINT32_MAX;
	uint64_t fsize = e->size;
	unsigned segfree = 0; /* a torch segment's free: 1 + its device's dev1 */
	if (torch && e->type == DSMT_REC_FREE && d1 && d1 <= DEV1_MAX && c->dev[d1]) {
		/* before the replay forgets it: the block, its allocation's entry,
		 * its category now that its lifetime is known */
		struct dsmt_hent *h = dsmt_hmap_get(&c->dev[d1]->tens, e->ptr);
		if (h && c->attrib && h->aux) {
			struct arec *r = &c->ar.v[h->aux];
			fsize = h->v;
			if (c->tsnap_on)
				fstack = group_of(c, r->site, r->pystack, r->stack, TS_GROUP);
			if (c->series_on && h->aux < c->hl_ar.n && c->hl_ar.v[h->aux]) {
				link = c->hl_ar.v[h->aux] - 1;
				attrib_thread_seen(c, seq, e);
				const struct thread *t = &c->thr.v[e->tidx];
				unsigned ph, ph_free = phase_of(c, c->ph, e->pystack, t, t->nvk, c->bw_seen, c->cur_fwd);
				hl_recat(c, link, ar_category(c, r, h->v, ph_free, &ph));
				c->hl_ar.v[h->aux] = 0;
			}
		} else if (h) {
			fsize = h->v;
		}
	} else if (!torch && e->type == DSMT_REC_FREE && c->tsnap_on) {
		struct dsmt_hent *h = dsmt_hmap_get(&c->rt, e->ptr);
		if (h && ((h->aux >> 16) & 3) == 1) { /* a torch segment (not a cudaMallocAsync tensor) */
			segfree = 1 + (h->aux & 0xff);
			fsize = h->v;
		}
	}

	c->events++;
	if (e->ts > c->last_ts)
		c->last_ts = e->ts;
	if (torch)
		replay_torch(c, seq, e);
	else
		replay_other(c, seq, e);
	if (c->nomem)
		return;

	uint64_t ts = hl_ns(c, e->ts);
	if (torch && d1 && d1 <= DEV1_MAX && c->dev[d1]) {
		struct dev *d = c->dev[d1];
		if (e->type == DSMT_REC_ALLOC) {
			struct dsmt_hent *h = dsmt_hmap_get(&d->tens, e->ptr);
			if (c->series_on) {
				uint32_t i = hl_push(c, ts, d1, DSMT_TL_A, e->size, d->alloc, 0);
				c->hl_alloc[d1] = d->alloc;
				if (h && c->attrib && h->aux && i != UINT32_MAX) {
					if (vec_grow((void **)&c->hl_ar.v, &c->hl_ar.cap, c->ar.n, sizeof(*c->hl_ar.v))) {
						c->nomem = 1;
						return;
					}
					while (c->hl_ar.n < c->ar.n)
						c->hl_ar.v[c->hl_ar.n++] = 0;
					c->hl_ar.v[h->aux] = i + 1;
				}
			}
			if (c->tsnap_on)
				tev_push(c, ts, d1, DSMT_TA_ALLOC, e->ptr, e->size,
					 group_of(c, e->x, e->pystack, e->stack, TS_GROUP));
		} else {
			if (c->series_on) {
				hl_push(c, ts, d1, DSMT_TL_F, fsize, d->alloc, link);
				c->hl_alloc[d1] = d->alloc;
			}
			if (c->tsnap_on)
				tev_push(c, ts, d1, DSMT_TA_FREE, e->ptr, fsize, fstack);
		}
		if (c->series_on)
			hl_levels(c, ts, d1);
		return;
	}
	if (torch) /* without a device: counted, nothing moved */
		return;
	if (c->tsnap_on) {
		if (e->type == DSMT_REC_ALLOC) {
			struct dsmt_hent *h = dsmt_hmap_get(&c->rt, e->ptr);
			if (h && ((h->aux >> 16) & 3) == 1)
				tev_push(c, ts, h->aux & 0xff, DSMT_TA_SEG_ALLOC, e->ptr, e->size,
					 group_of(c, e->x, e->pystack, e->stack, TS_GROUP));
		} else if (e->type == DSMT_REC_FREE && segfree) {
			tev_push(c, ts, segfree - 1, DSMT_TA_SEG_FREE, e->ptr, fsize, UINT32_MAX);
		} else if (e->type == DSMT_REC_OOM && e->dev1 && e->dev1 <= DEV1_MAX) {
			tev_push(c, ts, e->dev1, DSMT_TA_OOM, 0, e->size, group_of(c, e->x, e->pystack, e->stack, TS_GROUP));
		}
	}
	if (c->series_on)
		for (unsigned i = 0; i <= c->maxdev1; i++)
			hl_levels(c, ts, i);
}

static uint64_t gkey_hash(const struct gkey *k)
{
	uint64_t h = k->site * 0x9E3779B97F4A7C15ULL;
	h ^= (h >> 29) ^ k->pystack * 0xBF58476D1CE4E5B9ULL;
	h ^= (h >> 31) ^ k->stack * 0x94D049BB133111EBULL;
	h ^= (h >> 30) ^ (uint64_t)k->cat * 0xD6E8FEB86659FD93ULL;
	return h ? h : 1;
}

/* The group of (site, Python stack, native stack, category), interned */
static uint32_t group_of(struct ctx *c, uint64_t site, uint64_t pystack, uint64_t stack, unsigned cat)
{
	struct gkey k = {site, pystack, stack, cat};
	for (uint64_t h = gkey_hash(&k);; h = h * 0x2545F4914F6CDD1DULL + 1) {
		if (!h)
			h = 1;
		int created;
		struct dsmt_hent *e = dsmt_hmap_put(&c->gmap, h, &created);
		if (!e) {
			c->nomem = 1;
			return 0;
		}
		if (!created) {
			const struct gkey *o = &c->gk.v[e->v];
			if (o->site == k.site && o->pystack == k.pystack && o->stack == k.stack && o->cat == k.cat)
				return (uint32_t)e->v;
			continue;
		}
		struct gkey *n = VPUSH(c->gk);
		struct gacc *a = n ? VPUSH(c->gacc) : NULL;
		if (!n || !a) {
			c->nomem = 1;
			dsmt_hmap_del(&c->gmap, h, NULL);
			return 0;
		}
		*n = k;
		memset(a, 0, sizeof(*a));
		e->v = c->gk.n - 1;
		return (uint32_t)e->v;
	}
}

static void gacc_add(struct ctx *c, uint32_t g, uint64_t bytes, uint64_t count, uint64_t tag)
{
	if (g >= c->gacc.n)
		return;
	struct gacc *a = &c->gacc.v[g];
	if (a->tag != tag) {
		a->tag = tag;
		a->bytes = a->count = 0;
		uint32_t *t = VPUSH(c->gtouch);
		if (!t) {
			c->nomem = 1;
			return;
		}
		*t = g;
	}
	a->bytes += bytes;
	a->count += count;
}

/* the top N of the touched groups by bytes (ties: the older group) into tops */
static void top_select(struct ctx *c, struct segattr *sa)
{
	sa->top_off = (uint32_t)c->tops.n;
	sa->ntop = 0;
	for (int k = 0; k < c->top; k++) {
		size_t best = SIZE_MAX;
		for (size_t i = 0; i < c->gtouch.n; i++) {
			uint32_t g = c->gtouch.v[i];
			if (g == UINT32_MAX || !c->gacc.v[g].bytes)
				continue;
			if (best == SIZE_MAX || c->gacc.v[g].bytes > c->gacc.v[c->gtouch.v[best]].bytes ||
			    (c->gacc.v[g].bytes == c->gacc.v[c->gtouch.v[best]].bytes && g < c->gtouch.v[best]))
				best = i;
		}
		if (best == SIZE_MAX)
			break;
		uint32_t g = c->gtouch.v[best];
		struct topent *t = VPUSH(c->tops);
		if (!t) {
			c->nomem = 1;
			return;
		}
		*t = (struct topent){g, c->gacc.v[g].bytes, c->gacc.v[g].count};
		c->gtouch.v[best] = UINT32_MAX;
		sa->ntop++;
	}
}

/* The categories add up to the level: what is not attributed to a block (a
 * resync after a pause, torch's cudaMallocAsync backend) is `other`; blocks
 * from before a resume (stale: by category) may have been freed while
 * paused, so an excess comes off their categories, the largest first. */
static void bk_fill(uint64_t *cat, uint64_t *stale, uint64_t level, uint64_t res)
{
	uint64_t sum = 0;
	for (unsigned k = 0; k < DSMT_NCAT_ALLOC; k++)
		sum += cat[k];
	if (level > sum)
		cat[DSMT_CAT_OTHER] += level - sum;
	for (uint64_t excess = sum > level ? sum - level : 0; excess && stale;) {
		unsigned m = 0;
		for (unsigned k = 1; k < DSMT_NCAT_ALLOC; k++)
			if (stale[k] > stale[m])
				m = k;
		if (!stale[m])
			break;
		uint64_t x = stale[m] < excess ? stale[m] : excess;
		stale[m] -= x;
		cat[m] -= x;
		excess -= x;
	}
	cat[DSMT_CAT_CACHED] = res > level ? res - level : 0;
}

/* A segment closes at (seq, ts): per device the categories at its peak and
 * at its end (the stats at off were just taken); then the next segment's
 * peak starts here. */
static void attrib_close_seg(struct ctx *c, size_t off, uint64_t seq, uint64_t ts)
{
	if (vec_grow((void **)&c->sattr.v, &c->sattr.cap, off + c->maxdev1, sizeof(*c->sattr.v))) {
		c->nomem = 1;
		return;
	}
	c->sattr.n = off + c->maxdev1;
	if (c->maxdev1)
		memset(&c->sattr.v[off], 0, c->maxdev1 * sizeof(*c->sattr.v));
	uint64_t (*stale)[2][DSMT_NCAT] = calloc(c->maxdev1 ? c->maxdev1 : 1, sizeof(*stale));
	if (!stale) {
		c->nomem = 1;
		return;
	}
	/* the live blocks: without --top in one sweep over the (dense) records,
	 * with it device by device (the groups are counted per device) */
	for (unsigned dv = c->top ? 1 : 0; dv <= (c->top ? c->maxdev1 : 0); dv++) {
		uint64_t tag = 0;
		if (c->top) {
			if (!c->dev[dv])
				continue;
			tag = ++c->gtag;
			c->gtouch.n = 0;
		}
		size_t it = 0;
		struct dsmt_hent *h = NULL;
		for (size_t i = 1;; i++) {
			struct arec *r;
			if (c->top) {
				if (!(h = dsmt_hmap_next(&c->dev[dv]->tens, &it)))
					break;
				r = &c->ar.v[h->aux];
			} else {
				if (i >= c->ar.n)
					break;
				r = &c->ar.v[i];
				if (!(r->flags & AR_LIVE))
					continue;
			}
			unsigned d1 = r->dev1;
			struct dev *d = d1 && d1 <= c->maxdev1 ? c->dev[d1] : NULL;
			if (!d)
				continue;
			struct segattr *sa = &c->sattr.v[off + d1 - 1];
			unsigned ph, cat = ar_live_cat(c, r, r->size, &ph);
			int st = r->epoch < c->epoch;
			sa->end_cat[cat] += r->size;
			if (st)
				stale[d1 - 1][1][cat] += r->size;
			if (cat == DSMT_CAT_TEMPORARIES)
				sa->end_tmp[ph] += r->size;
			if (r->seq > d->pk_seq)
				continue;
			sa->pk_cat[cat] += r->size;
			if (st)
				stale[d1 - 1][0][cat] += r->size;
			if (cat == DSMT_CAT_TEMPORARIES)
				sa->pk_tmp[ph] += r->size;
			if (c->top) {
				if (r->group == UINT32_MAX)
					r->group = group_of(c, r->site, r->pystack, r->stack, cat);
				gacc_add(c, r->group, r->size, 1, tag);
			}
		}
		if (c->top) {
			struct dev *d = c->dev[dv];
			if (d->tp_gen == d->pk_gen)
				for (size_t k = 0; k < d->tpn; k++)
					gacc_add(c, d->tp[k].g, d->tp[k].bytes, 1, tag);
			top_select(c, &c->sattr.v[off + dv - 1]);
		}
	}
	for (unsigned dv = 1; c->pblk && dv <= c->maxdev1; dv++) { /* --peak-blocks */
		struct dev *d = c->dev[dv];
		struct segattr *sa = &c->sattr.v[off + dv - 1];
		sa->pb_off = c->pbv.n;
		if (!d)
			continue;
		size_t it = 0;
		struct dsmt_hent *h;
		while ((h = dsmt_hmap_next(&d->tens, &it))) {
			struct arec *r = &c->ar.v[h->aux];
			if (r->seq > d->pk_seq)
				continue;
			unsigned ph, cat = ar_live_cat(c, r, r->size, &ph);
			struct dsmt_block *b = VPUSH(c->pbv);
			if (!b) {
				c->nomem = 1;
				break;
			}
			*b = (struct dsmt_block){h->key, r->size, r->seq, cat};
		}
		for (size_t k = 0; d->pbp_gen == d->pk_gen && k < d->pbpn; k++) {
			struct dsmt_block *b = VPUSH(c->pbv);
			if (!b) {
				c->nomem = 1;
				break;
			}
			*b = d->pbp[k];
		}
		sa->npb = c->pbv.n - sa->pb_off;
	}
	for (unsigned dv = 1; dv <= c->maxdev1; dv++) {
		struct segattr *sa = &c->sattr.v[off + dv - 1];
		struct dev *d = c->dev[dv];
		if (!d)
			continue;
		const struct segstat *st = &c->stats.v[off + dv - 1];
		if (d->pend.gen == d->pk_gen) {
			for (unsigned k = 0; k < DSMT_NCAT; k++)
				sa->pk_cat[k] += d->pend.cat[k];
			for (unsigned k = 0; k < DSMT_NPHASE; k++)
				sa->pk_tmp[k] += d->pend.tmp[k];
		}
		bk_fill(sa->pk_cat, stale[dv - 1][0], st->pk_alloc, d->pk_res_at);
		bk_fill(sa->end_cat, stale[dv - 1][1], st->end_alloc, st->end_res);
		/* a DeepSpeed forward known now to have had no backward: its
		 * temporaries were freed before that was known */
		if (c->cur_fwd && c->cur_fwd < c->fwds.n && !c->fwds.v[c->cur_fwd - 1].backward &&
		    c->ph == DSMT_PH_FORWARD) {
			sa->pk_tmp[DSMT_PH_EVAL] += sa->pk_tmp[DSMT_PH_FORWARD];
			sa->end_tmp[DSMT_PH_EVAL] += sa->end_tmp[DSMT_PH_FORWARD];
			sa->pk_tmp[DSMT_PH_FORWARD] = sa->end_tmp[DSMT_PH_FORWARD] = 0;
		}
		sa->pk_ts = d->pk_ts;
		sa->pk_node = d->pk_has ? d->pk_node : 0;
		sa->pk_phase = (uint8_t)(d->pk_has ? ar_phase(c, pk_record(c, d)) : 0);
		/* the next segment's peak: its start */
		d->pk_seq = seq;
		d->pk_ts = ts;
		d->pk_res_at = d->res;
		d->pk_gen++;
		d->pk_has = 0;
		d->pk_node = 0;
		d->pk_idx = 0;
	}
	free(stale);
}

/* ---- record stream -------------------------------------------------- */

static int damage(struct ctx *c, const uint8_t *at, const char *why)
{
	size_t foff = c->is_header ? 0 : c->rd.frame_off;
	snprintf(c->stopmsg, sizeof(c->stopmsg),
		 "damaged at byte offset %zu (frame %u, record at byte %zu of its data: %s)", foff,
		 c->is_header ? 0 : c->rd.frame_idx, (size_t)(at - c->fbuf), why);
	return -1;
}

static const char *rec_name(unsigned t)
{
	switch (t) {
	case DSMT_REC_META: return "META";
	case DSMT_REC_STRING: return "STRING";
	case DSMT_REC_STACK: return "STACK";
	case DSMT_REC_MODULE: return "MODULE";
	case DSMT_REC_THREAD: return "THREAD";
	case DSMT_REC_FLUSH: return "FLUSH";
	case DSMT_REC_PYCODE: return "PYCODE";
	case DSMT_REC_PYSTACK: return "PYSTACK";
	case DSMT_REC_ALLOC: return "ALLOC";
	case DSMT_REC_FREE: return "FREE";
	case DSMT_REC_OOM: return "OOM";
	case DSMT_REC_DRV: return "DRV";
	case DSMT_REC_SOURCE: return "SOURCE";
	case DSMT_REC_NVTX_PUSH: return "NVTX_PUSH";
	case DSMT_REC_NVTX_POP: return "NVTX_POP";
	case DSMT_REC_NVTX_START: return "NVTX_START";
	case DSMT_REC_NVTX_END: return "NVTX_END";
	case DSMT_REC_NVTX_MARK: return "NVTX_MARK";
	case DSMT_REC_LOST: return "LOST";
	case DSMT_REC_PAUSE: return "PAUSE";
	case DSMT_REC_RESUME: return "RESUME";
	default: return NULL;
	}
}

/* The reorder buffer's callback (the end of the stream) */
static void emit(void *vc, uint64_t seq, const struct dsmt_event *e) { replay(vc, seq, e); }

/* ---- event records ---------------------------------------------------
 * The one place that knows the fields of event records (format.h): the
 * type-specific fields in this order, then dseq and dts, always last. */

enum { /* ALLOC, FREE */
	FA_API, FA_DEV1, FA_SDPTR, FA_SIZE, FA_STREAM, FA_STACK, FA_SDSITE, FA_STOT_ALLOC, FA_STOT_RES, FA_N
};
enum { FO_DEV1, FO_SIZE, FO_TOT_ALLOC, FO_TOT_RES, FO_STACK, FO_SDSITE, FO_N }; /* OOM */
enum { FN_DOMAIN, FN_NAME, FN_N };           /* NVTX_PUSH, NVTX_MARK */
enum { FP_DOMAIN, FP_N };                    /* NVTX_POP */
enum { FS_RANGE, FS_DOMAIN, FS_NAME, FS_N }; /* NVTX_START */
enum { F1_VALUE, F1_N };                     /* NVTX_END: range_id; LOST: count */
enum { FT_DEV1, FT_TOT_ALLOC, FT_TOT_RES, FT_N }; /* PAUSE, RESUME (totals absolute) */
enum { FD_OP, FD_VIA, FD_DEV1, FD_SDPTR, FD_SIZE, FD_AUX, FD_STACK, FD_SDSITE, FD_N }; /* DRV */
enum { FR_VIA, FR_REASON, FR_NAME, FR_N };   /* SOURCE */
#define EV_FIELDS_MAX (FA_N + 3)             /* + dseq, dts, pystack */
_Static_assert((int)FD_N <= (int)FA_N, "EV_FIELDS_MAX covers DRV");
_Static_assert(DSMT_FRAME_PAD >= 8 * (EV_FIELDS_MAX + 1), "ev_fields reads past the payload");
/* the events that may carry a trailing pystack field after dts (format 1.2) */
static const uint8_t has_pystack[256] = {
	[DSMT_REC_ALLOC] = 1, [DSMT_REC_FREE] = 1, [DSMT_REC_OOM] = 1, [DSMT_REC_DRV] = 1,
	[DSMT_REC_NVTX_PUSH] = 1, [DSMT_REC_NVTX_START] = 1, [DSMT_REC_NVTX_MARK] = 1,
};

static const uint8_t is_event[256] = {
	[DSMT_REC_ALLOC] = 1, [DSMT_REC_FREE] = 1, [DSMT_REC_OOM] = 1, [DSMT_REC_NVTX_PUSH] = 1,
	[DSMT_REC_NVTX_POP] = 1, [DSMT_REC_NVTX_START] = 1, [DSMT_REC_NVTX_END] = 1,
	[DSMT_REC_NVTX_MARK] = 1, [DSMT_REC_LOST] = 1, [DSMT_REC_PAUSE] = 1, [DSMT_REC_RESUME] = 1,
	[DSMT_REC_DRV] = 1, [DSMT_REC_SOURCE] = 1,
};

static inline uint64_t load64(const uint8_t *p)
{
	uint64_t x;
	memcpy(&x, p, 8);
	return x;
}

/* One varint at *q, unchecked: reads 8 bytes (the caller guarantees they
 * are readable).  A one-byte varint costs a load and a test; a longer one
 * (up to 8 bytes) is folded without branches.  Longer than 8 bytes: sets
 * *slow (the caller decodes the record again, checked). */
static inline __attribute__((always_inline)) uint64_t get_var8_(const uint8_t **q, int *slow, const int one)
{
	uint64_t x = load64(*q);
	if (one && __builtin_expect(!(x & 0x80), 1)) {
		*q += 1;
		return x & 0x7f;
	}
	uint32_t m = ~(uint32_t)x & 0x80808080u; /* high bit clear: the last byte */
	if (__builtin_expect(m != 0, 1)) {       /* 2 to 4 bytes */
		uint32_t y = (uint32_t)x & (m ^ (m - 1)); /* the varint's bytes */
		*q += ((unsigned)__builtin_ctz(m) + 1) / 8;
		y = ((y & 0x7f007f00u) >> 1) | (y & 0x007f007fu);
		return ((y & 0x3fff0000u) >> 2) | (y & 0x00003fffu);
	}
	uint64_t stop = ~x & 0x8080808080808080ULL;
	if (__builtin_expect(!stop, 0)) {
		*slow = 1;
		return 0;
	}
	x &= stop ^ (stop - 1);
	*q += ((unsigned)__builtin_ctzll(stop) + 1) / 8;
	x = ((x & 0x7f007f007f007f00ULL) >> 1) | (x & 0x007f007f007f007fULL);
	x = ((x & 0x3fff00003fff0000ULL) >> 2) | (x & 0x00003fff00003fffULL);
	return ((x & 0x0fffffff00000000ULL) >> 4) | (x & 0x000000000fffffffULL);
}

static inline __attribute__((always_inline)) uint64_t get_var8(const uint8_t **q, int *slow)
{
	return get_var8_(q, slow, 1);
}

/* The same for a field that is usually 2 to 4 bytes long: no branch on the
 * length (a mispredicted one costs more than the folding). */
static inline __attribute__((always_inline)) uint64_t get_var8_long(const uint8_t **q, int *slow)
{
	return get_var8_(q, slow, 0);
}

/* The checked decoder: every read bounded by the payload end. */
static void ev_fields_checked_(unsigned want, const uint8_t *pl, size_t pn, uint64_t *g, int *bad)
{
	struct dsmt_cur cu;
	dsmt_cur_init(&cu, pl, pn);
	unsigned i = 0;
	for (; i < want && cu.p < cu.end; i++)
		g[i] = dsmt_cur_u(&cu);
	for (; i < want; i++)
		g[i] = 0;
	*bad = cu.bad;
}

/* (copied with constant indices, so that f[] may live in registers) */
static inline __attribute__((always_inline)) void ev_fields_checked(const unsigned want, const uint8_t *pl,
								   size_t pn, uint64_t *f, int *bad)
{
	uint64_t g[EV_FIELDS_MAX];
	ev_fields_checked_(want, pl, pn, g, bad);
#pragma GCC unroll 16
	for (unsigned i = 0; i < want; i++)
		f[i] = g[i];
}

/* Decode the first `want` varints of an event payload into f[] (fields past
 * the end of the payload are 0; fields after the known ones are ignored).
 * Sets *bad on a malformed varint.
 *
 * Fast path: the fields are decoded one after the other without end checks
 * (get_var8), then the end is checked once: when the known fields used
 * exactly the payload or less of it (a newer minor version's extra fields),
 * that was it.  A payload that ended early, a malformed or a long varint
 * decode again on the checked path.  The fast path reads at most 8 bytes
 * past the 8-byte fields of the record, which DSMT_FRAME_PAD (128) covers.
 * Little-endian hosts only (x86-64, aarch64), like the writer. */
static inline __attribute__((always_inline)) void ev_fields(const unsigned want, const unsigned opt,
							   const uint8_t *pl, size_t pn, uint64_t *f, int *bad)
{
	const uint8_t *q = pl;
	int slow = 0;
#pragma GCC unroll 16
	for (unsigned i = 0; i < want; i++)
		f[i] = get_var8(&q, &slow);
	if (opt) { /* one trailing field that may be absent (format 1.2: pystack) */
		f[want] = 0;
		if (q < pl + pn)
			f[want] = get_var8(&q, &slow);
	}
	if (__builtin_expect(!slow && q <= pl + pn, 1))
		return;
	ev_fields_checked(want + opt, pl, pn, f, bad);
}

/* ev_fields for ALLOC/FREE, the bulk of every trace: the fields that are
 * one byte in nearly every record (api dev1, then stream stack sdsite
 * stot_alloc stot_reserved dseq dts) are checked and taken a word at a time;
 * sdptr and size one by one; then pystack when the payload holds it.  Same
 * results as ev_fields(FA_N + 3, ...), except that with all = 0 (the replay)
 * stream may be left unset, and stot_reserved too unless res. */
static inline __attribute__((always_inline)) void mem_fields(const uint8_t *pl, size_t pn, uint64_t *f,
							    int *bad, const int all, const int res)
{
	_Static_assert(FA_API == 0 && FA_DEV1 == 1 && FA_SDPTR == 2 && FA_SIZE == 3 && FA_STREAM == 4 &&
			       FA_N == 9,
		       "mem_fields follows the ALLOC/FREE field order");
	const uint8_t *q = pl;
	int slow = 0;
	uint64_t w = load64(q);
	if (__builtin_expect(!(w & 0x8080), 1)) {
		f[FA_API] = w & 0xff;
		f[FA_DEV1] = (w >> 8) & 0xff;
		q += 2;
	} else {
		f[FA_API] = get_var8(&q, &slow);
		f[FA_DEV1] = get_var8(&q, &slow);
	}
	f[FA_SDPTR] = get_var8_long(&q, &slow);
	f[FA_SIZE] = get_var8_long(&q, &slow);
	w = load64(q);
	if (__builtin_expect(!(w & 0x0080808080808080ULL), 1)) { /* the 7 fields left: one byte each */
#pragma GCC unroll 8
		for (unsigned i = 0; i < 7; i++)
			if (all || (FA_STREAM + i != FA_STREAM && (res || FA_STREAM + i != FA_STOT_RES)))
				f[FA_STREAM + i] = (w >> (8 * i)) & 0xff;
		q += 7;
	} else {
#pragma GCC unroll 8
		for (unsigned i = FA_STREAM; i < FA_N + 2; i++)
			f[i] = get_var8(&q, &slow);
	}
	f[FA_N + 2] = 0;
	if (__builtin_expect(q < pl + pn, 0)) /* format 1.2: pystack */
		f[FA_N + 2] = get_var8(&q, &slow);
	if (__builtin_expect(!slow && q <= pl + pn, 1))
		return;
	ev_fields_checked(FA_N + 3, pl, pn, f, bad);
}

static inline uint8_t clamp8(uint64_t v) { return v > 255 ? 255 : (uint8_t)v; }
static inline uint32_t clamp32(uint64_t v) { return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v; }

/* Fields of an event that only --dump prints. */
struct evx {
	uint64_t stream, stack, tot_res;
	uint64_t op, via, dev1; /* DRV: as recorded (event.h clamps them) */
	uint64_t pystack;       /* as recorded */
};

static inline int is_mem(unsigned type) { return (type | 1) == DSMT_REC_FREE; } /* ALLOC, FREE */

/* Decode the fields of event record `type` (payload pl, pn) into f[].
 * Returns n: f[n] is dseq, f[n + 1] dts.  Sets *bad on a malformed varint.
 * mem: type is ALLOC or FREE (a constant, for the hot path); all: every
 * field is needed (--dump; else see mem_fields); res: the replay keeps
 * tot_reserved (ctx.track_res). */
static inline __attribute__((always_inline)) unsigned ev_parse(const int mem, const int all, const int res,
								unsigned type, const uint8_t *pl, size_t pn,
								uint64_t *f, int *bad)
{
	if (mem) { /* the caller knows: ALLOC or FREE */
		mem_fields(pl, pn, f, bad, all, res);
		return FA_N;
	}
	switch (type) {
	case DSMT_REC_OOM:
		ev_fields(FO_N + 2, 1, pl, pn, f, bad);
		return FO_N;
	case DSMT_REC_NVTX_PUSH:
	case DSMT_REC_NVTX_MARK:
		ev_fields(FN_N + 2, 1, pl, pn, f, bad);
		return FN_N;
	case DSMT_REC_NVTX_POP:
		ev_fields(FP_N + 2, 0, pl, pn, f, bad);
		return FP_N;
	case DSMT_REC_NVTX_START:
		ev_fields(FS_N + 2, 1, pl, pn, f, bad);
		return FS_N;
	case DSMT_REC_PAUSE:
	case DSMT_REC_RESUME:
		ev_fields(FT_N + 2, 0, pl, pn, f, bad);
		return FT_N;
	case DSMT_REC_DRV:
		ev_fields(FD_N + 2, 1, pl, pn, f, bad);
		return FD_N;
	case DSMT_REC_SOURCE:
		ev_fields(FR_N + 2, 0, pl, pn, f, bad);
		return FR_N;
	default: /* DSMT_REC_NVTX_END, DSMT_REC_LOST */
		ev_fields(F1_N + 2, 0, pl, pn, f, bad);
		return F1_N;
	}
}

/* The rest of an event parsed by ev_parse (its seq is already taken from
 * t's delta state): apply and update the rest of t's delta state, fill *e
 * (all but seq, tidx and type) and, when x is not NULL (--dump), *x.  In the
 * replay with res, e->x of a torch ALLOC/FREE is its tot_reserved, not its
 * site (event.h).  mem, res: as for ev_parse (res needs t's tot_reserved
 * kept since the start of the frame). */
static inline __attribute__((always_inline)) void ev_fill(const int mem, struct thread *t, unsigned type,
							 const uint64_t *f, unsigned n, struct dsmt_event *e,
							 struct evx *x, const int res)
{
	e->ts = t->ts += f[n + 1];
	e->flags = 0;
	e->stack = 0;
	e->pystack = has_pystack[type] ? clamp32(f[n + 2]) : 0;
	if (mem) {
		if (__builtin_expect((f[FA_API] | f[FA_DEV1]) < 256, 1)) {
			e->api = (uint8_t)f[FA_API];
			e->dev1 = (uint8_t)f[FA_DEV1];
		} else {
			e->api = clamp8(f[FA_API]);
			e->dev1 = clamp8(f[FA_DEV1]);
		}
		e->ptr = t->ptr += (uint64_t)dsmt_dec_unzigzag(f[FA_SDPTR]);
		e->size = f[FA_SIZE];
		e->x = t->site += (uint64_t)dsmt_dec_unzigzag(f[FA_SDSITE]);
		e->tot = 0;
		if (f[FA_API] == DSMT_API_TORCH) { /* the allocator's totals, predicted */
			t->tot_alloc += (type == DSMT_REC_ALLOC ? e->size : -e->size) +
					(uint64_t)dsmt_dec_unzigzag(f[FA_STOT_ALLOC]);
			e->tot = t->tot_alloc;
			e->flags = DSMT_EVF_TOT;
			if (x) {
				x->tot_res = t->tot_res += (uint64_t)dsmt_dec_unzigzag(f[FA_STOT_RES]);
			} else if (res) { /* the replay of a trace with pauses: tot_reserved too */
				e->res = t->tot_res += (uint64_t)dsmt_dec_unzigzag(f[FA_STOT_RES]);
				e->flags = DSMT_EVF_TOT | DSMT_EVF_RES;
			}
		}
		e->stack = clamp32(f[FA_STACK]);
		if (x) {
			x->stream = f[FA_STREAM];
			x->stack = f[FA_STACK];
		}
		return;
	}
	e->api = 0;
	e->dev1 = 0;
	e->ptr = e->size = e->x = e->tot = 0;
	switch (type) {
	case DSMT_REC_OOM:
		e->dev1 = clamp8(f[FO_DEV1]);
		e->size = f[FO_SIZE];
		e->tot = f[FO_TOT_ALLOC];
		e->res = f[FO_TOT_RES]; /* (no DSMT_EVF_RES: read by oom_report alone) */
		e->x = t->site += (uint64_t)dsmt_dec_unzigzag(f[FO_SDSITE]);
		e->stack = clamp32(f[FO_STACK]);
		if (x) {
			x->stack = f[FO_STACK];
			x->tot_res = f[FO_TOT_RES];
		}
		break;
	case DSMT_REC_NVTX_PUSH:
	case DSMT_REC_NVTX_MARK:
		e->ptr = f[FN_DOMAIN];
		e->x = f[FN_NAME];
		break;
	case DSMT_REC_NVTX_POP:
		e->ptr = f[FP_DOMAIN];
		break;
	case DSMT_REC_NVTX_START:
		e->size = f[FS_RANGE];
		e->ptr = f[FS_DOMAIN];
		e->x = f[FS_NAME];
		break;
	case DSMT_REC_PAUSE:
	case DSMT_REC_RESUME:
		e->dev1 = clamp8(f[FT_DEV1]);
		e->tot = f[FT_TOT_ALLOC];
		e->x = f[FT_TOT_RES];
		if (x)
			x->tot_res = f[FT_TOT_RES];
		break;
	case DSMT_REC_DRV:
		e->api = (uint8_t)(DSMT_EV_DRV_API | (f[FD_OP] < 0x7f ? f[FD_OP] : 0x7f));
		e->flags = clamp8(f[FD_VIA]);
		e->dev1 = clamp8(f[FD_DEV1]);
		e->ptr = t->ptr += (uint64_t)dsmt_dec_unzigzag(f[FD_SDPTR]);
		e->size = f[FD_SIZE];
		e->tot = f[FD_AUX];
		e->x = t->site += (uint64_t)dsmt_dec_unzigzag(f[FD_SDSITE]);
		e->stack = clamp32(f[FD_STACK]);
		if (x) {
			x->stack = f[FD_STACK];
			x->op = f[FD_OP];
			x->via = f[FD_VIA];
			x->dev1 = f[FD_DEV1];
		}
		break;
	case DSMT_REC_SOURCE:
		e->ptr = f[FR_VIA];
		e->size = f[FR_REASON];
		e->x = f[FR_NAME];
		break;
	default: /* DSMT_REC_NVTX_END, DSMT_REC_LOST */
		e->size = f[F1_VALUE];
		break;
	}
}

/* --dump: one event line. */
static void dump_event(struct ctx *c, const struct thread *t, unsigned type, uint64_t seq,
		       const struct dsmt_event *e, const struct evx *xp, unsigned fidx)
{
	FILE *df = c->dump;
	const struct evx x = *xp;
	const char *name = rec_name(type); /* never NULL for an event */
	fprintf(df, "%u %s seq=%" PRIu64 " ts=%" PRIu64 " tid=%" PRIu64, fidx, name ? name : "?", seq,
		e->ts, t->tid);
	switch (type) {
	case DSMT_REC_ALLOC:
	case DSMT_REC_FREE: {
		const char *an = api_name(e->api);
		if (an)
			fprintf(df, " api=%s", an);
		else
			fprintf(df, " api=%u", e->api);
		put_dev(df, e->dev1);
		fprintf(df, " ptr=0x%" PRIx64 " size=%" PRIu64 " stream=0x%" PRIx64 " stack=%" PRIu64
			" site=0x%" PRIx64, e->ptr, e->size, x.stream, x.stack, e->x);
		if (e->flags & DSMT_EVF_TOT)
			fprintf(df, " tot_alloc=%" PRIu64 " tot_reserved=%" PRIu64, e->tot, x.tot_res);
		break;
	}
	case DSMT_REC_OOM:
		put_dev(df, e->dev1);
		fprintf(df, " size=%" PRIu64 " tot_alloc=%" PRIu64 " tot_reserved=%" PRIu64
			" stack=%" PRIu64 " site=0x%" PRIx64, e->size, e->tot, x.tot_res, x.stack, e->x);
		break;
	case DSMT_REC_NVTX_PUSH:
	case DSMT_REC_NVTX_MARK:
		put_strid(c, "domain", e->ptr);
		put_strid(c, "name", e->x);
		break;
	case DSMT_REC_NVTX_POP:
		put_strid(c, "domain", e->ptr);
		break;
	case DSMT_REC_NVTX_START:
		fprintf(df, " range_id=%" PRIu64, e->size);
		put_strid(c, "domain", e->ptr);
		put_strid(c, "name", e->x);
		break;
	case DSMT_REC_NVTX_END:
		fprintf(df, " range_id=%" PRIu64, e->size);
		break;
	case DSMT_REC_LOST:
		fprintf(df, " count=%" PRIu64, e->size);
		break;
	case DSMT_REC_PAUSE:
	case DSMT_REC_RESUME:
		put_dev(df, e->dev1);
		fprintf(df, " tot_alloc=%" PRIu64 " tot_reserved=%" PRIu64, e->tot, x.tot_res);
		break;
	case DSMT_REC_DRV: {
		const char *on = x.op < 0x7f ? dsmt_drv_op_name((unsigned)x.op) : NULL;
		if (on)
			fprintf(df, " op=%s", on);
		else
			fprintf(df, " op=%" PRIu64, x.op);
		put_via(df, x.via, 1);
		if (x.dev1 == 0)
			fputs(" dev=host", df);
		else
			fprintf(df, " dev=%" PRIu64, x.dev1 - 1);
		fprintf(df, " ptr=0x%" PRIx64 " size=%" PRIu64 " aux=0x%" PRIx64 " stack=%" PRIu64 " site=0x%" PRIx64,
			e->ptr, e->size, e->tot, x.stack, e->x);
		break;
	}
	case DSMT_REC_SOURCE: {
		put_via(df, e->ptr, 0);
		const char *rn = src_reason_name(e->size);
		if (rn)
			fprintf(df, " reason=%s", rn);
		else
			fprintf(df, " reason=%" PRIu64, e->size);
		put_strid(c, "name", e->x);
		break;
	}
	}
	if (x.pystack) {
		fprintf(df, " pystack=%" PRIu64, x.pystack);
		/* the innermost Python frame, when its definitions came already */
		const struct idxrange *pr = range_get(&c->pysmap, c->pys.v, x.pystack);
		const struct pycode *pc = pr && pr->n ? pycode_get(c, c->pyframes.v[pr->off]) : NULL;
		if (pc) {
			uint64_t instr = c->pyframes.v[pr->off + 1];
			int line = instr <= UINT32_MAX ? dsmt_py_line(pc->lt, pc->ltn, (int)pc->firstline, (unsigned)instr) : -1;
			fprintf(df, " py0=\"%s %s:%d\"", pc->qual, pc->file, line);
		}
	}
	fputc('\n', df);
}


/* One event record of thread t: replay it (in seq order) or dump it.  0, or
 * -1 when damaged.  mem: type is ALLOC or FREE; in_replay: the pass replays
 * (constants); res: keep tot_reserved (ctx.track_res). */
static inline __attribute__((always_inline)) int event_record(struct ctx *c, struct thread *t, unsigned type,
							     const uint8_t *pl, size_t pn, const uint8_t *rec,
							     unsigned fidx, const int mem, const int in_replay, const int res)
{
	const int replaying = in_replay || c->mode == PASS_REPLAY;
	struct dsmt_event ev;
	uint64_t f[EV_FIELDS_MAX];
	int bad = 0;
	unsigned n = replaying ? ev_parse(mem, 0, res, type, pl, pn, f, &bad)
			       : ev_parse(mem, 1, 1, type, pl, pn, f, &bad);
	if (bad)
		return damage(c, rec, "malformed varint in an event");
	uint64_t seq = t->seq += f[n];
	if (replaying) {
		/* in order (the usual case): decoded into ev and replayed
		 * straight away; early: decoded into its reorder slot */
		struct dsmt_reorder *ro = &c->ro;
		struct dsmt_event *e = &ev;
		if (seq != ro->next) {
			int err;
			e = dsmt_reorder_slot(ro, seq, &err);
			if (!e) {
				if (err)
					return damage(c, rec, "events too far out of sequence order (reorder window exceeded)");
				ev_fill(mem, t, type, f, n, &ev, NULL, res); /* a repeated seq: for the delta state only */
				return 0;
			}
		}
		ev_fill(mem, t, type, f, n, e, NULL, res);
		e->tidx = t->idx;
		e->type = (uint8_t)type; /* a reorder slot is live from here */
		const struct dsmt_event *d = &ev;
		if (e != &ev && !(d = dsmt_reorder_peek(ro)))
			return 0;
		/* then whatever became due in the window */
		for (;;) {
			replay(c, ro->next, d);
			if (d == &ev)
				ro->next++;
			else
				dsmt_reorder_pop(ro);
			if (!(d = dsmt_reorder_peek(ro)))
				break;
		}
		return 0;
	}
	/* dump */
	struct evx x = {0, 0, 0, 0, 0, 0, 0};
	ev_fill(mem, t, type, f, n, &ev, &x, 1);
	x.pystack = has_pystack[type] ? f[n + 2] : 0;
	dump_event(c, t, type, seq, &ev, &x, fidx);
	return 0;
}

/* ALLOC/FREE records of thread c->cur from *pp on, as long as they come
 * (the caller goes on at *pp).  0, or -1 when damaged. */
static inline __attribute__((always_inline)) int tight_loop(struct ctx *c, const uint8_t **pp, const uint8_t *end,
							   unsigned fidx, const int res)
{
	struct thread *t = c->cur;
	const uint8_t *p = *pp;
	for (;;) {
		/* type 0x10/0x11 and length < 0x80 (the frame is padded with
		 * zeros: p[0], p[1] are readable, and not an event at the end) */
		unsigned h = p[0] | (unsigned)p[1] << 8;
		if ((h & 0x80fe) != DSMT_REC_ALLOC || p + 2 + (h >> 8) > end)
			break;
		const uint8_t *rec = p;
		p += 2 + (h >> 8);
		if (event_record(c, t, h & 0xff, rec + 2, h >> 8, rec, fidx, 1, 1, res)) {
			*pp = p;
			return -1;
		}
	}
	*pp = p;
	return 0;
}

/* Walk one record stream (the header's or a frame's).  0 ok, -1 damaged. */
static int walk(struct ctx *c, const uint8_t *buf, size_t len, unsigned fidx)
{
	const uint8_t *p = buf, *end = buf + len;
	c->fbuf = buf;
	c->cur = NULL;
	c->gen++;
	FILE *df = c->dump;
	const int mode = c->mode;
	const int defs = c->collect_defs;
	if (c->res_seen) /* a PAUSE or RESUME came: every thread's delta state restarts here */
		c->track_res = 1;
	const int res = c->track_res;
	for (;;) {
		if (mode == PASS_REPLAY && c->cur) {
			/* the bulk of a trace: ALLOC/FREE records of the current
			 * thread (with a one-byte length), replayed in a tight loop
			 * (a copy that keeps tot_reserved, for traces with pauses) */
			if (__builtin_expect(res, 0) ? tight_loop(c, &p, end, fidx, 1) : tight_loop(c, &p, end, fidx, 0))
				return -1;
		}
		unsigned type;
		const uint8_t *pl;
		size_t pn;
		const uint8_t *rec = p;
		int r = dsmt_next_record(&p, end, &type, &pl, &pn);
		if (r == 0)
			return 0;
		if (r < 0)
			return damage(c, rec, "record length runs past the end of the frame");
		struct dsmt_cur cu;
		dsmt_cur_init(&cu, pl, pn);

		if (is_event[type]) {
			struct thread *t = c->cur;
			if (!t)
				return damage(c, rec, "event before any THREAD record in the frame");
			if (mode == PASS_DEFS)
				continue;
			/* ALLOC/FREE (nearly all of them) get their own copy of the code */
			int r = !is_mem(type) ? event_record(c, t, type, pl, pn, rec, fidx, 0, 0, res)
				: res	      ? event_record(c, t, type, pl, pn, rec, fidx, 1, 0, 1)
					      : event_record(c, t, type, pl, pn, rec, fidx, 1, 0, 0);
			if (type == DSMT_REC_PAUSE || type == DSMT_REC_RESUME)
				c->res_seen = 1; /* keep tot_reserved from the next frame on */
			if (r)
				return r;
			continue;
		}

		switch (type) {
		case DSMT_REC_META: {
			size_t kn, vn;
			const uint8_t *k = dsmt_cur_str(&cu, &kn);
			const uint8_t *v = dsmt_cur_str(&cu, &vn);
			if (cu.bad)
				return damage(c, rec, "malformed META record");
			if (defs)
				meta_add(c, k, kn, v, vn);
			else if (mode == PASS_DUMP) {
				fprintf(df, "%u META ", fidx);
				put_esc(df, (const char *)k, kn);
				fputc('=', df);
				put_esc(df, (const char *)v, vn);
				fputc('\n', df);
			}
			break;
		}
		case DSMT_REC_STRING: {
			uint64_t id = dsmt_cur_u(&cu);
			size_t n;
			const uint8_t *s = dsmt_cur_str(&cu, &n);
			if (cu.bad)
				return damage(c, rec, "malformed STRING record");
			if (defs)
				str_add(c, id, s, n);
			else if (mode == PASS_DUMP) {
				fprintf(df, "%u STRING id=%" PRIu64 " ", fidx, id);
				put_esc(df, (const char *)s, n);
				fputc('\n', df);
			}
			break;
		}
		case DSMT_REC_STACK: {
			uint64_t id = dsmt_cur_u(&cu), n = dsmt_cur_u(&cu);
			if (mode != PASS_DUMP) {
				if (defs && !cu.bad)
					stack_add(c, id, n, &cu);
				if (cu.bad)
					return damage(c, rec, "malformed STACK record");
				break;
			}
			fprintf(df, "%u STACK id=%" PRIu64 " n=%" PRIu64, fidx, id, n);
			uint64_t ip = dsmt_cur_u(&cu);
			for (uint64_t i = 0; i < n && !cu.bad && i < STACK_DUMP_MAX; i++) {
				if (i)
					ip += (uint64_t)dsmt_cur_s(&cu);
				fprintf(df, " 0x%" PRIx64, ip);
				if (cu.p >= cu.end && i + 1 < n) {
					fputs(" (ends early)", df);
					break;
				}
			}
			if (n > STACK_DUMP_MAX)
				fputs(" ...", df);
			fputc('\n', df);
			if (cu.bad)
				return damage(c, rec, "malformed STACK record");
			break;
		}
		case DSMT_REC_PYCODE: {
			uint64_t id = dsmt_cur_u(&cu);
			size_t fn, qn, ln;
			const uint8_t *file = dsmt_cur_str(&cu, &fn);
			const uint8_t *qual = dsmt_cur_str(&cu, &qn);
			uint64_t first = dsmt_cur_u(&cu);
			const uint8_t *lt = dsmt_cur_str(&cu, &ln);
			uint64_t pyver = dsmt_cur_u(&cu);
			if (cu.bad)
				return damage(c, rec, "malformed PYCODE record");
			if (defs) {
				pycode_add(c, id, file, fn, qual, qn, first, lt, ln, pyver);
			} else if (mode == PASS_DUMP) {
				fprintf(df, "%u PYCODE id=%" PRIu64 " file=", fidx, id);
				put_esc(df, (const char *)file, fn);
				fputs(" qualname=", df);
				put_esc(df, (const char *)qual, qn);
				fprintf(df, " firstlineno=%" PRIu64 " pyver=%" PRIu64 " linetable=%zu\n", first, pyver, ln);
			}
			break;
		}
		case DSMT_REC_PYSTACK: {
			uint64_t id = dsmt_cur_u(&cu), n = dsmt_cur_u(&cu);
			if (defs && !cu.bad) {
				struct dsmt_cur c2 = cu;
				pystack_add(c, id, n, &c2);
			}
			if (mode == PASS_DUMP) {
				fprintf(df, "%u PYSTACK id=%" PRIu64 " frames=", fidx, id);
				for (uint64_t i = 0; i < n && !cu.bad && cu.p < cu.end; i++) {
					uint64_t code = dsmt_cur_u(&cu), instr = dsmt_cur_u(&cu);
					if (i == STACK_DUMP_MAX) {
						fputs(",...", df);
						break;
					}
					fprintf(df, "%s%" PRIu64 ":%" PRIu64, i ? "," : "", code, instr);
				}
				fputc('\n', df);
			}
			if (cu.bad)
				return damage(c, rec, "malformed PYSTACK record");
			break;
		}
		case DSMT_REC_MODULE: {
			struct module m = {0};
			m.base = dsmt_cur_u(&cu);
			m.lo = dsmt_cur_u(&cu);
			m.hi = dsmt_cur_u(&cu);
			size_t pn2, bn;
			const uint8_t *path = dsmt_cur_str(&cu, &pn2);
			const uint8_t *bid = dsmt_cur_str(&cu, &bn);
			if (cu.bad)
				return damage(c, rec, "malformed MODULE record");
			if (defs) {
				if (c->mods.n >= MODULES_MAX)
					break;
				m.path = dupn(path, pn2);
				if (!m.path) {
					c->nomem = 1;
					break;
				}
				m.is_torch = is_torch_path(m.path);
				m.cls = path_class(m.path);
				if (bn && (m.bid = malloc(bn))) {
					memcpy(m.bid, bid, bn);
					m.bn = bn;
				}
				struct module *slot = VPUSH(c->mods);
				if (!slot) {
					free(m.path);
					c->nomem = 1;
					break;
				}
				*slot = m;
				if (m.is_torch) {
					struct module *tm = VPUSH(c->torch);
					if (!tm) {
						c->nomem = 1;
						break;
					}
					*tm = m;
					tm->path = NULL;
					tm->bid = NULL;
				}
			} else if (mode == PASS_DUMP) {
				fprintf(df, "%u MODULE base=0x%" PRIx64 " lo=0x%" PRIx64 " hi=0x%" PRIx64 " path=", fidx,
					m.base, m.lo, m.hi);
				put_esc(df, (const char *)path, pn2);
				fputs(" build_id=", df);
				for (size_t i = 0; i < bn && i < 64; i++)
					fprintf(df, "%02x", bid[i]);
				char *pp = dupn(path, pn2);
				if (pp && is_torch_path(pp))
					fputs(" (torch allocator)", df);
				free(pp);
				fputc('\n', df);
			}
			break;
		}
		case DSMT_REC_THREAD: {
			uint64_t tid = dsmt_cur_u(&cu);
			size_t nn;
			const uint8_t *name = dsmt_cur_str(&cu, &nn);
			if (cu.bad)
				return damage(c, rec, "malformed THREAD record");
			int created;
			struct dsmt_hent *h = dsmt_hmap_put(&c->thrmap, tid, &created);
			if (!h) {
				c->nomem = 1;
				return damage(c, rec, "out of memory");
			}
			if (created) {
				if (c->thr.n >= THREADS_MAX)
					return damage(c, rec, "too many threads");
				struct thread *t = VPUSH(c->thr);
				if (!t) {
					c->nomem = 1;
					return damage(c, rec, "out of memory");
				}
				memset(t, 0, sizeof(*t));
				t->nvk = ATTRIB_NONE;
				t->tid = tid;
				t->idx = (uint32_t)(c->thr.n - 1);
				t->gen = 0;
				h->v = c->thr.n - 1;
			}
			struct thread *t = &c->thr.v[h->v];
			if (nn && !t->name) {
				t->name = dupn(name, nn);
				t->autograd = attrib_thread_is_autograd(t->name);
			}
			if (t->gen != c->gen) { /* first use in this frame: delta state restarts at 0 */
				t->gen = c->gen;
				t->seq = t->ts = t->ptr = t->site = t->tot_alloc = t->tot_res = 0;
			}
			c->cur = t;
			if (mode == PASS_DUMP) {
				fprintf(df, "%u THREAD tid=%" PRIu64 " name=", fidx, tid);
				put_esc(df, (const char *)name, nn);
				fputc('\n', df);
			}
			break;
		}
		case DSMT_REC_SAMPLE: {
			struct sample sm = {0};
			sm.next_seq = dsmt_cur_u(&cu);
			sm.ts = dsmt_cur_u(&cu);
			uint64_t dev1 = dsmt_cur_u(&cu), flags = dsmt_cur_u(&cu);
			sm.proc_used = dsmt_cur_u(&cu);
			uint64_t dused = dsmt_cur_u(&cu), dtotal = dsmt_cur_u(&cu);
			if (cu.bad)
				return damage(c, rec, "malformed SAMPLE record");
			sm.dev1 = dev1 > 255 ? 255 : (uint32_t)dev1;
			sm.flags = (uint32_t)flags;
			if (mode == PASS_REPLAY) {
				sample_add(c, &sm);
			} else if (mode == PASS_DUMP) {
				fprintf(df, "%u SAMPLE next_seq=%" PRIu64 " ts=%" PRIu64, fidx, sm.next_seq, sm.ts);
				put_dev(df, dev1);
				fprintf(df, " flags=%" PRIu64 " proc_used=%" PRIu64 " dev_used=%" PRIu64 " dev_total=%" PRIu64 "\n",
					flags, sm.proc_used, dused, dtotal);
			}
			break;
		}
		case DSMT_REC_HOST: {
			struct hostsm hs = {0};
			hs.next_seq = dsmt_cur_u(&cu);
			hs.ts = dsmt_cur_u(&cu);
			hs.rss = dsmt_cur_u(&cu);
			hs.vsz = dsmt_cur_u(&cu);
			if (cu.bad)
				return damage(c, rec, "malformed HOST record");
			if (mode == PASS_REPLAY) {
				if (c->hosts.n >= SAMPLES_MAX) {
					c->hosts_dropped++;
				} else {
					struct hostsm *h = VPUSH(c->hosts);
					if (!h) {
						c->nomem = 1;
					} else {
						hs.n = c->hosts.n - 1;
						*h = hs;
					}
				}
			} else if (mode == PASS_DUMP) {
				fprintf(df, "%u HOST next_seq=%" PRIu64 " ts=%" PRIu64 " rss=%" PRIu64 " vsz=%" PRIu64 "\n",
					fidx, hs.next_seq, hs.ts, hs.rss, hs.vsz);
			}
			break;
		}
		case DSMT_REC_FLUSH: {
			uint64_t ts = dsmt_cur_u(&cu), ns = dsmt_cur_u(&cu);
			if (cu.bad)
				return damage(c, rec, "malformed FLUSH record");
			if (mode == PASS_DUMP)
				fprintf(df, "%u FLUSH ts=%" PRIu64 " next_seq=%" PRIu64 "\n", fidx, ts, ns);
			break;
		}
		default:
			if (mode == PASS_DUMP)
				fprintf(df, "%u unknown type 0x%02x len %zu\n", fidx, type, pn);
			break;
		}
	}
}

/* Run one pass over the whole file.  Sets c->status / c->stopmsg. */
static void run_pass_(struct ctx *c, int mode);

/* A pass over the file; the progress callback hears of its end (whatever
 * stopped it: the decoder's messages follow) */
static void run_pass(struct ctx *c, int mode)
{
	run_pass_(c, mode);
	if (mode == PASS_REPLAY && c->o && c->o->progress)
		c->o->progress(c->o->progress_arg, c->path, c->rd.size, c->rd.size);
}

static void run_pass_(struct ctx *c, int mode)
{
	c->mode = mode;
	c->status = DSMT_NEXT_END;
	c->stopmsg[0] = 0;
	dsmt_reader_rewind(&c->rd);
	c->is_header = 1;
	c->rd.frame_off = 0;
	if (walk(c, c->rd.hdr, c->rd.hdr_len, 0)) {
		c->status = DSMT_NEXT_DAMAGED;
		return;
	}
	c->is_header = 0;
	if (mode == PASS_REPLAY && c->attrib)
		attrib_config(c);
	for (;;) {
		const uint8_t *buf;
		size_t len;
		int r = dsmt_reader_next(&c->rd, &buf, &len);
		if (r == DSMT_NEXT_FRAME) {
			if (walk(c, buf, len, c->rd.frame_idx)) {
				c->status = DSMT_NEXT_DAMAGED;
				return;
			}
			if (c->nomem)
				return;
			if (mode == PASS_REPLAY && c->o && c->o->progress)
				c->o->progress(c->o->progress_arg, c->path, c->rd.off, c->rd.size);
			continue;
		}
		c->status = r;
		if (r != DSMT_NEXT_END)
			snprintf(c->stopmsg, sizeof(c->stopmsg), "%s", c->rd.msg);
		return;
	}
}

static int ctx_open(struct ctx *c, const char *path, FILE *err)
{
	c->path = path;
	c->err = err;
	int r = dsmt_reader_open(&c->rd, path);
	if (r != DSMT_OPEN_OK) {
		msg(c, "%s", c->rd.msg);
		dsmt_reader_close(&c->rd);
		return -1;
	}
	return 0;
}

/* Free the replay state and zero it (for a second replay, or at the end). */
static void replay_reset(struct ctx *c)
{
	dsmt_reorder_free(&c->ro);
	dsmt_hmap_free(&c->rematch);
	dsmt_hmap_free(&c->open_seq);
	dsmt_hmap_free(&c->open_ts);
	free(c->ranges.v);
	free(c->marks.v);
	free(c->fwds.v);
	free(c->stretches.v);
	free(c->segs.v);
	free(c->stats.v);
	for (unsigned i = 0; i < 256; i++) {
		if (c->dev[i]) {
			dsmt_hmap_free(&c->dev[i]->tens);
			free(c->dev[i]->tp);
			free(c->dev[i]->pbp);
			free(c->dev[i]);
		}
	}
	free(c->ar.v);
	free(c->tl.v);
	free(c->tl_ar.v);
	free(c->nvn.v);
	dsmt_hmap_free(&c->pyev);
	dsmt_hmap_free(&c->natcls);
	dsmt_hmap_free(&c->psizes);
	dsmt_hmap_free(&c->unres_py);
	free(c->sattr.v);
	free(c->tops.v);
	free(c->pbv.v);
	free(c->gk.v);
	dsmt_hmap_free(&c->gmap);
	free(c->gacc.v);
	free(c->gtouch.v);
	dsmt_hmap_free(&c->rt);
	dsmt_hmap_free(&c->dm);
	dsmt_hmap_free(&c->hnd);
	dsmt_hmap_free(&c->vmap);
	dsmt_hmap_free(&c->vimp);
	free(c->hv.v);
	free(c->srcs.v);
	free(c->samples.v);
	free(c->pend.v);
	free(c->hosts.v);
	free(c->oomv.v);
	free(c->phchg.v);
	free(c->hl.v);
	free(c->hlch.v);
	free(c->hl_ar.v);
	free(c->tev.v);
	dsmt_hmap_free(&c->unres_sites);
	dsmt_hmap_free(&c->unres_names);
	for (size_t i = 0; i < c->thr.n; i++) {
		struct thread *t = &c->thr.v[i];
		for (uint32_t j = 0; j < t->nds; j++)
			free(t->ds[j].v);
		free(t->ds);
		t->ds = NULL;
		t->nds = 0;
		t->nvk = ATTRIB_NONE;
		t->nvtop = 0;
	}
	memset(&c->ro, 0, sizeof(*c) - offsetof(struct ctx, ro));
	dsmt_reorder_init(&c->ro, c->o ? c->o->reorder_max : 0);
	c->sample_due = UINT64_MAX;
	c->src_via = SRC_UNKNOWN;
	c->ph = DSMT_PH_INIT;
	c->host_ph = DSMT_PH_INIT;
}

/* reduce_bucket_size in elements (attrib_bucket_elems): from the recorded
 * command line; DeepSpeed's default when the process runs DeepSpeed (its
 * command line, its Python files or its NVTX names say so) */
static uint64_t bucket_config(struct ctx *c)
{
	const struct dsmt_meta *m = NULL;
	for (size_t i = 0; i < c->meta.n; i++)
		if (!strcmp(c->meta.v[i].key, "cmdline"))
			m = &c->meta.v[i];
	int ds = 0;
	for (const char *a = m ? m->val : NULL, *end = m ? m->val + m->val_len : NULL; a && a < end && !ds;
	     a += strlen(a) + 1)
		ds = strstr(a, "deepspeed") != NULL;
	for (size_t i = 0; i < c->pyc.n && !ds; i++)
		ds = c->pyc.v[i].file && strstr(c->pyc.v[i].file, "deepspeed/") != NULL;
	for (size_t i = 0; i < c->strs.n && !ds; i++)
		ds = !strncmp(c->arena + c->strs.v[i].off, "DeepSpeed", 9);
	return attrib_bucket_elems(m ? m->val : NULL, m ? m->val_len : 0, ds);
}

static void attrib_config(struct ctx *c)
{
	c->bucket_elems = bucket_config(c);
	const char *ws = meta_get(c->meta.v, c->meta.n, "world_size");
	c->world1 = ws && !strcmp(ws, "1");
}

/* Did a decision taken before its definition arrived turn out wrong? */
static int replay_stale(struct ctx *c)
{
	if (c->unres_overflow)
		return 1;
	if (c->attrib && bucket_config(c) != c->bucket_elems)
		return 1;
	size_t i = 0;
	struct dsmt_hent *h;
	while ((h = dsmt_hmap_next(&c->unres_sites, &i)))
		if (site_is_torch(c, h->key) || (c->has_drv && site_class(c, h->key) > CLS_OTHER))
			return 1; /* reserved, or a driver-level category, was decided without it */
	i = 0;
	while ((h = dsmt_hmap_next(&c->unres_py, &i))) { /* a PYSTACK, its PYCODEs, or a STACK came late */
		uint64_t id = h->key & ~((uint64_t)1 << 63);
		if (h->key >> 63) {
			if (dsmt_hmap_get(&c->stkmap, id))
				return 1;
			continue;
		}
		const struct idxrange *r = range_get(&c->pysmap, c->pys.v, id);
		for (uint32_t k = 0; r && k < r->n; k++)
			if (pycode_get(c, c->pyframes.v[r->off + 2 * k]))
				return 1;
	}
	i = 0;
	while ((h = dsmt_hmap_next(&c->unres_names, &i))) {
		const char *s = str_get(c, h->key, NULL);
		if (s && name_class_of(c, s) != name_plain(c))
			return 1;
	}
	return 0;
}

static int cmp_timed(const void *a, const void *b)
{
	const struct timed *x = a, *y = b;
	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	return x->n < y->n ? -1 : x->n > y->n;
}

static void ctx_free(struct ctx *c)
{
	replay_reset(c);
	free(c->timed.v);
	dsmt_reorder_free(&c->ro);
	dsmt_reader_close(&c->rd);
	dsmt_hmap_free(&c->strmap);
	free(c->strs.v);
	free(c->arena);
	for (size_t i = 0; i < c->mods.n; i++) {
		free(c->mods.v[i].path);
		free(c->mods.v[i].bid);
	}
	free(c->mods.v);
	for (size_t i = 0; i < c->pyc.n; i++) {
		free(c->pyc.v[i].file);
		free(c->pyc.v[i].qual);
		free(c->pyc.v[i].lt);
	}
	free(c->pyc.v);
	free(c->pys.v);
	free(c->stk.v);
	free(c->pyframes.v);
	free(c->ips.v);
	dsmt_hmap_free(&c->pycmap);
	dsmt_hmap_free(&c->pysmap);
	dsmt_hmap_free(&c->stkmap);
	free(c->torch.v);
	for (size_t i = 0; i < c->meta.n; i++) {
		free(c->meta.v[i].key);
		free(c->meta.v[i].val);
	}
	free(c->meta.v);
	dsmt_hmap_free(&c->thrmap);
	for (size_t i = 0; i < c->thr.n; i++)
		free(c->thr.v[i].name);
	free(c->thr.v);
	if (c->have_re)
		regfree(&c->re);
}

/* Report how the file ended.  Returns the exit code. */
static int report_stop(struct ctx *c)
{
	if (c->nomem) {
		msg(c, "out of memory");
		return DSMT_EXIT_BAD;
	}
	if (c->status == DSMT_NEXT_TRUNC) {
		msg(c, "%s", c->stopmsg);
		return DSMT_EXIT_OK;
	}
	if (c->status == DSMT_NEXT_DAMAGED) {
		msg(c, "%s; reporting what decoded before it", c->stopmsg);
		return DSMT_EXIT_BAD;
	}
	return DSMT_EXIT_OK;
}

/* ---- steps ---------------------------------------------------------- */

static uint64_t u64_meta(struct ctx *c, const char *key, uint64_t dflt)
{
	const char *v = meta_get(c->meta.v, c->meta.n, key);
	if (!v || !*v)
		return dflt;
	char *e;
	unsigned long long x = strtoull(v, &e, 10);
	return *e ? dflt : (uint64_t)x;
}

/* --gradient_accumulation_steps N (or =N; also with dashes) in the recorded
 * command line (META cmdline: NUL-separated arguments), the last one given;
 * 0 when there is none or it is not a positive number. */
static int cmdline_grad_accum(struct ctx *c)
{
	static const char *const flags[] = {"--gradient_accumulation_steps", "--gradient-accumulation-steps"};
	const struct dsmt_meta *m = NULL;
	for (size_t i = 0; i < c->meta.n; i++)
		if (!strcmp(c->meta.v[i].key, "cmdline"))
			m = &c->meta.v[i];
	if (!m)
		return 0;
	int n = 0, want = 0;
	for (const char *a = m->val, *end = m->val + m->val_len; a < end; a += strlen(a) + 1) {
		const char *v = NULL;
		if (want)
			v = a;
		want = 0;
		for (size_t k = 0; !v && k < 2; k++) {
			size_t fl = strlen(flags[k]);
			if (!strcmp(a, flags[k]))
				want = 1;
			else if (!strncmp(a, flags[k], fl) && a[fl] == '=')
				v = a + fl + 1;
		}
		if (v) {
			char *e;
			long x = strtol(v, &e, 10);
			n = *v && !*e && x > 0 && x <= 1000000 ? (int)x : 0;
		}
	}
	return n;
}

/* The intervals: boundaries b[0..nb-1] (seq, ts); interval 0 runs up to
 * b[0], interval i from b[i-1] to b[i], interval nb from b[nb-1] to the end
 * of the trace; lab[i] says what interval i is.  An event whose seq is below
 * a boundary's belongs to the interval before it. */
struct label {
	int kind, num;
};

/* Steps from main-thread DeepSpeedEngine.forward/backward pushes (DeepSpeed
 * pushes no range for the optimizer step).  A forward whose stretch up to
 * the next forward holds a backward is a training micro-step, one without
 * an evaluation forward; consecutive evaluation forwards form one `eval`
 * interval.  Steps are groups of n training micro-steps, each from its
 * first forward to the next group's (so the optimizer step falls inside);
 * a trailing group of fewer is `tail`.  An eval stretch ends the group
 * before it, which is reported as a step all the same, and the next group
 * starts after it (DeepSpeed's engine evaluates between optimizer steps, so
 * a step is never cut short that way). */
static size_t deepspeed_steps(struct ctx *c, int n, struct mark *b, struct label *lab)
{
	const struct fwd *f = c->fwds.v;
	size_t m = c->fwds.n, nb = 0, i = 0;
	int steps = 0, evals = 0;
	lab[0] = (struct label){DSMT_INIT, 0};
	while (i < m) {
		b[nb] = (struct mark){f[i].seq, f[i].ts};
		struct label *l = &lab[++nb];
		if (!f[i].backward) {
			while (i < m && !f[i].backward)
				i++;
			*l = (struct label){DSMT_EVAL, ++evals};
			continue;
		}
		int k = 0;
		while (i < m && f[i].backward && k < n)
			i++, k++;
		if (k == n || i < m)
			*l = (struct label){DSMT_STEP, ++steps};
		else
			*l = (struct label){DSMT_TAIL, 0};
	}
	return nb;
}

/* Does device dev1 get rows: torch events, driver events, or (in a trace
 * with driver data) runtime allocations counted at the driver level */
static int dev_shown(struct ctx *c, unsigned dev1)
{
	const struct dev *d = c->dev[dev1];
	return d && (d->used || (c->has_drv && d->run_pk));
}


/* ---- attribution: reports ------------------------------------------- */

#define GROWTH_MIN_STEPS 3

/* The attribution of row r from its interval's aggregate a (top entries
 * name groups until render_sites turns them into sites).  0 or -1. */
static int attrib_row(struct ctx *c, struct dsmt_row *r, const struct segstat *a, uint64_t t0, uint64_t unit)
{
	const struct segattr *pk = &c->sattr.v[a->pk_si], *en = &c->sattr.v[a->end_si];
	memcpy(r->peak_bk.cat, pk->pk_cat, sizeof(r->peak_bk.cat));
	memcpy(r->peak_bk.tmp_phase, pk->pk_tmp, sizeof(r->peak_bk.tmp_phase));
	memcpy(r->end_bk.cat, en->end_cat, sizeof(r->end_bk.cat));
	memcpy(r->end_bk.tmp_phase, en->end_tmp, sizeof(r->end_bk.tmp_phase));
	r->peak_phase = pk->pk_phase;
	r->peak_ts_ns = t0 + pk->pk_ts * unit;
	size_t n = 0;
	for (uint32_t k = pk->pk_node; k && k < c->nvn.n && n < NVTX_DEPTH_MAX; k = c->nvn.v[k].parent)
		n++;
	if (n) {
		if (!(r->peak_nvtx = calloc(n, sizeof(char *))))
			return -1;
		r->npeak_nvtx = n;
		size_t i = n;
		for (uint32_t k = pk->pk_node; i; k = c->nvn.v[k].parent) {
			const char *s = str_get(c, c->nvn.v[k].name, NULL);
			char num[32];
			if (!s) {
				snprintf(num, sizeof(num), "%" PRIu64, c->nvn.v[k].name);
				s = num;
			}
			if (!(r->peak_nvtx[--i] = strdup(s)))
				return -1;
		}
	}
	if (pk->npb) {
		if (!(r->blocks = malloc(pk->npb * sizeof(*r->blocks))))
			return -1;
		memcpy(r->blocks, &c->pbv.v[pk->pb_off], pk->npb * sizeof(*r->blocks));
		r->nblocks = pk->npb;
	}
	if (pk->ntop) {
		if (!(r->top = calloc(pk->ntop, sizeof(*r->top))))
			return -1;
		r->ntop = pk->ntop;
		for (uint32_t i = 0; i < pk->ntop; i++) {
			const struct topent *t = &c->tops.v[pk->top_off + i];
			r->top[i] = (struct dsmt_top){t->bytes, t->count, c->gk.v[t->g].cat, t->g};
		}
	}
	return 0;
}

struct gsurv { /* a live block at the end of the run, by device, group and step */
	unsigned dv;
	uint32_t g;
	int step;
	uint64_t bytes;
};

static int cmp_gsurv(const void *x, const void *y)
{
	const struct gsurv *a = x, *b = y;
	if (a->dv != b->dv)
		return a->dv < b->dv ? -1 : 1;
	if (a->g != b->g)
		return a->g < b->g ? -1 : 1;
	return (a->step > b->step) - (a->step < b->step);
}

static int cmp_growth(const void *x, const void *y)
{
	const struct dsmt_growth *a = x, *b = y;
	if (a->bytes != b->bytes)
		return a->bytes > b->bytes ? -1 : 1;
	if (a->device != b->device)
		return a->device < b->device ? -1 : 1;
	return (a->site > b->site) - (a->site < b->site);
}

/* Growth: the blocks still live at the end of the run, by the step that
 * allocated them and their group; a group whose surviving bytes come from
 * GROWTH_MIN_STEPS or more consecutive steps is listed (its longest such
 * run, the latest of equals). */
static int attrib_growth(struct ctx *c, struct dsmt_process *out, const uint32_t *seg_iv, const struct label *lab,
			 size_t ni)
{
	VEC(struct gsurv) v = {0};
	for (unsigned dv = 1; dv <= c->maxdev1; dv++) {
		struct dev *d = c->dev[dv];
		if (!d || !dev_shown(c, dv))
			continue;
		size_t it = 0;
		struct dsmt_hent *h;
		while ((h = dsmt_hmap_next(&d->tens, &it))) {
			struct arec *r = &c->ar.v[h->aux];
			if (r->seg >= c->segs.n || seg_iv[r->seg] >= ni || lab[seg_iv[r->seg]].kind != DSMT_STEP)
				continue;
			unsigned ph, cat = ar_live_cat(c, r, h->v, &ph);
			struct gsurv *x = VPUSH(v);
			if (!x) {
				free(v.v);
				return -1;
			}
			*x = (struct gsurv){dv, group_of(c, r->site, r->pystack, r->stack, cat), lab[seg_iv[r->seg]].num,
					    h->v};
		}
	}
	if (v.n)
		qsort(v.v, v.n, sizeof(*v.v), cmp_gsurv);
	VEC(struct dsmt_growth) g = {0};
	for (size_t i = 0; i < v.n;) {
		size_t j = i;
		while (j < v.n && v.v[j].dv == v.v[i].dv && v.v[j].g == v.v[i].g)
			j++;
		/* the longest run of consecutive steps in [i, j) */
		int best_lo = 0, best_hi = -1, lo = 0, prev = 0;
		for (size_t k = i; k < j; k++) {
			int st = v.v[k].step;
			if (k == i || st > prev + 1)
				lo = st;
			prev = st;
			if (st - lo >= best_hi - best_lo)
				best_lo = lo, best_hi = st;
		}
		if (best_hi - best_lo + 1 >= GROWTH_MIN_STEPS) {
			struct dsmt_growth *x = VPUSH(g);
			uint64_t *ps = calloc((size_t)(best_hi - best_lo + 1), sizeof(*ps));
			if (!x || !ps) {
				free(ps);
				goto fail;
			}
			*x = (struct dsmt_growth){(int)v.v[i].dv - 1, v.v[i].g, c->gk.v[v.v[i].g].cat, 0, best_lo, best_hi,
						  ps};
			for (size_t k = i; k < j; k++)
				if (v.v[k].step >= best_lo && v.v[k].step <= best_hi) {
					ps[v.v[k].step - best_lo] += v.v[k].bytes;
					x->bytes += v.v[k].bytes;
				}
		}
		i = j;
	}
	free(v.v);
	if (g.n)
		qsort(g.v, g.n, sizeof(*g.v), cmp_growth);
	out->growth = g.v;
	out->ngrowth = g.n;
	return 0;
fail:
	free(v.v);
	for (size_t k = 0; k < g.n; k++)
		free(g.v[k].per_step);
	free(g.v);
	return -1;
}

static char *fmt_dup(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *fmt_dup(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

static const char *base_name(const char *p)
{
	const char *b = p ? strrchr(p, '/') : NULL;
	return b ? b + 1 : p ? p : "?";
}

/* One frame of group k: i < np are its Python frames (innermost first),
 * then its native ones (the STACK's, or the call site alone). */
struct gframe {
	int py, ok;            /* ok: a known code object (py), a symbolized ip (native) */
	uint64_t code, ip;     /* when !ok */
	const char *qual, *file; /* py */
	int line;              /* py: -1 unknown */
	struct dsmt_sym sym;   /* native */
};

static void gframe_count(struct ctx *c, const struct gkey *k, size_t *np, size_t *nn)
{
	const struct idxrange *pr = range_get(&c->pysmap, c->pys.v, k->pystack);
	const struct idxrange *sr = range_get(&c->stkmap, c->stk.v, k->stack);
	*np = pr ? pr->n : 0;
	*nn = sr ? sr->n : k->site ? 1 : 0;
}

static int gframe_get(struct ctx *c, struct dsmt_symtab **st, const struct gkey *k, size_t i, struct gframe *o)
{
	const struct idxrange *pr = range_get(&c->pysmap, c->pys.v, k->pystack);
	size_t np = pr ? pr->n : 0;
	memset(o, 0, sizeof(*o));
	if (i < np) {
		o->py = 1;
		o->code = c->pyframes.v[pr->off + 2 * i];
		uint64_t instr = c->pyframes.v[pr->off + 2 * i + 1];
		const struct pycode *pc = pycode_get(c, o->code);
		if (pc) {
			o->ok = 1;
			o->qual = pc->qual;
			o->file = pc->file;
			o->line = instr <= UINT32_MAX ? dsmt_py_line(pc->lt, pc->ltn, (int)pc->firstline, (unsigned)instr) : -1;
		}
		return 0;
	}
	const struct idxrange *sr = range_get(&c->stkmap, c->stk.v, k->stack);
	if (!*st) {
		if (!(*st = dsmt_symtab_new()))
			return -1;
		for (size_t m = 0; m < c->mods.n; m++) {
			const struct module *mo = &c->mods.v[m];
			dsmt_symtab_add_module(*st, mo->base, mo->lo, mo->hi, mo->path, mo->bid, mo->bn);
		}
	}
	o->ip = sr ? c->ips.v[sr->off + (i - np)] : k->site;
	o->ok = dsmt_symbolize(*st, o->ip, &o->sym) == 0;
	return 0;
}

/* The frames of group g: Python (innermost first), then native */
static int render_site(struct ctx *c, struct dsmt_symtab **st, uint32_t g, struct dsmt_site *o)
{
	const struct gkey *k = &c->gk.v[g];
	o->site = k->site;
	o->pystack = k->pystack;
	o->stack = k->stack;
	size_t np, nn;
	gframe_count(c, k, &np, &nn);
	if (!(o->frames = calloc(np + nn + 1, sizeof(char *))))
		return -1;
	for (size_t i = 0; i < np + nn; i++) {
		struct gframe fr;
		if (gframe_get(c, st, k, i, &fr))
			return -1;
		char *f;
		const struct dsmt_sym *sym = &fr.sym;
		if (fr.py && !fr.ok)
			f = fmt_dup("<code %" PRIu64 ">", fr.code);
		else if (fr.py)
			f = fr.line >= 0 ? fmt_dup("%s (%s:%d)", fr.qual, fr.file, fr.line) : fmt_dup("%s (%s)", fr.qual, fr.file);
		else if (!fr.ok)
			f = fmt_dup("0x%" PRIx64, fr.ip);
		else if (sym->func && sym->file)
			f = fmt_dup("%s (%s:%d)", sym->func, sym->file, sym->line);
		else if (sym->func)
			f = fmt_dup("%s (%s+0x%" PRIx64 ")", sym->func, base_name(sym->module), sym->offset);
		else
			f = fmt_dup("%s+0x%" PRIx64, base_name(sym->module), sym->offset);
		if (!(o->frames[o->nframes++] = f))
			return -1;
	}
	o->npy = np;
	return 0;
}

/* --torch-snapshot: group g's frames as torch names them ({filename, line,
 * name}), innermost first: the native ones (the call site first), then
 * Python's */
static int tsnap_stack(struct ctx *c, struct dsmt_symtab **st, uint32_t g, struct dsmt_tstack *o)
{
	const struct gkey *k = &c->gk.v[g];
	size_t np, nn;
	gframe_count(c, k, &np, &nn);
	if (!(o->f = calloc(np + nn + 1, sizeof(*o->f))))
		return -1;
	for (size_t j = 0; j < np + nn; j++) {
		size_t i = j < nn ? np + j : j - nn; /* native first */
		struct gframe fr;
		if (gframe_get(c, st, k, i, &fr))
			return -1;
		struct dsmt_frame *f = &o->f[o->n++];
		const struct dsmt_sym *sym = &fr.sym;
		if (fr.py) {
			f->name = fr.ok ? strdup(fr.qual) : fmt_dup("<code %" PRIu64 ">", fr.code);
			f->file = strdup(fr.ok && fr.file ? fr.file : "??");
			f->line = fr.ok && fr.line > 0 ? fr.line : 0;
		} else if (!fr.ok) {
			f->name = fmt_dup("0x%" PRIx64, fr.ip);
			f->file = strdup("??");
		} else {
			f->name = sym->func ? strdup(sym->func) : fmt_dup("%s+0x%" PRIx64, base_name(sym->module), sym->offset);
			f->file = strdup(sym->file ? sym->file : sym->module ? sym->module : "??");
			f->line = sym->file ? sym->line : 0;
		}
		if (!f->name || !f->file)
			return -1;
	}
	return 0;
}

/* libdw (symbol.c) is used by one decoding thread at a time: dsmemdecode
 * decodes several files at once (main.c), and names are rendered rarely. */
static pthread_mutex_t symbol_mu = PTHREAD_MUTEX_INITIALIZER;

static int render_sites_locked(struct ctx *c, struct dsmt_process *out);

static int render_sites(struct ctx *c, struct dsmt_process *out)
{
	pthread_mutex_lock(&symbol_mu);
	int rc = render_sites_locked(c, out);
	pthread_mutex_unlock(&symbol_mu);
	return rc;
}

/* Turn the groups named by top entries and growth into rendered sites */
static int render_sites_locked(struct ctx *c, struct dsmt_process *out)
{
	struct dsmt_hmap idx;
	dsmt_hmap_init(&idx);
	struct dsmt_symtab *st = NULL;
	size_t cap = 0;
	int rc = 0;
	for (size_t pass = 0; pass < 2 && !rc; pass++) {
		size_t nr = pass ? out->ngrowth : out->nrows;
		for (size_t i = 0; i < nr && !rc; i++) {
			size_t nt = pass ? 1 : out->rows[i].ntop;
			for (size_t t = 0; t < nt && !rc; t++) {
				size_t *gp = pass ? &out->growth[i].site : &out->rows[i].top[t].site;
				int created;
				struct dsmt_hent *h = dsmt_hmap_put(&idx, (uint64_t)*gp + 1, &created);
				if (!h) {
					rc = -1;
					break;
				}
				if (created) {
					if (vec_grow((void **)&out->sites, &cap, out->nsites + 1, sizeof(*out->sites))) {
						rc = -1;
						break;
					}
					struct dsmt_site *o = &out->sites[out->nsites++];
					memset(o, 0, sizeof(*o));
					h->v = out->nsites - 1;
					if (render_site(c, &st, (uint32_t)*gp, o))
						rc = -1;
				}
				*gp = h->v;
			}
		}
	}
	if (st)
		dsmt_symtab_free(st);
	dsmt_hmap_free(&idx);
	return rc;
}

/* --html: one downsampled series per reported device over the intervals'
 * span */
static int series_finish(struct ctx *c, struct dsmt_process *out)
{
	if (!out->nrows)
		return 0;
	uint64_t t0 = out->rows[0].start_ns, t1 = out->rows[0].end_ns;
	for (size_t i = 0; i < out->nrows; i++) {
		if (out->rows[i].start_ns < t0)
			t0 = out->rows[i].start_ns;
		if (out->rows[i].end_ns > t1)
			t1 = out->rows[i].end_ns;
	}
	if (!(out->series = calloc(c->maxdev1 ? c->maxdev1 : 1, sizeof(*out->series))))
		return -1;
	for (unsigned dv = 1; dv <= c->maxdev1; dv++) {
		if (!dev_shown(c, dv))
			continue;
		if (dsmt_series_build(c->hl.v, c->hl.n, c->hlch.v, c->hlch.n, dv, t0, t1, DSMT_SERIES_COLS,
				      &out->series[out->nseries]))
			return -1;
		out->nseries++;
	}
	return 0;
}

static int cmp_tseg(const void *a, const void *b)
{
	const struct dsmt_tseg *x = a, *y = b;
	if (x->device != y->device)
		return x->device < y->device ? -1 : 1;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* --torch-snapshot: the blocks and torch's segments live at the end, the
 * event log, and the frames of every stack they name */
static int tsnap_finish(struct ctx *c, struct dsmt_process *out)
{
	struct dsmt_tsnap *ts = calloc(1, sizeof(*ts));
	if (!(out->tsnap = ts))
		return -1;
	ts->maxdev = -1;
	for (unsigned dv = 1; dv <= c->maxdev1; dv++)
		if (dev_shown(c, dv))
			ts->maxdev = (int)dv - 1;
	size_t cap = 0;
	for (unsigned dv = 1; dv <= c->maxdev1; dv++) {
		struct dev *d = c->dev[dv];
		size_t it = 0;
		struct dsmt_hent *h;
		while (d && (h = dsmt_hmap_next(&d->tens, &it))) {
			if (vec_grow((void **)&ts->blocks, &cap, ts->nblocks + 1, sizeof(*ts->blocks)))
				return -1;
			const struct arec *r = c->attrib && h->aux ? &c->ar.v[h->aux] : NULL;
			uint32_t g = r ? group_of(c, r->site, r->pystack, r->stack, TS_GROUP) : UINT32_MAX;
			ts->blocks[ts->nblocks++] = (struct dsmt_tblock){(int)dv - 1, h->key, h->v, g};
		}
	}
	/* torch's segments: its cudaMalloc'd ones, its driver allocations, and
	 * the mapped handles of expandable segments (contiguous ones merged) */
	cap = 0;
	size_t it = 0;
	struct dsmt_hent *h;
	while ((h = dsmt_hmap_next(&c->rt, &it))) {
		if (((h->aux >> 16) & 3) != 1 || !(h->aux & 0xff) || (h->aux & 0xff) > DEV1_MAX)
			continue;
		if (vec_grow((void **)&ts->segs, &cap, ts->nsegs + 1, sizeof(*ts->segs)))
			return -1;
		ts->segs[ts->nsegs++] = (struct dsmt_tseg){(int)(h->aux & 0xff) - 1, 0, h->key, h->v};
	}
	it = 0;
	while ((h = dsmt_hmap_next(&c->dm, &it))) {
		if (!DM_RES(h->aux) || DM_LEVEL(h->aux) != LV_DEV || !DM_DEV1(h->aux) || DM_DEV1(h->aux) > DEV1_MAX ||
		    dsmt_hmap_get(&c->rt, h->key))
			continue;
		if (vec_grow((void **)&ts->segs, &cap, ts->nsegs + 1, sizeof(*ts->segs)))
			return -1;
		ts->segs[ts->nsegs++] = (struct dsmt_tseg){(int)DM_DEV1(h->aux) - 1, 0, h->key, h->v};
	}
	it = 0;
	while ((h = dsmt_hmap_next(&c->vmap, &it))) {
		uint32_t idx;
		const struct vhandle *v = hv_get(c, h->v, &idx);
		if (!v || !v->res || v->level != LV_DEV || !v->dev1 || v->dev1 > DEV1_MAX)
			continue;
		if (vec_grow((void **)&ts->segs, &cap, ts->nsegs + 1, sizeof(*ts->segs)))
			return -1;
		ts->segs[ts->nsegs++] = (struct dsmt_tseg){(int)v->dev1 - 1, 1, h->key, v->size};
	}
	if (ts->nsegs)
		qsort(ts->segs, ts->nsegs, sizeof(*ts->segs), cmp_tseg);
	size_t m = 0;
	for (size_t i = 0; i < ts->nsegs; i++) {
		struct dsmt_tseg *p = m ? &ts->segs[m - 1] : NULL;
		if (p && p->expandable && ts->segs[i].expandable && p->device == ts->segs[i].device &&
		    p->addr + p->size == ts->segs[i].addr)
			p->size += ts->segs[i].size;
		else
			ts->segs[m++] = ts->segs[i];
	}
	ts->nsegs = m;
	ts->trace = c->tev.v;
	ts->ntrace = c->tev.n;
	c->tev.v = NULL;
	c->tev.n = c->tev.cap = 0;
	/* the stacks named, in group order, renumbered */
	uint32_t *sidx = malloc((c->gk.n ? c->gk.n : 1) * sizeof(*sidx));
	if (!sidx)
		return -1;
	for (size_t g = 0; g < c->gk.n; g++)
		sidx[g] = UINT32_MAX;
	struct dsmt_symtab *st = NULL;
	int rc = 0;
	cap = 0;
	for (size_t g = 0; g < c->gk.n && !rc; g++) {
		if (c->gk.v[g].cat != TS_GROUP)
			continue;
		if (vec_grow((void **)&ts->stacks, &cap, ts->nstacks + 1, sizeof(*ts->stacks))) {
			rc = -1;
			break;
		}
		struct dsmt_tstack *o = &ts->stacks[ts->nstacks++];
		memset(o, 0, sizeof(*o));
		sidx[g] = (uint32_t)(ts->nstacks - 1);
		rc = tsnap_stack(c, &st, (uint32_t)g, o);
	}
	for (size_t i = 0; i < ts->nblocks; i++)
		ts->blocks[i].stack = ts->blocks[i].stack < c->gk.n ? sidx[ts->blocks[i].stack] : UINT32_MAX;
	for (size_t i = 0; i < ts->ntrace; i++)
		ts->trace[i].stack = ts->trace[i].stack < c->gk.n ? sidx[ts->trace[i].stack] : UINT32_MAX;
	if (st)
		dsmt_symtab_free(st);
	free(sidx);
	return rc;
}

/* ---- host memory (HOST records) ---- */

static int host_cmp(const void *a, const void *b)
{
	const struct hostsm *x = a, *y = b;
	if (x->next_seq != y->next_seq)
		return x->next_seq < y->next_seq ? -1 : 1;
	return x->n < y->n ? -1 : x->n > y->n;
}

/* Samples in seq order; the process-wide peaks; with attribution the
 * largest RSS per phase (a sample before event N has the phase left by the
 * last change at a seq below N). */
static void host_process(struct ctx *c, struct dsmt_process *out)
{
	if (!c->hosts.n)
		return;
	qsort(c->hosts.v, c->hosts.n, sizeof(*c->hosts.v), host_cmp);
	out->host_samples = c->hosts.n;
	size_t k = 0;
	unsigned ph = DSMT_PH_INIT;
	for (size_t i = 0; i < c->hosts.n; i++) {
		const struct hostsm *h = &c->hosts.v[i];
		if (h->rss > out->host_peak_rss)
			out->host_peak_rss = h->rss;
		if (h->vsz > out->host_peak_vsz)
			out->host_peak_vsz = h->vsz;
		if (!c->attrib)
			continue;
		while (k < c->phchg.n && c->phchg.v[k].seq < h->next_seq)
			ph = c->phchg.v[k++].ph;
		if (ph < DSMT_BK_NPHASE) {
			if (!out->phase_rss_n[ph]++ || h->rss > out->phase_rss[ph])
				out->phase_rss[ph] = h->rss;
		}
	}
}

/* The interval of samples before events (from, to]: [0, to] for the first.
 * Its largest RSS, and the last sample with next_seq <= to.  *pos: where the
 * previous interval's samples ended (intervals come in order). */
static void host_interval(struct ctx *c, size_t *pos, int first, uint64_t from, uint64_t to,
			  struct dsmt_row *r)
{
	size_t i = *pos;
	while (i < c->hosts.n && !first && c->hosts.v[i].next_seq <= from)
		i++; /* (only when intervals overlap: never) */
	for (; i < c->hosts.n && c->hosts.v[i].next_seq <= to; i++) {
		if (!r->has_peak_rss || c->hosts.v[i].rss > r->peak_rss)
			r->peak_rss = c->hosts.v[i].rss;
		r->has_peak_rss = 1;
	}
	if (i) {
		r->has_end_rss = 1;
		r->end_rss = c->hosts.v[i - 1].rss;
	}
	*pos = i;
}

static int build_rows(struct ctx *c, struct dsmt_process *out)
{
	uint64_t t0 = u64_meta(c, "start_realtime_ns", 0);
	uint64_t unit = u64_meta(c, "ts_unit_ns", DSMT_TS_UNIT_NS);
#define RT(ts) (t0 + (ts) * unit)
	size_t nb = 0, nmax = c->ranges.n + 1 + c->marks.n + c->fwds.n;
	struct mark *b = malloc(nmax * sizeof(*b));
	struct label *lab = malloc((nmax + 1) * sizeof(*lab));
	if (!b || !lab) {
		free(b);
		free(lab);
		return -1;
	}
	if (c->ranges.n || c->marks.n >= 2) {
		out->rule = DSMT_RULE_MARKERS;
		if (c->ranges.n) {
			nb = c->ranges.n + 1;
			b[0] = (struct mark){c->ranges.v[0].s_seq, c->ranges.v[0].s_ts};
			for (size_t i = 0; i < c->ranges.n; i++)
				b[i + 1] = (struct mark){c->ranges.v[i].e_seq, c->ranges.v[i].e_ts};
		} else {
			nb = c->marks.n;
			memcpy(b, c->marks.v, nb * sizeof(*b));
		}
		lab[0] = (struct label){DSMT_INIT, 0};
		for (size_t i = 1; i < nb; i++)
			lab[i] = (struct label){DSMT_STEP, (int)i};
		lab[nb] = (struct label){DSMT_TAIL, 0};
	} else if (c->fwds.n) {
		out->rule = DSMT_RULE_DEEPSPEED;
		int n = c->o->grad_accum, from_cmd = 0;
		if (n <= 0)
			from_cmd = n = cmdline_grad_accum(c);
		if (n <= 0)
			n = 1;
		out->grad_accum = n;
		nb = deepspeed_steps(c, n, b, lab);
		size_t train = 0;
		for (size_t i = 0; i < c->fwds.n; i++)
			train += c->fwds.v[i].backward != 0;
		msg(c, "no step markers matched %s; steps from DeepSpeedEngine.forward/backward ranges (%d micro-step%s per step, %s; %zu training micro-step%s, %zu evaluation forward%s)",
		    c->o->step_re, n, n == 1 ? "" : "s",
		    c->o->grad_accum > 0 ? "from --grad-accum"
		    : from_cmd	       ? "from --gradient_accumulation_steps in the command line"
				       : "neither --grad-accum nor --gradient_accumulation_steps in the command line",
		    train, train == 1 ? "" : "s", c->fwds.n - train, c->fwds.n - train == 1 ? "" : "s");
	} else {
		out->rule = DSMT_RULE_WHOLE_RUN;
		lab[0] = (struct label){DSMT_STEP, 1};
		msg(c, "no step markers matched %s and no DeepSpeedEngine.forward ranges; reporting the whole run as one interval",
		    c->o->step_re);
	}
	size_t ni = nb + 1;
	unsigned ndev = c->maxdev1;
	struct segstat *agg = calloc(ni * (ndev ? ndev : 1), sizeof(*agg));
	struct seg *ihp = calloc(ni, sizeof(*ihp)); /* pinned host memory per interval */
	if (!agg || !ihp) {
		free(agg);
		free(ihp);
		free(b);
		free(lab);
		return -1;
	}
	size_t j = 0;
	uint32_t *seg_iv = c->attrib ? malloc((c->segs.n ? c->segs.n : 1) * sizeof(*seg_iv)) : NULL;
	if (c->attrib && !seg_iv) {
		free(agg);
		free(ihp);
		free(b);
		free(lab);
		return -1;
	}
	for (size_t i = 0; i < c->segs.n; i++) {
		struct seg *s = &c->segs.v[i];
		if (seg_iv)
			seg_iv[i] = (uint32_t)j;
		if (s->pk_hp > ihp[j].pk_hp)
			ihp[j].pk_hp = s->pk_hp;
		ihp[j].end_hp = s->end_hp;
		for (unsigned d = 0; d < s->ndev; d++) {
			struct segstat *st = &c->stats.v[s->off + d], *a = &agg[j * ndev + d];
			if (!a->seen || st->pk_alloc > a->pk_alloc)
				a->pk_si = s->off + d; /* the first segment at the interval's peak */
			a->end_si = s->off + d;
			a->seen = 1;
			if (st->pk_alloc > a->pk_alloc)
				a->pk_alloc = st->pk_alloc;
			if (st->pk_res > a->pk_res)
				a->pk_res = st->pk_res;
			a->end_alloc = st->end_alloc;
			a->end_res = st->end_res;
			a->allocs += st->allocs;
			a->frees += st->frees;
			if (st->pk_dev > a->pk_dev)
				a->pk_dev = st->pk_dev;
			a->end_dev = st->end_dev;
		}
		if (j < nb && s->end_seq == b[j].seq)
			j++;
	}
	unsigned nused = 0;
	for (unsigned d = 1; d <= ndev; d++)
		nused += dev_shown(c, d);
	out->nrows = ni * nused;
	out->rows = calloc(out->nrows ? out->nrows : 1, sizeof(*out->rows));
	if (!out->rows) {
		free(agg);
		free(ihp);
		free(b);
		free(lab);
		free(seg_iv);
		return -1;
	}
	size_t k = 0, npaused = 0, hpos = 0;
	host_process(c, out);
	for (size_t i = 0; i < ni; i++) {
		/* does [from, to) overlap a paused stretch? */
		uint64_t from = i ? b[i - 1].seq : 0, to = i < nb ? b[i].seq : UINT64_MAX;
		struct dsmt_row hr = {0};
		host_interval(c, &hpos, i == 0, from, to, &hr);
		int paused = 0;
		for (size_t p = 0; p < c->stretches.n && !paused; p++)
			paused = c->stretches.v[p].from_seq < to && c->stretches.v[p].to_seq > from;
		for (unsigned d = 1; d <= ndev; d++) {
			if (!dev_shown(c, d))
				continue;
			struct dsmt_row *r = &out->rows[k++];
			struct segstat *a = &agg[i * ndev + d - 1];
			r->kind = lab[i].kind;
			r->step = lab[i].num;
			r->device = (int)d - 1;
			r->paused = paused;
			r->start_ns = i ? RT(b[i - 1].ts) : RT(0);
			r->end_ns = i < nb ? RT(b[i].ts) : RT(c->last_ts);
			r->peak_alloc = a->pk_alloc;
			r->end_alloc = a->end_alloc;
			r->peak_res = a->pk_res;
			r->end_res = a->end_res;
			r->allocs = a->allocs;
			r->frees = a->frees;
			r->peak_dev = a->pk_dev;
			r->end_dev = a->end_dev;
			r->peak_hp = ihp[i].pk_hp;
			r->end_hp = ihp[i].end_hp;
			r->has_peak_rss = hr.has_peak_rss;
			r->has_end_rss = hr.has_end_rss;
			r->peak_rss = hr.peak_rss;
			r->end_rss = hr.end_rss;
			if (c->attrib && a->seen && attrib_row(c, r, a, t0, unit)) {
				free(agg);
				free(ihp);
				free(b);
				free(lab);
				free(seg_iv);
				return -1;
			}
		}
		npaused += paused;
	}
	int gr = c->attrib ? attrib_growth(c, out, seg_iv, lab, ni) : 0;
	/* OOM events: the interval each fell in (an event below a boundary's
	 * seq belongs to the interval before it), real time */
	if (c->attrib)
		oom_finish(c);
	for (size_t i = 0; i < c->oomv.n; i++) {
		struct dsmt_oom *o = &c->oomv.v[i];
		size_t iv = 0;
		while (iv < nb && b[iv].seq <= o->seq)
			iv++;
		o->kind = lab[iv].kind;
		o->step = lab[iv].num;
		o->ts_ns = RT(o->ts_ns);
	}
	out->oom = c->oomv.v;
	out->noom = c->oomv.n;
	c->oomv.v = NULL;
	c->oomv.n = c->oomv.cap = 0;
	free(seg_iv);
	free(agg);
	free(ihp);
	free(b);
	free(lab);
	if (gr)
		return -1;
	if (c->pauses || c->stretches.n)
		msg(c, "tracing was paused %" PRIu64 " time(s) (first at seq %" PRIu64 "): %zu interval(s) overlap a pause"
		       " (marked * and \"paused\": true; their peaks miss what happened while paused);"
		       " allocated and reserved resynchronised from the allocator's totals after each resume",
		    c->pauses, c->pause_seq, npaused);
	return 0;
#undef RT
}

/* The driver section of the report: sources, op counts, and per reported
 * device its breakdown at the first moment of its maximum, with the NVML
 * sample (proc_used valid) closest in time to that moment. */
static int build_driver(struct ctx *c, struct dsmt_process *out)
{
	out->has_drv = c->has_drv;
	if (!c->has_drv)
		return 0;
	uint64_t t0 = u64_meta(c, "start_realtime_ns", 0);
	uint64_t unit = u64_meta(c, "ts_unit_ns", DSMT_TS_UNIT_NS);
	memcpy(out->drv_ops, c->drv_ops, sizeof(out->drv_ops));
	out->sources = calloc(c->srcs.n ? c->srcs.n : 1, sizeof(*out->sources));
	out->bk = calloc(c->maxdev1 ? c->maxdev1 : 1, sizeof(*out->bk));
	if (!out->sources || !out->bk)
		return -1;
	for (size_t i = 0; i < c->srcs.n; i++) {
		const struct srcrec *r = &c->srcs.v[i];
		struct dsmt_source *o = &out->sources[out->nsources++];
		o->seq = r->seq;
		o->ts_ns = t0 + r->ts * unit;
		o->via = r->via;
		o->reason = r->reason;
		size_t n;
		const char *s = r->name ? str_get(c, r->name, &n) : NULL;
		if (s && !(o->name = strdup(s)))
			return -1;
	}
	for (unsigned dv = 1; dv <= c->maxdev1; dv++) {
		if (!dev_shown(c, dv))
			continue;
		const struct dev *d = c->dev[dv];
		const struct snap *sn = &d->snap;
		struct dsmt_breakdown *b = &out->bk[out->nbk++];
		b->device = (int)dv - 1;
		b->peak_device = d->run_pk;
		b->at_known = sn->taken;
		if (!sn->taken)
			continue;
		b->at_ns = t0 + sn->ts * unit;
		b->allocated = sn->alloc;
		b->reserved = sn->res;
		b->nccl = sn->cat[CAT_NCCL];
		b->workspace = sn->cat[CAT_WORKSPACE];
		b->statics = sn->cat[CAT_STATICS];
		b->managed = sn->cat[CAT_MANAGED];
		b->other = sn->cat[CAT_OTHER];
		b->imported = sn->imported;
		if (c->attrib) { /* reserved by category: the blocks live at the snapshot */
			struct dev *dd = c->dev[dv];
			size_t it = 0;
			struct dsmt_hent *h;
			uint64_t stale[DSMT_NCAT] = {0};
			while ((h = dsmt_hmap_next(&dd->tens, &it))) {
				struct arec *r = &c->ar.v[h->aux];
				unsigned ph, cat = ar_live_cat(c, r, h->v, &ph);
				if (r->seq > sn->seq)
					continue;
				b->rbk.cat[cat] += h->v;
				if (r->epoch < c->epoch)
					stale[cat] += h->v;
				if (cat == DSMT_CAT_TEMPORARIES)
					b->rbk.tmp_phase[ph] += h->v;
			}
			if (dd->snap_pend.gen == dd->snap_gen) {
				for (unsigned k = 0; k < DSMT_NCAT; k++)
					b->rbk.cat[k] += dd->snap_pend.cat[k];
				for (unsigned k = 0; k < DSMT_NPHASE; k++)
					b->rbk.tmp_phase[k] += dd->snap_pend.tmp[k];
			}
			bk_fill(b->rbk.cat, stale, sn->alloc, sn->res);
			b->has_rbk = 1;
		}
		const struct sample *best = NULL;
		uint64_t bestd = 0;
		for (size_t i = 0; i < c->samples.n; i++) {
			const struct sample *sm = &c->samples.v[i];
			if (sm->dev1 != dv || !(sm->flags & DSMT_SAMPLE_PROC))
				continue;
			uint64_t dist = sm->ts > sn->ts ? sm->ts - sn->ts : sn->ts - sm->ts;
			if (!best || dist < bestd || (dist == bestd && sm->next_seq < best->next_seq)) {
				best = sm;
				bestd = dist;
			}
		}
		if (best) {
			b->has_sample = 1;
			b->nvml_used = best->proc_used;
			b->context = (int64_t)(best->proc_used - best->dev_at);
		}
	}
	return 0;
}

/* The timeline handed over: the categories of blocks live at the end
 * (decided by the last interval's close), NVML and HOST samples, times in
 * wall-clock ns, NVTX names as strings, the threads. */
static int build_timeline(struct ctx *c, struct dsmt_process *out)
{
	uint64_t t0 = u64_meta(c, "start_realtime_ns", 0);
	uint64_t unit = u64_meta(c, "ts_unit_ns", DSMT_TS_UNIT_NS);
	for (unsigned dv = 1; dv <= c->maxdev1; dv++) {
		struct dev *d = c->dev[dv];
		size_t it = 0;
		struct dsmt_hent *h;
		while (d && (h = dsmt_hmap_next(&d->tens, &it))) {
			uint32_t i = h->aux;
			if (!i || i >= c->tl_ar.n || !c->tl_ar.v[i])
				continue;
			struct arec *r = &c->ar.v[i];
			unsigned ph, cat = (r->flags & AR_CAT) ? r->cat : ar_category(c, r, h->v, DSMT_PH_NONE, &ph);
			c->tl.v[c->tl_ar.v[i] - 1].track = (uint8_t)(DSMT_TL_CAT0 + cat);
		}
	}
	for (size_t i = 0; i < c->samples.n; i++) {
		const struct sample *sm = &c->samples.v[i];
		if ((sm->flags & DSMT_SAMPLE_PROC) && sm->dev1 && sm->dev1 <= DEV1_MAX)
			tl_put(c, sm->ts, DSMT_TL_SET, DSMT_TL_NVML, sm->dev1, sm->proc_used);
	}
	for (size_t i = 0; i < c->hosts.n; i++) /* (sorted by host_process) */
		tl_put(c, c->hosts.v[i].ts, DSMT_TL_SET, DSMT_TL_RSS, 0, c->hosts.v[i].rss);
	if (c->nomem)
		return -1;
	struct dsmt_hmap names;
	dsmt_hmap_init(&names);
	int rc = 0;
	for (size_t i = 0; i < c->tl.n && !rc; i++) {
		struct dsmt_tl_ev *t = &c->tl.v[i];
		t->ts_ns = t0 + t->ts_ns * unit;
		if (t->track == 0xff)
			t->track = DSMT_TL_CAT0 + DSMT_CAT_OTHER; /* (not reached) */
		if (t->op != DSMT_TL_PUSH && t->op != DSMT_TL_START && t->op != DSMT_TL_MARK)
			continue;
		const char *nm = str_get(c, t->v, NULL);
		if (!nm) {
			t->v = DSMT_TL_NONAME;
			continue;
		}
		int created;
		struct dsmt_hent *h = dsmt_hmap_put(&names, t->v, &created);
		if (!h) {
			rc = -1;
			break;
		}
		if (created) {
			char **nv = realloc(out->tl_names, (out->ntl_names + 1) * sizeof(*nv));
			if (!nv || !(nv[out->ntl_names] = strdup(nm))) {
				if (nv)
					out->tl_names = nv;
				rc = -1;
				break;
			}
			out->tl_names = nv;
			h->v = out->ntl_names++;
		}
		t->v = h->v;
	}
	dsmt_hmap_free(&names);
	if (rc)
		return -1;
	out->tl_tids = calloc(c->thr.n ? c->thr.n : 1, sizeof(*out->tl_tids));
	out->tl_tnames = calloc(c->thr.n ? c->thr.n : 1, sizeof(*out->tl_tnames));
	if (!out->tl_tids || !out->tl_tnames)
		return -1;
	out->ntl_threads = c->thr.n;
	for (size_t i = 0; i < c->thr.n; i++) {
		out->tl_tids[i] = c->thr.v[i].tid;
		if (c->thr.v[i].name && !(out->tl_tnames[i] = strdup(c->thr.v[i].name)))
			return -1;
	}
	out->tl = c->tl.v;
	out->ntl = c->tl.n;
	c->tl.v = NULL;
	c->tl.n = c->tl.cap = 0;
	out->tl_end_ns = t0 + c->last_ts * unit;
	return 0;
}

static int ctx_defs(struct ctx *c)
{
	c->collect_defs = 1;
	run_pass(c, PASS_DEFS);
	c->collect_defs = 0;
	return c->nomem ? -1 : 0;
}

int dsmt_decode_file(const char *path, const struct dsmt_opts *o, struct dsmt_process *out,
		     FILE *err)
{
	memset(out, 0, sizeof(*out));
	out->file = path;
	struct ctx *c = calloc(1, sizeof(*c));
	if (!c) {
		fprintf(err, "dsmemdecode: %s: out of memory\n", path);
		return DSMT_EXIT_BAD;
	}
	c->o = o;
	if (ctx_open(c, path, err)) {
		free(c);
		return DSMT_EXIT_BAD;
	}
	const char *re = o->step_re ? o->step_re : DSMT_DEFAULT_STEP_RE;
	int rc = regcomp(&c->re, re, REG_EXTENDED | REG_NOSUB);
	if (rc) {
		char eb[128];
		regerror(rc, &c->re, eb, sizeof(eb));
		msg(c, "bad --step-marker regex %s: %s", re, eb);
		ctx_free(c);
		free(c);
		return DSMT_EXIT_USAGE;
	}
	c->have_re = 1;
	c->ignore_totals = o->ignore_totals;
	c->top = o->top > 0 ? o->top : 0;
	c->pblk = o->peak_blocks;
	c->attrib = o->attrib || c->top || c->pblk || o->timeline || o->series || o->tsnap;
	c->tl_on = o->timeline;
	c->series_on = o->series;
	c->tsnap_on = o->tsnap;
	replay_reset(c);

	int code = DSMT_EXIT_OK;
	/* One pass collects definitions and replays.  When the writer put a
	 * MODULE or STRING record after an event that needed it (which it
	 * normally does not), the replay runs again with all of them known. */
	c->collect_defs = 1;
	run_pass(c, PASS_REPLAY);
	c->collect_defs = 0;
	dsmt_reorder_flush(&c->ro, emit, c);
	int need_res = c->need_res;
	int stale = !c->nomem && replay_stale(c);
	if (!c->nomem && (need_res || stale || c->timed_late)) {
		if (o->verbose)
			msg(c, need_res ? "tot_reserved needed after a pause for events decoded before it; replaying again"
			       : stale	? "definitions arrived after their use; replaying again"
					: "module statics recorded after their load time; replaying with them at that time");
		if (c->timed.n > TIMED_MAX)
			c->timed.n = 0; /* too many to place: where they are recorded */
		if (c->timed.n)
			qsort(c->timed.v, c->timed.n, sizeof(*c->timed.v), cmp_timed);
		c->timed_known = 1;
		replay_reset(c);
		c->track_res = need_res || c->res_seen;
		run_pass(c, PASS_REPLAY);
		dsmt_reorder_flush(&c->ro, emit, c);
	}
	samples_due(c, UINT64_MAX); /* samples after the last event */
	close_segment(c, UINT64_MAX, c->last_ts);
	code = report_stop(c);
	if (c->nomem)
		goto done;

	out->truncated = c->status == DSMT_NEXT_TRUNC;
	out->damaged = c->status == DSMT_NEXT_DAMAGED;
	out->events = c->events;
	out->ooms = c->ooms;
	out->lost = c->lost;
	out->missing = c->ro.gaps;
	if (c->ro.gaps)
		msg(c, "%" PRIu64 " events missing (gaps in the sequence numbers)", c->ro.gaps);
	if (c->lost)
		msg(c, "%" PRIu64 " events lost by the tracer (LOST records)", c->lost);
	if (c->ro.dups)
		msg(c, "%" PRIu64 " events with a repeated sequence number ignored", c->ro.dups);
	if (c->unk_free)
		msg(c, "%" PRIu64 " tensor frees of unknown pointers not applied (first at seq %" PRIu64
		       ", ptr 0x%" PRIx64 ")", c->unk_free, c->unk_free_seq, c->unk_free_ptr);
	if (c->dbl_alloc)
		msg(c, "%" PRIu64 " tensor allocations of a pointer already live (first at seq %" PRIu64 ")",
		    c->dbl_alloc, c->dbl_alloc_seq);
	if (c->rt_unk_free)
		msg(c, "%" PRIu64 " runtime frees of unknown pointers (first at seq %" PRIu64 ", ptr 0x%" PRIx64 ")",
		    c->rt_unk_free, c->rt_unk_seq, c->rt_unk_ptr);
	if (c->nodev)
		msg(c, "%" PRIu64 " allocator events without a valid device ignored (first at seq %" PRIu64 ")",
		    c->nodev, c->nodev_seq);
	if (c->pop_empty)
		msg(c, "%" PRIu64 " NVTX pops without a matching push", c->pop_empty);
	if (c->nvtx_overflow)
		msg(c, "%" PRIu64 " NVTX pushes deeper than %d levels ignored", c->nvtx_overflow, NVTX_DEPTH_MAX);
	if (c->strings_dropped)
		msg(c, "%" PRIu64 " strings dropped (string table limit)", c->strings_dropped);
	if (c->tot_bad)
		msg(c, "allocator totals disagree with replay at %" PRIu64 " of %" PRIu64
		       " events (first at seq %" PRIu64 ": replay %" PRIu64 ", allocator %" PRIu64 ")",
		    c->tot_bad, c->tot_checked, c->tot_bad_seq, c->tot_bad_replay, c->tot_bad_alloc);
	else if (o->verbose && !o->ignore_totals)
		msg(c, "totals cross-check: %" PRIu64 " events, 0 disagreements", c->tot_checked);
	if (o->verbose && c->postpause)
		msg(c, "after pauses: %" PRIu64 " device resync(s) from the allocator's totals; expected and not applied as"
		       " anomalies: %" PRIu64 " tensor frees of blocks allocated while paused (their size subtracted),"
		       " %" PRIu64 " allocations over blocks freed while paused, %" PRIu64 " runtime frees of unknown pointers",
		    c->resyncs, c->pause_unk_free, c->pause_stale, c->pause_rt_unk_free);
	if (o->verbose)
		msg(c, "%" PRIu64 " events, %zu frames, format %u.%u", c->events, (size_t)c->rd.last_good,
		    c->rd.major, c->rd.minor);

	if (c->drv_unk_free)
		msg(c, "%" PRIu64 " driver frees of unknown pointers (first at seq %" PRIu64 ", ptr 0x%" PRIx64 ")",
		    c->drv_unk_free, c->drv_unk_free_seq, c->drv_unk_free_ptr);
	if (c->drv_unk_unmap)
		msg(c, "%" PRIu64 " driver unmaps of unmapped addresses (first at seq %" PRIu64 ", va 0x%" PRIx64 ")",
		    c->drv_unk_unmap, c->drv_unk_unmap_seq, c->drv_unk_unmap_ptr);
	if (c->drv_unk_handle)
		msg(c, "%" PRIu64 " driver releases, retains or maps of unknown VMM handles (first at seq %" PRIu64
		       ", handle 0x%" PRIx64 ")", c->drv_unk_handle, c->drv_unk_handle_seq, c->drv_unk_handle_h);
	if (c->drv_nodev)
		msg(c, "%" PRIu64 " driver-level allocations without a valid device not counted (first at seq %" PRIu64 ")",
		    c->drv_nodev, c->drv_nodev_seq);
	if (c->drv_overflow)
		msg(c, "%" PRIu64 " driver-level allocations beyond the decoder's limit not tracked", c->drv_overflow);
	if (c->srcs_dropped)
		msg(c, "%" PRIu64 " SOURCE records beyond %d not listed", c->srcs_dropped, SRC_MAX);
	if (c->samples_dropped)
		msg(c, "%" PRIu64 " SAMPLE records beyond %zu ignored", c->samples_dropped, SAMPLES_MAX);
	if (c->hosts_dropped)
		msg(c, "%" PRIu64 " HOST records beyond %zu ignored", c->hosts_dropped, SAMPLES_MAX);

	out->attrib = c->attrib;
	out->top = c->top;
	out->peak_blocks = c->pblk;
	if (build_rows(c, out) || build_driver(c, out) || (c->attrib && render_sites(c, out)) ||
	    (c->tl_on && build_timeline(c, out)) ||

	   (c->series_on && series_finish(c, out)) || (c->tsnap_on && tsnap_finish(c, out))) {
		msg(c, "out of memory");
		code = DSMT_EXIT_BAD;
		goto done;
	}
	/* hand the META list over */
	out->meta = c->meta.v;
	out->nmeta = c->meta.n;
	c->meta.v = NULL;
	c->meta.n = 0;
done:
	ctx_free(c);
	free(c);
	return code;
}

void dsmt_process_free(struct dsmt_process *p)
{
	for (size_t i = 0; i < p->nmeta; i++) {
		free(p->meta[i].key);
		free(p->meta[i].val);
	}
	free(p->meta);
	for (size_t i = 0; i < p->nrows; i++) {
		for (size_t k = 0; k < p->rows[i].npeak_nvtx; k++)
			free(p->rows[i].peak_nvtx[k]);
		free(p->rows[i].peak_nvtx);
		free(p->rows[i].top);
		free(p->rows[i].blocks);
	}
	free(p->rows);
	for (size_t i = 0; i < p->nsites; i++) {
		for (size_t k = 0; k < p->sites[i].nframes; k++)
			free(p->sites[i].frames[k]);
		free(p->sites[i].frames);
	}
	free(p->sites);
	for (size_t i = 0; i < p->ngrowth; i++)
		free(p->growth[i].per_step);
	free(p->growth);
	for (size_t i = 0; i < p->nsources; i++)
		free(p->sources[i].name);
	free(p->sources);
	free(p->bk);
	free(p->oom);
	free(p->tl);
	for (size_t i = 0; i < p->ntl_names; i++)
		free(p->tl_names[i]);
	free(p->tl_names);
	for (size_t i = 0; i < p->ntl_threads; i++)
		free(p->tl_tnames[i]);
	free(p->tl_tnames);
	free(p->tl_tids);
	for (size_t i = 0; i < p->nseries; i++)
		free(p->series[i].col);
	free(p->series);
	if (p->tsnap) {
		for (size_t i = 0; i < p->tsnap->nstacks; i++) {
			for (size_t k = 0; k < p->tsnap->stacks[i].n; k++) {
				free(p->tsnap->stacks[i].f[k].name);
				free(p->tsnap->stacks[i].f[k].file);
			}
			free(p->tsnap->stacks[i].f);
		}
		free(p->tsnap->stacks);
		free(p->tsnap->blocks);
		free(p->tsnap->segs);
		free(p->tsnap->trace);
		free(p->tsnap);
	}
	memset(p, 0, sizeof(*p));
}

int dsmt_dump_file(const char *path, FILE *out, FILE *err)
{
	struct ctx *c = calloc(1, sizeof(*c));
	if (!c) {
		fprintf(err, "dsmemdecode: %s: out of memory\n", path);
		return DSMT_EXIT_BAD;
	}
	if (ctx_open(c, path, err)) {
		free(c);
		return DSMT_EXIT_BAD;
	}
	int code;
	if (ctx_defs(c)) {
		code = report_stop(c);
	} else {
		c->dump = out;
		fprintf(out, "# %s: dsmemtrace format %u.%u; first column: data frame number (0 = header)\n", path,
			c->rd.major, c->rd.minor);
		run_pass(c, PASS_DUMP);
		code = report_stop(c);
	}
	ctx_free(c);
	free(c);
	return code;
}
