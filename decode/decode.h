/* dsmemdecode library: decode one trace file (one process) into per-step
 * memory numbers, or dump its records. */
#ifndef DSMT_DECODE_H
#define DSMT_DECODE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define DSMT_DEFAULT_STEP_RE "^(dsmemtrace:step|train_step)"

/* exit codes */
enum { DSMT_EXIT_OK = 0, DSMT_EXIT_USAGE = 1, DSMT_EXIT_BAD = 2 };

struct dsmt_opts {
	const char *step_re; /* POSIX ERE matched against NVTX range/mark names */
	int ignore_totals;   /* skip the allocator-totals cross-check */
	int verbose;
	size_t reorder_max;  /* reorder window bound (0 = default) */
	int grad_accum;      /* DeepSpeed micro-steps per step; 0 = from the command line, else 1 */
	int attrib;          /* attribute every byte (categories, phases): the JSON report's breakdowns */
	int top;             /* > 0: the `top` largest groups of live bytes at each step's peak, by site */
	int peak_blocks;     /* list every tensor block live at each interval's peak (validation) */
	int timeline;        /* keep the run as a timeline (dsmt_process.tl: --perfetto); needs attrib */
	/* called after each data frame with the compressed bytes read and the
	 * file's size (progress on a terminal); NULL: none */
	void (*progress)(void *arg, const char *file, uint64_t done, uint64_t total);
	void *progress_arg;
	int series;          /* the allocated-by-category time series, downsampled (--html) */
	int tsnap;           /* the allocator state at the end and its event trace (--torch-snapshot) */
};

/* Attribution (decode/attrib.h has the rules): categories in report order,
 * the last one `cached` (reserved but free); phases 1.. (0: unknown) */
#define DSMT_BK_NCAT 12
#define DSMT_BK_NPHASE 6
const char *dsmt_cat_name(unsigned cat);
const char *dsmt_phase_name(unsigned phase);

/* Bytes by category at one moment (allocated level, + cached), and the
 * temporaries among them by the phase they were allocated in. */
struct dsmt_bk {
	uint64_t cat[DSMT_BK_NCAT];
	uint64_t tmp_phase[DSMT_BK_NPHASE];
};

/* An allocation site: call site + Python stack id + native stack id, with
 * its frames rendered (Python innermost first, "qualname (file:line)", then
 * native: "func (file:line)" or "module+0xoffset"). */
struct dsmt_site {
	uint64_t site, pystack, stack;
	char **frames;
	size_t nframes, npy; /* npy: the first npy frames are Python's */
};

/* One group of live bytes at a peak: one site, one category. */
struct dsmt_top {
	uint64_t bytes, count;
	unsigned cat;
	size_t site; /* index into dsmt_process.sites */
};

/* A tensor block live at an interval's peak, with its category
 * (--peak-blocks: for checking the rules against ground truth). */
struct dsmt_block {
	uint64_t ptr, size;
	uint64_t seq; /* of its allocation */
	unsigned cat;
};

/* A site whose allocations of consecutive steps survive to the end of the
 * run (a leak finder). */
struct dsmt_growth {
	int device;
	size_t site;
	unsigned cat;
	uint64_t bytes;            /* surviving bytes allocated in steps first..last */
	int first_step, last_step; /* the run of consecutive steps */
	uint64_t *per_step;        /* last_step - first_step + 1 entries */
};

struct dsmt_meta {
	char *key;
	char *val; /* NUL-terminated copy; val_len counts embedded NULs */
	size_t val_len;
};

/* What an interval is (reports list them in time order). */
enum dsmt_kind { DSMT_INIT, DSMT_STEP, DSMT_EVAL, DSMT_TAIL };

/* How steps were found. */
enum dsmt_rule {
	DSMT_RULE_MARKERS,   /* NVTX ranges or marks matching --step-marker */
	DSMT_RULE_DEEPSPEED, /* DeepSpeedEngine.forward/backward ranges on the main thread */
	DSMT_RULE_WHOLE_RUN, /* neither: the whole run is step 1 */
};

/* Numbers for one interval on one device. */
struct dsmt_row {
	int kind;   /* enum dsmt_kind */
	int step;   /* DSMT_STEP: step 1..; DSMT_EVAL: evaluation pass 1..; else 0 */
	int device; /* CUDA device index */
	int paused; /* the interval overlaps a pause in tracing */
	uint64_t start_ns, end_ns; /* CLOCK_REALTIME */
	uint64_t peak_alloc, end_alloc, peak_res, end_res;
	uint64_t allocs, frees;
	/* driver level (valid when the process has_drv): bytes the driver handed
	 * the process on this device, and pinned host memory (process-wide: the
	 * same in every device's row of an interval) */
	uint64_t peak_dev, end_dev, peak_hp, end_hp;
	/* host memory (HOST records, format 1.3): the largest RSS sampled inside
	 * the interval and the last sample at or before its end (process-wide) */
	int has_peak_rss, has_end_rss;
	uint64_t peak_rss, end_rss;
	/* attribution (dsmt_process.attrib): the allocated level by category at
	 * the interval's peak and at its end; the phase of the allocation that
	 * made the peak (0 when the peak is the interval's starting value), its
	 * time and the NVTX ranges open on its thread, outer to inner */
	struct dsmt_bk peak_bk, end_bk;
	unsigned peak_phase;
	uint64_t peak_ts_ns;
	char **peak_nvtx;
	size_t npeak_nvtx;
	struct dsmt_top *top; /* --top */
	size_t ntop;
	struct dsmt_block *blocks; /* --peak-blocks */
	size_t nblocks;
};

/* A SOURCE record: who records driver-level events from seq on. */
struct dsmt_source {
	uint64_t seq, ts_ns; /* ts_ns: CLOCK_REALTIME */
	uint64_t via, reason; /* DSMT_VIA_*, enum dsmt_src_reason (as recorded) */
	char *name;          /* NULL: none */
};

/* Where a device's driver-level bytes were when they first reached their
 * run maximum. */
struct dsmt_breakdown {
	int device;
	int at_known;         /* 0: the device level never rose above 0 */
	uint64_t peak_device, at_ns;
	uint64_t allocated, reserved;
	uint64_t nccl, workspace, statics, managed, other, imported;
	int has_sample;       /* an NVML sample with proc_used valid exists for the device */
	int64_t context;      /* proc_used - device at that sample */
	uint64_t nvml_used;   /* that sample's proc_used */
	int has_rbk;          /* attribution: reserved (torch) by category at that moment */
	struct dsmt_bk rbk;   /* allocated categories + cached */
};

/* The timeline (dsmt_opts.timeline): in replay order, every change of a
 * level (SET: its new value), every tensor block of a category (ADD at its
 * allocation, SUB at its free; the category the block gets at its free, or
 * at the end of the run while live), NVTX ranges, marks and OOMs. */
enum dsmt_tl_track {
	DSMT_TL_ALLOCATED, DSMT_TL_RESERVED, DSMT_TL_DEVICE, DSMT_TL_IMPORTED, /* per device */
	DSMT_TL_NVML,     /* per device: NVML's process used memory (SAMPLE records) */
	DSMT_TL_PINNED,   /* process-wide: pinned host memory */
	DSMT_TL_RSS,      /* process-wide: resident set (HOST records) */
	DSMT_TL_NLEVEL,
	DSMT_TL_CAT0 = 16, /* + category (0 .. DSMT_BK_NCAT - 2): allocated bytes of the category */
};
enum dsmt_tl_op {
	DSMT_TL_SET, DSMT_TL_ADD, DSMT_TL_SUB, /* counters (track, dev1: device + 1, 0 process-wide) */
	DSMT_TL_PUSH, DSMT_TL_POP,             /* NVTX push/pop on thread `thread`, domain `id`; v: name */
	DSMT_TL_START, DSMT_TL_END,            /* NVTX start/end of range `id`; START's v: name */
	DSMT_TL_MARK,                          /* NVTX mark; v: name */
	DSMT_TL_OOM,                           /* out of memory on dev1; v: the requested size */
};
#define DSMT_TL_NONAME UINT64_MAX /* v of a PUSH/START/MARK whose name is unknown */
struct dsmt_tl_ev {
	uint64_t ts_ns; /* CLOCK_REALTIME */
	uint64_t v;     /* SET: value; ADD/SUB/OOM: bytes; PUSH/START/MARK: index into tl_names */
	uint64_t id;    /* PUSH/POP: NVTX domain; START/END: range id */
	uint32_t thread; /* index into tl_tids / tl_tnames */
	uint8_t op, track, dev1;
};

/* --html: one pixel column of a device's time series (decode/series.c).
 * [0] is the lowest allocated level reached in the column, [1] the highest
 * (its first moment), each with its time and its bytes by category (each
 * block in the category the decoder gives it in that interval, as the
 * breakdowns do; bytes no block accounts for are `other`); reserved, device
 * and pinned host memory: the highest level in the column.  A column
 * without events holds the level it inherited. */
struct dsmt_scol {
	uint64_t ts_ns[2], alloc[2];
	uint64_t cat[2][DSMT_BK_NCAT - 1];
	uint64_t res, dev, hp;
};

struct dsmt_series {
	int device;
	uint64_t t0_ns, t1_ns; /* the columns cover [t0_ns, t1_ns] evenly */
	size_t ncol;
	struct dsmt_scol *col;
	uint64_t peak, peak_ns; /* the highest allocated level and its first moment */
};
#define DSMT_SERIES_COLS 1000

/* --torch-snapshot: what torch.cuda.memory._snapshot() reports, rebuilt
 * (decode/snapshot.c writes it as a pickle). */
struct dsmt_frame {
	char *name, *file;
	int line;
};
struct dsmt_tstack { /* innermost first: native frames (the call site first), then Python */
	struct dsmt_frame *f;
	size_t n;
};
struct dsmt_tblock { /* a tensor block live at the end of the trace */
	int device;
	uint64_t addr, size;
	uint32_t stack; /* index into dsmt_tsnap.stacks */
};
struct dsmt_tseg { /* a segment of torch's reserved memory live at the end */
	int device, expandable;
	uint64_t addr, size;
};
enum { DSMT_TA_ALLOC, DSMT_TA_FREE, DSMT_TA_SEG_ALLOC, DSMT_TA_SEG_FREE, DSMT_TA_OOM };
struct dsmt_tev { /* one allocator event, in replay order */
	uint64_t ts_ns, addr, size;
	uint32_t stack;
	uint8_t action; /* DSMT_TA_* */
	int device;
};
struct dsmt_tsnap {
	struct dsmt_tstack *stacks;
	size_t nstacks;
	struct dsmt_tblock *blocks;
	size_t nblocks;
	struct dsmt_tseg *segs;
	size_t nsegs;
	struct dsmt_tev *trace;
	size_t ntrace;
	int maxdev; /* the highest device index seen (-1: none) */
};

#define DSMT_DRV_OPS 128 /* op counters: index = op (1..126); 127 = unknown larger op */
/* "alloc", "map", ... for an op of format.h's enum dsmt_drv_op, else NULL */
const char *dsmt_drv_op_name(unsigned op);

struct dsmt_process {
	const char *file;
	struct dsmt_meta *meta;
	size_t nmeta;
	int truncated, damaged;
	int rule;         /* enum dsmt_rule */
	int grad_accum;   /* DSMT_RULE_DEEPSPEED: micro-steps per step */
	struct dsmt_row *rows; /* intervals in time order, devices ascending in each */
	size_t nrows;
	uint64_t events, ooms, lost, missing;
	/* the first DSMT_OOM_MAX out-of-memory events: what was live when the
	 * allocator gave up (bk, each of them, when attribution ran) */
	struct dsmt_oom *oom;
	size_t noom;
	int has_drv; /* the trace has SOURCE or DRV records (else driver-level numbers are unknown) */
	struct dsmt_source *sources;
	size_t nsources;
	uint64_t drv_ops[DSMT_DRV_OPS]; /* DRV records replayed, by op (0: op 0) */
	struct dsmt_breakdown *bk; /* one per reported device */
	size_t nbk;
	int attrib, top; /* attribution was computed (top: --top N) */
	int peak_blocks; /* rows carry blocks (--peak-blocks) */
	struct dsmt_site *sites; /* sites named by top and growth */
	size_t nsites;
	struct dsmt_growth *growth;
	size_t ngrowth;
	/* host memory (HOST records): samples, the largest RSS and virtual size,
	 * and with attribution the largest RSS sampled in each phase
	 * (phase_rss_n[ph] samples; index: DSMT_PH_*) */
	uint64_t host_samples, host_peak_rss, host_peak_vsz;
	uint64_t phase_rss[DSMT_BK_NPHASE], phase_rss_n[DSMT_BK_NPHASE];
	/* the timeline (dsmt_opts.timeline; else empty) */
	struct dsmt_tl_ev *tl;
	size_t ntl;
	char **tl_names; /* NVTX names */
	size_t ntl_names;
	uint64_t *tl_tids; /* threads: tid and name (NULL: none) */
	char **tl_tnames;
	size_t ntl_threads;
	uint64_t tl_end_ns; /* the last event's time */
	struct dsmt_series *series; /* --html: one per reported device */
	size_t nseries;
	struct dsmt_tsnap *tsnap;   /* --torch-snapshot */
};

/* An out-of-memory event (OOM record): when, where, what was asked for, the
 * allocator's own totals, ours at that moment, and with attribution the
 * live bytes by category (cached = reserved - allocated). */
#define DSMT_OOM_MAX 16
struct dsmt_oom {
	uint64_t seq, ts_ns;
	int device, kind, step; /* the interval it fell in (enum dsmt_kind, step number) */
	uint64_t requested, torch_alloc, torch_res, alloc, res;
	int has_bk;
	struct dsmt_bk bk;
};

/* Decode `path`.  Messages go to `err` prefixed with "dsmemdecode: FILE: ".
 * Returns an exit code: 0 ok (possibly truncated), 2 when the file is not a
 * readable trace (*out left empty) or damaged (*out holds what decoded). */
int dsmt_decode_file(const char *path, const struct dsmt_opts *o, struct dsmt_process *out,
		     FILE *err);
void dsmt_process_free(struct dsmt_process *p);
/* Value of a META key, or NULL. */
const char *dsmt_meta_get(const struct dsmt_process *p, const char *key);
/* A META key's value as a whole decimal integer: 1 and *v set, or 0 when
 * the key is absent, empty or not entirely a number (*v untouched). */
int dsmt_meta_int(const struct dsmt_process *p, const char *key, long long *v);

/* Print every record of `path` to `out`. Same return values. */
int dsmt_dump_file(const char *path, FILE *out, FILE *err);

/* Order processes by run (META run_id), rank (as a number), pid; processes
 * without a run id, then without a rank, come first; ties keep their order. */
void dsmt_sort_processes(struct dsmt_process *ps, size_t n);

/* An interval's label as the table prints it: init, 1, 2, ..., eval1, ...,
 * tail, with a `*` when it overlaps a pause in tracing */
const char *dsmt_row_label(const struct dsmt_row *r, char *buf, size_t n);
/* s as a JSON string ("null" for NULL) */
void dsmt_json_str(FILE *f, const char *s);

/* Reports over decoded processes. */
void dsmt_write_json(FILE *f, const struct dsmt_process *ps, size_t n);
void dsmt_write_table(FILE *f, const struct dsmt_process *ps, size_t n);
/* The table's attribution sections (--breakdown): per interval the breakdown
 * at its peak, top sites (--top), growth. */
void dsmt_write_breakdown(FILE *f, const struct dsmt_process *ps, size_t n);
void dsmt_write_csv(FILE *f, const struct dsmt_process *ps, size_t n);
/* --summary: one row per run and rank (configuration from the command line,
 * MaxMemAllocated, ...), then the max and the skew across ranks; table, or
 * JSON (dsmemdecode-summary/2, with the estimator cross-check).  Processes sorted by run and rank. */
void dsmt_write_summary(FILE *f, const struct dsmt_process *ps, size_t n, int json);
/* JSON: the largest RSS per phase ({"init": N, ...}, null without attribution) */
void dsmt_json_phase_rss(FILE *f, const struct dsmt_process *p);
/* micro-batch and seq from the recorded command line (0: unknown) */
void dsmt_cmdline_tokens(const struct dsmt_process *p, long *mbs, long *seq);
/* --what-if SPEC (whatif.c): projection to another micro-batch/seq; returns
 * an exit code (usage for a bad SPEC, bad when no run can be used) */
int dsmt_write_whatif(FILE *f, const struct dsmt_process *ps, size_t n, const char *spec, int json, FILE *err);
/* dsmemdecode diff: the runs a[0..na) and b[0..nb) (each sorted by rank,
 * decoded with attribution and --top) compared rank by rank: per interval
 * and device the levels of both and their difference, the categories at
 * each side's MaxMemAllocated peak, the sites there that appear, grow,
 * shrink or go (`top` of them); table, or JSON (dsmemdecode-diff/1). */
void dsmt_write_diff(FILE *f, const struct dsmt_process *a, size_t na, const struct dsmt_process *b, size_t nb,
		     int json, int top);
/* --perfetto: Chrome trace-event JSON of the processes' timelines (decoded
 * with dsmt_opts.timeline): counters per level and category, NVTX ranges as
 * slices per thread, OOMs and interval starts as instants.  window_us > 0:
 * a counter's changes within window_us of the first one merge into its
 * maximum and its last value.  -1: out of memory. */
int dsmt_write_perfetto(FILE *f, const struct dsmt_process *ps, size_t n, uint64_t window_us);
/* --html: one self-contained page (SVG charts, a little script): per process
 * and device allocated memory by category over time, reserved, device and
 * pinned host lines, step boundaries, the peak with its breakdown and top
 * sites, per-step bars; a selector when there are several.  Needs series. */
void dsmt_write_html(FILE *f, const struct dsmt_process *ps, size_t n);
/* --torch-snapshot: p's state at the end of its trace as the dict
 * torch.cuda.memory._snapshot() returns, pickled (protocol 2). */
void dsmt_write_torch_snapshot(FILE *f, const struct dsmt_process *p);

/* Downsampling (decode/series.c).  Level changes of one device, in replay
 * order: op A (a tensor block: size, lvl = allocated after it; cat: its
 * category in the interval it was allocated in), F (its free; blk = the
 * index of its A entry, UINT32_MAX: unknown), L (allocated changed
 * otherwise: lvl), R (reserved: lvl), D (device: lvl), H (pinned host: lvl,
 * every device).  A block's category can differ from one interval to the
 * next (the decoder decides it at the end of each interval, or at the free):
 * C entries, in a list of their own, move block blk's bytes from category
 * pad to cat before log entry lvl (the first of the interval). */
enum { DSMT_TL_A, DSMT_TL_F, DSMT_TL_L, DSMT_TL_R, DSMT_TL_D, DSMT_TL_H, DSMT_TL_C };
struct dsmt_tlent {
	uint64_t ts_ns, size, lvl;
	uint32_t blk;
	uint8_t dev1, op, cat, pad;
};
/* The ncol columns of device dev1 over [t0, t1] from entries e[0..n)
 * (all devices; ts_ns ascending) and changes ch[0..nch) (lvl ascending).
 * -1 when memory runs out. */
int dsmt_series_build(const struct dsmt_tlent *e, size_t n, const struct dsmt_tlent *ch, size_t nch, unsigned dev1,
		      uint64_t t0, uint64_t t1, size_t ncol, struct dsmt_series *out);

#endif
