/* --summary: one row per run and rank, like the seed note's tables
 * (README, "Summary").  Configuration from the recorded command line (META
 * cmdline, NUL-separated), numbers from the decoded rows; what the trace
 * cannot tell is unknown: `?` in the table, null in JSON. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attrib.h"
#include "decode.h"

#define NTOPCAT 3

static void json_s(FILE *f, const char *key, const char *s, int num);
static const char *txt(const char *s);

enum { C_TIME10, C_MAXALLOC, C_ENDALLOC, C_PEAKRES, C_PEAKDEV, C_RSS, C_PINNED, NNUM };
static const char *const num_key[NNUM] = {"time_per_10_steps_s", "max_mem_allocated", "mem_allocated",
					  "peak_reserved", "peak_device", "host_rss_peak", "host_pinned_peak"};

struct srow {
	const struct dsmt_process *p;
	const char *run_id;
	long long rank;
	int has_rank;
	char model[128], world[32], zero[32], offload[32], mbs[32], seq[32]; /* "" = unknown */
	int known[NNUM];
	double v[NNUM]; /* bytes, or seconds */
	int max_step;   /* the step of MaxMemAllocated (0: none) */
	const struct dsmt_row *pk; /* its row (breakdown) */
	/* host memory (HOST records) like the seed's last table: RSS at the end
	 * of init (the last sample at or before the first step), the largest
	 * RSS sampled inside training steps */
	int has_rss_init, has_rss_train;
	uint64_t rss_init, rss_train;
};

/* the value of --NAME VALUE or --NAME=VALUE in the command line; flag: 1
 * when present without a value */
static const char *cmd_arg(const char *const *argv, int argc, const char *name, int *present)
{
	size_t n = strlen(name);
	for (int i = 0; i < argc; i++) {
		if (strncmp(argv[i], name, n))
			continue;
		if (argv[i][n] == '=') {
			*present = 1;
			return argv[i] + n + 1;
		}
		if (argv[i][n])
			continue;
		*present = 1;
		return i + 1 < argc && strncmp(argv[i + 1], "--", 2) ? argv[i + 1] : NULL;
	}
	return NULL;
}

static void copy(char *dst, size_t cap, const char *s)
{
	snprintf(dst, cap, "%s", s);
}

static void parse_cmdline(const struct dsmt_process *p, struct srow *r)
{
	const char *v = NULL;
	size_t len = 0;
	for (size_t i = 0; i < p->nmeta; i++)
		if (!strcmp(p->meta[i].key, "cmdline")) {
			v = p->meta[i].val;
			len = p->meta[i].val_len;
		}
	if (!v)
		return;
	const char *argv[512];
	int argc = 0;
	for (size_t i = 0; i < len && argc < 512;) {
		argv[argc++] = v + i;
		i += strlen(v + i) + 1;
	}
	int any = 0, pr = 0;
	const char *m = cmd_arg(argv, argc, "--model_name_or_path", &pr);
	if (!m)
		m = cmd_arg(argv, argc, "--model", &pr);
	if (m) {
		const char *b = strrchr(m, '/');
		copy(r->model, sizeof r->model, b && b[1] ? b + 1 : m);
	}
	any |= pr;
	pr = 0;
	const char *z = cmd_arg(argv, argc, "--zero_stage", &pr);
	if (z)
		copy(r->zero, sizeof r->zero, z);
	any |= pr;
	pr = 0;
	const char *b = cmd_arg(argv, argc, "--per_device_train_batch_size", &pr);
	if (b)
		copy(r->mbs, sizeof r->mbs, b);
	any |= pr;
	pr = 0;
	const char *s = cmd_arg(argv, argc, "--max_seq_len", &pr);
	if (s)
		copy(r->seq, sizeof r->seq, s);
	any |= pr;
	int off = 0;
	cmd_arg(argv, argc, "--offload", &off);
	/* --offload is a store_true flag: its absence says "no" only in a
	 * command line that has the example's (DeepSpeed-Chat's) flags */
	if (off)
		copy(r->offload, sizeof r->offload, "yes");
	else if (any)
		copy(r->offload, sizeof r->offload, "no");
}

static void fill(const struct dsmt_process *p, struct srow *r)
{
	memset(r, 0, sizeof(*r));
	r->p = p;
	r->run_id = dsmt_meta_get(p, "run_id");
	long long ws;
	r->has_rank = dsmt_meta_int(p, "rank", &r->rank);
	if (dsmt_meta_int(p, "world_size", &ws))
		copy(r->world, sizeof r->world, dsmt_meta_get(p, "world_size"));
	parse_cmdline(p, r);
	uint64_t t_first = 0, t_last = 0;
	int first_step = 0, last_step = 0;
	for (size_t i = 0; i < p->nrows; i++) {
		const struct dsmt_row *w = &p->rows[i];
		if (w->peak_res > r->v[C_PEAKRES] || !r->known[C_PEAKRES])
			r->v[C_PEAKRES] = (double)w->peak_res;
		r->known[C_PEAKRES] = 1;
		if (p->has_drv) {
			if (w->peak_dev > r->v[C_PEAKDEV])
				r->v[C_PEAKDEV] = (double)w->peak_dev;
			if (w->peak_hp > r->v[C_PINNED])
				r->v[C_PINNED] = (double)w->peak_hp;
			r->known[C_PEAKDEV] = r->known[C_PINNED] = 1;
		}
		if (w->kind == DSMT_INIT && w->has_end_rss) {
			r->rss_init = w->end_rss;
			r->has_rss_init = 1;
		}
		if (w->kind != DSMT_STEP)
			continue;
		if (w->has_peak_rss && (!r->has_rss_train || w->peak_rss > r->rss_train)) {
			r->rss_train = w->peak_rss;
			r->has_rss_train = 1;
		}
		if (!r->known[C_MAXALLOC] || w->peak_alloc > r->v[C_MAXALLOC]) {
			r->v[C_MAXALLOC] = (double)w->peak_alloc;
			r->max_step = w->step;
			r->pk = w;
		}
		r->known[C_MAXALLOC] = 1;
		if (w->step >= last_step) { /* the last step's end (devices: the last listed) */
			r->v[C_ENDALLOC] = (double)w->end_alloc;
			r->known[C_ENDALLOC] = 1;
			last_step = w->step;
			t_last = w->end_ns;
		}
		if (!first_step || w->step < first_step) {
			first_step = w->step;
			t_first = w->start_ns;
		}
	}
	/* time per 10 steps: only with step markers or DeepSpeed's ranges (the
	 * whole-run rule has no steps to time) */
	if (last_step && p->rule != DSMT_RULE_WHOLE_RUN && t_last > t_first) {
		r->v[C_TIME10] = (double)(t_last - t_first) / 1e9 * 10.0 / (last_step - first_step + 1);
		r->known[C_TIME10] = 1;
	}
	if (p->host_samples) {
		r->v[C_RSS] = (double)p->host_peak_rss;
		r->known[C_RSS] = 1;
	}
}

/* the NTOPCAT largest categories at the MaxMemAllocated peak */
static int top_cats(const struct srow *r, unsigned *cat)
{
	if (!r->pk || !r->p->attrib)
		return 0;
	int n = 0;
	unsigned used[DSMT_BK_NCAT] = {0};
	for (; n < NTOPCAT; n++) {
		int best = -1;
		for (unsigned c = 0; c + 1 < DSMT_BK_NCAT; c++) /* cached aside */
			if (!used[c] && r->pk->peak_bk.cat[c] && (best < 0 || r->pk->peak_bk.cat[c] > r->pk->peak_bk.cat[best]))
				best = (int)c;
		if (best < 0)
			break;
		used[best] = 1;
		cat[n] = (unsigned)best;
	}
	return n;
}


/* ---- estimator cross-check (issue 6 part 4) ------------------------------
 * P and L from the public OPT configurations, the table of
 * examples/deepspeed_sft/main.py (OPT), counted as transformers' OPTForCausalLM
 * lays them out: embed_tokens V x E (E = word_embed_proj_dim, else hidden d;
 * lm_head tied to it, counted once), embed_positions (2048 + 2) x d,
 * project_in/out E x d each when E != d, per layer 4 (d^2 + d) attention +
 * 2 x 2d layer norms + (d f + f) fc1 + (f d + d) fc2, and a final 2d layer
 * norm when do_layer_norm_before.  L = the largest single module's own
 * parameters (embed_tokens for every OPT size), as
 * estimate_zero3_model_states_mem_needs_all_live takes it. */
struct opt_cfg {
	const char *name;
	uint64_t d, layers, ffn, proj; /* proj: word_embed_proj_dim, 0 = d */
	int ln_before;
};
static const struct opt_cfg OPT_CFG[] = {
	{"opt-125m", 768, 12, 3072, 0, 1},    {"opt-350m", 1024, 24, 4096, 512, 0},
	{"opt-1.3b", 2048, 24, 8192, 0, 1},   {"opt-6.7b", 4096, 32, 16384, 0, 1},
	{"opt-13b", 5120, 40, 20480, 0, 1},
};
#define OPT_VOCAB 50272u
#define OPT_POS (2048u + 2u)

static int opt_params(const char *model, uint64_t *P, uint64_t *L)
{
	for (size_t i = 0; i < sizeof OPT_CFG / sizeof OPT_CFG[0]; i++) {
		const struct opt_cfg *c = &OPT_CFG[i];
		if (strcmp(model, c->name))
			continue;
		uint64_t d = c->d, f = c->ffn, e = c->proj ? c->proj : d;
		uint64_t emb = OPT_VOCAB * e, pos = OPT_POS * d;
		uint64_t layer = 4 * (d * d + d) + 2 * 2 * d + (d * f + f) + (f * d + d);
		*P = emb + pos + (e != d ? 2 * e * d : 0) + c->layers * layer + (c->ln_before ? 2 * d : 0);
		*L = emb;
		if (pos > *L)
			*L = pos;
		if (d * f + f > *L)
			*L = d * f + f;
		return 1;
	}
	return 0;
}

/* model-state categories measured, and what the estimate leaves out */
static const unsigned EST_MEASURED[] = {DSMT_CAT_PARAMETERS, DSMT_CAT_MASTER, DSMT_CAT_GRADIENTS, DSMT_CAT_OPTSTATES};
static const unsigned EST_LEFTOUT[] = {DSMT_CAT_ACTIVATIONS, DSMT_CAT_BUCKETS,   DSMT_CAT_GATHERED, DSMT_CAT_TEMPORARIES,
				       DSMT_CAT_COMM,        DSMT_CAT_WORKSPACE, DSMT_CAT_OTHER,    DSMT_CAT_CACHED};
#define N_MEAS (sizeof EST_MEASURED / sizeof EST_MEASURED[0])
#define N_LEFT (sizeof EST_LEFTOUT / sizeof EST_LEFTOUT[0])

struct est {
	int has_p, has_est, has_meas;
	uint64_t P, L, N, bytes;
	const char *formula, *shortf; /* DeepSpeed's function and branch; the formula alone */
	uint64_t meas[N_MEAS], meas_total;
	uint64_t peak[N_MEAS], peak_total; /* the same categories at the peak */
};

/* DeepSpeed (>= 0.14.3, /work/shared/DEEPSPEED.md section 6), per GPU:
 *   estimate_zero2_model_states_mem_needs (stages 1 and 2):
 *     no offload 2P + int(18P/N); cpu_offload 2P
 *   estimate_zero3_model_states_mem_needs: 4L + int(18P/N) without offload;
 *     the example's --offload moves optimizer and parameters
 *     (cpu_offload = cpu_offload_params = True): 4L
 * N = the world size (the total GPU count), offload from --offload. */
static void estimate(const struct srow *r, struct est *e)
{
	memset(e, 0, sizeof(*e));
	e->has_p = *r->model && opt_params(r->model, &e->P, &e->L);
	char *x;
	long long n = *r->world ? strtoll(r->world, &x, 10) : 0;
	long long z = *r->zero ? strtoll(r->zero, &x, 10) : -1;
	if (e->has_p && n > 0 && *r->offload && (z == 1 || z == 2 || z == 3)) {
		int off = !strcmp(r->offload, "yes");
		e->N = (uint64_t)n;
		e->has_est = 1;
		if (z < 3) {
			e->formula = off ? "estimate_zero2_model_states_mem_needs(cpu_offload): 2P"
					 : "estimate_zero2_model_states_mem_needs: 2P + 18P/N";
			e->shortf = off ? "2P" : "2P+18P/N";
			e->bytes = 2 * e->P + (off ? 0 : 18 * e->P / e->N);
		} else {
			e->formula = off ? "estimate_zero3_model_states_mem_needs(cpu_offload, cpu_offload_params): 4L"
					 : "estimate_zero3_model_states_mem_needs: 4L + 18P/N";
			e->shortf = off ? "4L" : "4L+18P/N";
			e->bytes = 4 * e->L + (off ? 0 : 18 * e->P / e->N);
		}
	}
	if (r->pk && r->p->attrib) {
		e->has_meas = 1;
		for (size_t k = 0; k < N_MEAS; k++) {
			e->meas[k] = r->pk->end_bk.cat[EST_MEASURED[k]];
			e->meas_total += e->meas[k];
			e->peak[k] = r->pk->peak_bk.cat[EST_MEASURED[k]];
			e->peak_total += e->peak[k];
		}
	}
}

static const char *const EST_MEANING =
	"DeepSpeed's estimate_zero2/3_model_states_mem_needs per GPU (>= 0.14.3: ZeRO-1/2 2P + 18P/N, with offload 2P; "
	"ZeRO-3 4L + 18P/N, with --offload (optimizer and parameters) 4L), P and L (largest module) from the public OPT "
	"configuration of the recorded --model, N the world size; measured: parameters, master_weights, gradients and "
	"optimizer_states at the end of the MaxMemAllocated step (measured_at_peak: the same at its peak); left out: the other "
	"categories (and cached) at that peak";

/* the measured model-state categories and their total, or null */
static void json_meas(FILE *f, int known, const uint64_t *v, uint64_t total)
{
	if (!known) {
		fputs("null", f);
		return;
	}
	fputc('{', f);
	for (size_t k = 0; k < N_MEAS; k++)
		fprintf(f, "\"%s\": %" PRIu64 ", ", dsmt_cat_name(EST_MEASURED[k]), v[k]);
	fprintf(f, "\"total\": %" PRIu64 "}", total);
}

static void json_u64(FILE *f, const char *key, int known, uint64_t v)
{
	if (known)
		fprintf(f, "\"%s\": %" PRIu64, key, v);
	else
		fprintf(f, "\"%s\": null", key);
}

static void json_estimate(FILE *f, const struct srow *r)
{
	struct est e;
	estimate(r, &e);
	fputs(",\n     \"estimate\": {", f);
	json_u64(f, "params", e.has_p, e.P);
	fputs(", ", f);
	json_u64(f, "largest_layer_params", e.has_p, e.L);
	fputs(", ", f);
	json_s(f, "formula", e.has_est ? e.formula : "", 0);
	fputs(", ", f);
	json_u64(f, "model_states_bytes", e.has_est, e.bytes);
	fputs(",\n      \"measured\": ", f);
	json_meas(f, e.has_meas, e.meas, e.meas_total);
	fputs(",\n      \"measured_at_peak\": ", f);
	json_meas(f, e.has_meas, e.peak, e.peak_total);
	fputs(",\n      \"left_out_at_peak\": ", f);
	if (!e.has_meas)
		fputs("null", f);
	else {
		fputc('{', f);
		for (size_t k = 0; k < N_LEFT; k++)
			fprintf(f, "%s\"%s\": %" PRIu64, k ? ", " : "", dsmt_cat_name(EST_LEFTOUT[k]),
				r->pk->peak_bk.cat[EST_LEFTOUT[k]]);
		fputc('}', f);
	}
	fputc('}', f);
}

static void gib(FILE *f, int known, uint64_t v, int width)
{
	if (known)
		fprintf(f, "  %*.2f", width, v / 1073741824.0);
	else
		fprintf(f, "  %*s", width, "?");
}

static void text_estimates(FILE *f, const struct srow *rs, size_t n)
{
	fputs("estimator cross-check (GiB): model states per GPU, DeepSpeed's estimate beside the measured parameters, "
	      "master_weights, gradients and optimizer_states at the end of the MaxMemAllocated step (their sum at its "
	      "peak: at_peak); left out: the other categories at that peak\n",
	      f);
	fprintf(f, "%-4s  %9s  %9s  %3s  %-8s  %8s  %8s  %7s  %10s  %14s  %9s  %16s  %s\n", "rank", "P", "L", "N",
		"formula", "estimate", "measured", "at_peak", "parameters", "master_weights", "gradients", "optimizer_states",
		"left out at the peak");
	for (size_t k = 0; k < n; k++) {
		const struct srow *r = &rs[k];
		struct est e;
		estimate(r, &e);
		char rk[24], pp[24], ll[24];
		if (r->has_rank)
			snprintf(rk, sizeof rk, "%lld", r->rank);
		else
			snprintf(rk, sizeof rk, "?");
		if (e.has_p) {
			snprintf(pp, sizeof pp, "%.3e", (double)e.P);
			snprintf(ll, sizeof ll, "%.3e", (double)e.L);
		} else {
			snprintf(pp, sizeof pp, "?");
			snprintf(ll, sizeof ll, "?");
		}
		fprintf(f, "%-4s  %9s  %9s  %3s  %-8s", rk, pp, ll, txt(r->world), e.has_est ? e.shortf : "?");
		gib(f, e.has_est, e.bytes, 8);
		gib(f, e.has_meas, e.meas_total, 8);
		gib(f, e.has_meas, e.peak_total, 7);
		static const int MW[N_MEAS] = {10, 14, 9, 16};
		for (size_t q = 0; q < N_MEAS; q++)
			gib(f, e.has_meas, e.meas[q], MW[q]);
		fputs("  ", f);
		if (!e.has_meas)
			fputc('?', f);
		else {
			int any = 0;
			for (size_t q = 0; q < N_LEFT; q++) {
				uint64_t v = r->pk->peak_bk.cat[EST_LEFTOUT[q]];
				if (!v)
					continue;
				fprintf(f, "%s%s %.2f", any ? ", " : "", dsmt_cat_name(EST_LEFTOUT[q]), v / 1073741824.0);
				any = 1;
			}
			if (!any)
				fputs("none", f);
		}
		fputc('\n', f);
	}
}

static const char *const MEANING =
	"largest per-step peak of allocated bytes over training steps (init, evaluation and tail excluded)";

static void put_num_text(FILE *f, int known, double v, int secs, int width)
{
	char b[32];
	if (!known)
		snprintf(b, sizeof b, "?");
	else if (secs)
		snprintf(b, sizeof b, "%.1f", v);
	else
		snprintf(b, sizeof b, "%.2f", v / 1073741824.0);
	fprintf(f, "  %*s", width, b);
}

static const char *txt(const char *s) { return *s ? s : "?"; }

static void json_s(FILE *f, const char *key, const char *s, int num)
{
	if (!*s)
		fprintf(f, "\"%s\": null", key);
	else if (num)
		fprintf(f, "\"%s\": %s", key, s);
	else {
		fprintf(f, "\"%s\": \"", key);
		for (; *s; s++)
			if (*s == '"' || *s == '\\')
				fprintf(f, "\\%c", *s);
			else if ((unsigned char)*s < 0x20)
				fprintf(f, "\\u%04x", *s);
			else
				fputc(*s, f);
		fputc('"', f);
	}
}

/* ---- host memory by phase (issue 6 part 3; the seed's last table) ---- */

static void text_host(FILE *f, const struct srow *rs, size_t n)
{
	size_t any = 0;
	for (size_t k = 0; k < n; k++)
		any += rs[k].p->host_samples != 0;
	if (!any)
		return;
	fputs("host memory (GiB), like the seed's last table: RSS at the end of init, the largest RSS inside training "
	      "steps, the largest virtual size, pinned host peak, the largest RSS by phase\n",
	      f);
	fprintf(f, "%-4s  %8s  %9s  %8s  %8s  %s\n", "rank", "rss_init", "rss_train", "vsz_peak", "pinned", "rss by phase");
	for (size_t k = 0; k < n; k++) {
		const struct srow *r = &rs[k];
		const struct dsmt_process *p = r->p;
		char rk[24];
		snprintf(rk, sizeof rk, r->has_rank ? "%lld" : "?", r->rank);
		fprintf(f, "%-4s", rk);
		gib(f, r->has_rss_init, r->rss_init, 8);
		gib(f, r->has_rss_train, r->rss_train, 9);
		gib(f, p->host_samples != 0, p->host_peak_vsz, 8);
		gib(f, r->known[C_PINNED], (uint64_t)r->v[C_PINNED], 8);
		fputs(" ", f);
		int first = 1;
		for (unsigned ph = 1; p->attrib && ph < DSMT_BK_NPHASE; ph++) {
			if (!p->phase_rss_n[ph])
				continue;
			fprintf(f, "%s %s %.2f", first ? "" : ",", dsmt_phase_name(ph), p->phase_rss[ph] / 1073741824.0);
			first = 0;
		}
		fputs(first ? " ?\n" : "\n", f);
	}
}

static void json_host(FILE *f, const struct srow *r)
{
	const struct dsmt_process *p = r->p;
	fputs(",\n     \"host\": ", f);
	if (!p->host_samples) {
		fputs("null", f);
		return;
	}
	fputc('{', f);
	json_u64(f, "rss_init_end", r->has_rss_init, r->rss_init);
	fputs(", ", f);
	json_u64(f, "rss_peak_training", r->has_rss_train, r->rss_train);
	fprintf(f, ", \"vsz_peak\": %" PRIu64 ", \"rss_peak_by_phase\": ", p->host_peak_vsz);
	dsmt_json_phase_rss(f, p);
	fputc('}', f);
}

static int is_int(const char *s)
{
	if (!*s)
		return 0;
	char *e;
	strtoll(s, &e, 10);
	return !*e;
}

static void json_nums(FILE *f, const int *known, const double *v)
{
	for (int k = 0; k < NNUM; k++) {
		fprintf(f, ", \"%s\": ", num_key[k]);
		if (!known[k])
			fputs("null", f);
		else if (k == C_TIME10)
			fprintf(f, "%.3f", v[k]);
		else
			fprintf(f, "%.0f", v[k]);
	}
}

void dsmt_write_summary(FILE *f, const struct dsmt_process *ps, size_t n, int json)
{
	struct srow *rs = calloc(n ? n : 1, sizeof(*rs));
	if (!rs)
		return;
	for (size_t i = 0; i < n; i++)
		fill(&ps[i], &rs[i]);
	if (json)
		fprintf(f, "{\"format\": \"dsmemdecode-summary/2\",\n \"max_mem_allocated\": \"%s\",\n \"estimate\": \"%s\",\n \"runs\": [",
			MEANING, EST_MEANING);
	else
		fprintf(f, "MaxMemAllocated: %s; MemAllocated: allocated at the end of the last step; peaks of reserved, "
			   "device, host RSS and pinned host over the whole run; GiB (2^30 bytes), time per 10 steps in s\n",
			MEANING);
	static const int W[NNUM] = {9, 15, 12, 8, 8, 8, 8};
	static const char *const H[NNUM] = {"10steps_s", "MaxMemAllocated", "MemAllocated", "peak_res", "peak_dev",
					    "host_rss", "pinned"};
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;
		const char *id = rs[i].run_id;
		while (j < n && ((!id && !rs[j].run_id) || (id && rs[j].run_id && !strcmp(id, rs[j].run_id))))
			j++;
		int mk[NNUM] = {0}, nk[NNUM] = {0};
		double mx[NNUM] = {0}, mn[NNUM] = {0};
		for (size_t k = i; k < j; k++)
			for (int c = 0; c < NNUM; c++) {
				if (!rs[k].known[c]) {
					nk[c] = 1; /* a rank without it: no skew */
					continue;
				}
				if (!mk[c] || rs[k].v[c] > mx[c])
					mx[c] = rs[k].v[c];
				if (!mk[c] || rs[k].v[c] < mn[c])
					mn[c] = rs[k].v[c];
				mk[c] = 1;
			}
		int sk[NNUM];
		double sv[NNUM];
		for (int c = 0; c < NNUM; c++) {
			sk[c] = mk[c] && !nk[c];
			sv[c] = mx[c] - mn[c];
		}
		if (json) {
			fprintf(f, "%s\n  {", i ? "," : "");
			json_s(f, "run_id", id ? id : "", 0);
			fputs(", \"ranks\": [", f);
		} else {
			fprintf(f, "\nrun %s: %zu process%s\n", id ? id : "(no run id)", j - i, j - i == 1 ? "" : "es");
			fprintf(f, "%-4s  %-12s  %4s  %4s  %7s  %3s  %4s", "rank", "model", "GPUs", "ZeRO", "offload", "mbs",
				"seq");
			for (int c = 0; c < NNUM; c++)
				fprintf(f, "  %*s", W[c], H[c]);
			fputs("  breakdown at MaxMemAllocated (step: top categories)\n", f);
		}
		for (size_t k = i; k < j; k++) {
			struct srow *r = &rs[k];
			unsigned cat[NTOPCAT];
			int nc = top_cats(r, cat);
			if (json) {
				fprintf(f, "%s\n    {", k > i ? "," : "");
				json_s(f, "file", r->p->file ? r->p->file : "", 0);
				fputs(", \"rank\": ", f);
				if (r->has_rank)
					fprintf(f, "%lld", r->rank);
				else
					fputs("null", f);
				fputs(", ", f);
				json_s(f, "model", r->model, 0);
				fputs(", ", f);
				json_s(f, "gpus", r->world, 1);
				fputs(", ", f);
				json_s(f, "zero_stage", r->zero, is_int(r->zero));
				fputs(", \"offload\": ", f);
				fputs(!*r->offload ? "null" : !strcmp(r->offload, "yes") ? "true" : "false", f);
				fputs(", ", f);
				json_s(f, "micro_batch", r->mbs, is_int(r->mbs));
				fputs(", ", f);
				json_s(f, "seq", r->seq, is_int(r->seq));
				json_nums(f, r->known, r->v);
				fputs(",\n     \"max_step\": ", f);
				if (r->max_step)
					fprintf(f, "%d", r->max_step);
				else
					fputs("null", f);
				fputs(", \"breakdown_at_max\": ", f);
				if (!r->pk || !r->p->attrib)
					fputs("null", f);
				else {
					fputc('[', f);
					for (int q = 0; q < nc; q++)
						fprintf(f, "%s{\"category\": \"%s\", \"bytes\": %" PRIu64 "}", q ? ", " : "",
							dsmt_cat_name(cat[q]), r->pk->peak_bk.cat[cat[q]]);
					fputc(']', f);
				}
				json_estimate(f, r);
				json_host(f, r);
				fputc('}', f);
				continue;
			}
			char rk[24];
			if (r->has_rank)
				snprintf(rk, sizeof rk, "%lld", r->rank);
			else
				snprintf(rk, sizeof rk, "?");
			fprintf(f, "%-4s  %-12s  %4s  %4s  %7s  %3s  %4s", rk, txt(r->model), txt(r->world), txt(r->zero),
				txt(r->offload), txt(r->mbs), txt(r->seq));
			for (int c = 0; c < NNUM; c++)
				put_num_text(f, r->known[c], r->v[c], c == C_TIME10, W[c]);
			if (!r->max_step)
				fputs("  ?", f);
			else {
				fprintf(f, "  step %d:", r->max_step);
				if (!nc)
					fputs(" ?", f);
				for (int q = 0; q < nc; q++)
					fprintf(f, "%s %s %.2f", q ? "," : "", dsmt_cat_name(cat[q]),
						r->pk->peak_bk.cat[cat[q]] / 1073741824.0);
			}
			fputc('\n', f);
		}
		if (json) {
			fputs("],\n   \"max\": {\"ranks\": ", f);
			fprintf(f, "%zu", j - i);
			json_nums(f, mk, mx);
			fputs("},\n   \"skew\": {\"ranks\": ", f);
			fprintf(f, "%zu", j - i);
			json_nums(f, sk, sv);
			fputs("}}", f);
		} else {
			fprintf(f, "%-4s  %-12s  %4s  %4s  %7s  %3s  %4s", "max", "", "", "", "", "", "");
			for (int c = 0; c < NNUM; c++)
				put_num_text(f, mk[c], mx[c], c == C_TIME10, W[c]);
			fputc('\n', f);
			fprintf(f, "%-4s  %-12s  %4s  %4s  %7s  %3s  %4s", "skew", "", "", "", "", "", "");
			for (int c = 0; c < NNUM; c++)
				put_num_text(f, sk[c], sv[c], c == C_TIME10, W[c]);
			fputc('\n', f);
			text_estimates(f, rs + i, j - i);
			text_host(f, rs + i, j - i);
		}
		i = j;
	}
	if (json)
		fputs("]}\n", f);
	free(rs);
}

/* micro-batch and sequence length from the recorded command line (the
 * example's and DeepSpeed-Chat's flags); 0 where unknown (--what-if) */
void dsmt_cmdline_tokens(const struct dsmt_process *p, long *mbs, long *seq)
{
	struct srow r;
	memset(&r, 0, sizeof(r));
	parse_cmdline(p, &r);
	*mbs = is_int(r.mbs) ? strtol(r.mbs, NULL, 10) : 0;
	*seq = is_int(r.seq) ? strtol(r.seq, NULL, 10) : 0;
	if (*mbs < 0)
		*mbs = 0;
	if (*seq < 0)
		*seq = 0;
}
