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
	int has_drv; /* the trace has SOURCE or DRV records (else driver-level numbers are unknown) */
	struct dsmt_source *sources;
	size_t nsources;
	uint64_t drv_ops[DSMT_DRV_OPS]; /* DRV records replayed, by op (0: op 0) */
	struct dsmt_breakdown *bk; /* one per reported device */
	size_t nbk;
};

/* Decode `path`.  Messages go to `err` prefixed with "dsmemdecode: FILE: ".
 * Returns an exit code: 0 ok (possibly truncated), 2 when the file is not a
 * readable trace (*out left empty) or damaged (*out holds what decoded). */
int dsmt_decode_file(const char *path, const struct dsmt_opts *o, struct dsmt_process *out,
		     FILE *err);
void dsmt_process_free(struct dsmt_process *p);
/* Value of a META key, or NULL. */
const char *dsmt_meta_get(const struct dsmt_process *p, const char *key);

/* Print every record of `path` to `out`. Same return values. */
int dsmt_dump_file(const char *path, FILE *out, FILE *err);

/* Order processes by run (META run_id), rank (as a number), pid; processes
 * without a run id, then without a rank, come first; ties keep their order. */
void dsmt_sort_processes(struct dsmt_process *ps, size_t n);

/* Reports over decoded processes. */
void dsmt_write_json(FILE *f, const struct dsmt_process *ps, size_t n);
void dsmt_write_table(FILE *f, const struct dsmt_process *ps, size_t n);
void dsmt_write_csv(FILE *f, const struct dsmt_process *ps, size_t n);

#endif
