/* --what-if micro_batch=M,seq=S: project MaxMemAllocated and MemAllocated
 * for another micro-batch and sequence length from one or two measured runs
 * (README, "What-if").  The model, printed with every projection:
 *   - a step whose largest peak holds activations (a forward or backward
 *     peak) splits into a fixed part (model states, gathered parameters,
 *     buckets, workspace, other) and an activation-like part (activations
 *     and temporaries) that scales linearly with tokens per micro-batch
 *     (micro_batch x seq); two such runs at different token counts give a
 *     line through both;
 *   - a step whose largest peak holds no activation (the optimizer step)
 *     does not depend on tokens;
 *   - the projected peak is the larger of the two; MemAllocated keeps its
 *     fixed part and scales what activations and temporaries remain at the
 *     step's end.
 * Configuration (micro-batch, seq) from the recorded command line; a run
 * without both cannot be used. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attrib.h"
#include "decode.h"

#define GIB 1073741824.0

struct meas {
	const struct dsmt_process *p;
	long long rank; /* -1: unknown */
	long mbs, seq;
	double tokens;
	const struct dsmt_row *pk, *last; /* the largest step peak, the last step */
	int act;                          /* the peak holds activations */
	double peak, var, end, end_var;   /* bytes; var: activation-like part */
	const char *phase;
};

static int measure(const struct dsmt_process *p, struct meas *m)
{
	memset(m, 0, sizeof(*m));
	m->p = p;
	if (!dsmt_meta_int(p, "rank", &m->rank))
		m->rank = -1;
	dsmt_cmdline_tokens(p, &m->mbs, &m->seq);
	for (size_t i = 0; i < p->nrows; i++) {
		const struct dsmt_row *w = &p->rows[i];
		if (w->kind != DSMT_STEP)
			continue;
		if (!m->pk || w->peak_alloc > m->pk->peak_alloc)
			m->pk = w;
		if (!m->last || w->step >= m->last->step)
			m->last = w;
	}
	if (!m->pk || !m->mbs || !m->seq || !p->attrib)
		return 0;
	m->tokens = (double)m->mbs * (double)m->seq;
	const uint64_t *c = m->pk->peak_bk.cat, *e = m->last->end_bk.cat;
	m->peak = (double)m->pk->peak_alloc;
	m->act = c[DSMT_CAT_ACTIVATIONS] != 0;
	m->var = m->act ? (double)(c[DSMT_CAT_ACTIVATIONS] + c[DSMT_CAT_TEMPORARIES]) : 0;
	m->end = (double)m->last->end_alloc;
	m->end_var = (double)(e[DSMT_CAT_ACTIVATIONS] + e[DSMT_CAT_TEMPORARIES]);
	m->phase = dsmt_phase_name(m->pk->peak_phase);
	return 1;
}

/* micro_batch=M,seq=S (mbs= too); 0 leaves the measured value */
static int parse_spec(const char *spec, long *mbs, long *seq, FILE *err)
{
	*mbs = *seq = 0;
	const char *s = spec;
	while (*s) {
		const char *eq = strchr(s, '='), *end = strchr(s, ',');
		if (!end)
			end = s + strlen(s);
		if (!eq || eq > end) {
			fprintf(err, "dsmemdecode: --what-if: '%.*s' is not KEY=VALUE (micro_batch=M,seq=S)\n",
				(int)(end - s), s);
			return -1;
		}
		size_t kl = (size_t)(eq - s);
		char *e;
		long v = strtol(eq + 1, &e, 10);
		if (e != end || eq + 1 == end || v < 1 || v > 100000000) {
			fprintf(err, "dsmemdecode: --what-if: %.*s wants a whole number from 1 to 100000000, not '%.*s'\n",
				(int)kl, s, (int)(end - eq - 1), eq + 1);
			return -1;
		}
		if ((kl == 11 && !strncmp(s, "micro_batch", 11)) || (kl == 3 && !strncmp(s, "mbs", 3)))
			*mbs = v;
		else if (kl == 3 && !strncmp(s, "seq", 3))
			*seq = v;
		else {
			fprintf(err, "dsmemdecode: --what-if: unknown key '%.*s' (micro_batch, seq)\n", (int)kl, s);
			return -1;
		}
		s = *end ? end + 1 : end;
	}
	if (!*mbs && !*seq) {
		fputs("dsmemdecode: --what-if: nothing to change (micro_batch=M,seq=S)\n", err);
		return -1;
	}
	return 0;
}

struct proj {
	long long rank;
	double peak, end, tokens;
	int from_act, lower_bound; /* the activation line set it; no activation measured */
	size_t nm;
};

/* Project one rank from its measurements m[0..n) to target (mbs, seq). */
static void project(const struct meas *m, size_t n, long mbs, long seq, struct proj *pr)
{
	memset(pr, 0, sizeof(*pr));
	pr->rank = m[0].rank;
	pr->nm = n;
	/* the target keeps what the spec leaves out from the first measurement */
	double T = (double)(mbs ? mbs : m[0].mbs) * (double)(seq ? seq : m[0].seq);
	pr->tokens = T;
	double step = 0, act = 0, end_fix = 0, end_rate = 0;
	const struct meas *a1 = NULL, *a2 = NULL;
	for (size_t k = 0; k < n; k++) {
		if (!m[k].act) {
			if (m[k].peak > step)
				step = m[k].peak;
			continue;
		}
		if (!a1 || m[k].tokens < a1->tokens)
			a1 = &m[k];
		if (!a2 || m[k].tokens > a2->tokens)
			a2 = &m[k];
	}
	if (a1 && a2 && a2->tokens > a1->tokens) { /* a line through both */
		double v = (a2->peak - a1->peak) / (a2->tokens - a1->tokens);
		act = a1->peak + v * (T - a1->tokens);
	} else if (a1) {
		act = a1->peak - a1->var + a1->var * T / a1->tokens;
	}
	pr->lower_bound = !a1;
	pr->from_act = a1 && act >= step;
	pr->peak = act > step ? act : step;
	/* MemAllocated: the fixed part of the last measurement, its
	 * activation-like rest scaled */
	const struct meas *e = &m[n - 1];
	end_fix = e->end - e->end_var;
	end_rate = e->end_var / e->tokens;
	pr->end = end_fix + end_rate * T;
}

static const char *ASSUME =
	"model states, gathered parameters, buckets, workspace and other stay as measured; activations and "
	"temporaries at a forward or backward peak scale linearly with tokens per micro-batch (micro_batch x seq: "
	"attention without a seq^2 buffer, as with SDPA or flash attention; eager attention adds one); a peak "
	"without activations (the optimizer step) does not depend on tokens; the projected MaxMemAllocated is "
	"the larger of the two; MemAllocated scales what activations and temporaries remain at a step's end";

int dsmt_write_whatif(FILE *f, const struct dsmt_process *ps, size_t n, const char *spec, int json, FILE *err)
{
	long mbs, seq;
	if (parse_spec(spec, &mbs, &seq, err))
		return DSMT_EXIT_USAGE;
	struct meas *m = calloc(n ? n : 1, sizeof(*m));
	if (!m)
		return DSMT_EXIT_BAD;
	size_t nm = 0;
	for (size_t i = 0; i < n; i++) {
		if (measure(&ps[i], &m[nm]))
			nm++;
		else
			fprintf(err, "dsmemdecode: --what-if: %s: no training step, or no --per_device_train_batch_size "
				     "and --max_seq_len in its command line: not used\n",
				ps[i].file ? ps[i].file : "?");
	}
	if (!nm) {
		fputs("dsmemdecode: --what-if: no usable run\n", err);
		free(m);
		return DSMT_EXIT_BAD;
	}
	/* ranks: the measurements of each rank, in input order */
	struct proj *pr = calloc(nm, sizeof(*pr));
	struct meas *grp = calloc(nm, sizeof(*grp));
	char *done = calloc(nm, 1);
	if (!pr || !grp || !done) {
		free(pr);
		free(grp);
		free(done);
		free(m);
		return DSMT_EXIT_BAD;
	}
	size_t np = 0;
	for (size_t i = 0; i < nm; i++) {
		if (done[i])
			continue;
		size_t g = 0;
		for (size_t k = i; k < nm; k++)
			if (!done[k] && m[k].rank == m[i].rank) {
				grp[g++] = m[k];
				done[k] = 1;
			}
		project(grp, g, mbs, seq, &pr[np++]);
	}
	double T = pr[0].tokens;
	long tm = mbs ? mbs : m[0].mbs, ts = seq ? seq : m[0].seq;
	size_t best = 0;
	for (size_t k = 1; k < np; k++)
		if (pr[k].peak > pr[best].peak)
			best = k;
	if (json) {
		fprintf(f, "{\"format\": \"dsmemdecode-whatif/1\", \"target\": {\"micro_batch\": %ld, \"seq\": %ld, "
			   "\"tokens\": %.0f},\n \"assumptions\": \"%s\",\n \"measured\": [",
			tm, ts, T, ASSUME);
		for (size_t k = 0; k < nm; k++) {
			const struct meas *x = &m[k];
			fprintf(f, "%s\n  {\"file\": \"", k ? "," : "");
			for (const char *c = x->p->file ? x->p->file : ""; *c; c++)
				fprintf(f, *c == '"' || *c == '\\' ? "\\%c" : (unsigned char)*c < 32 ? "?" : "%c", *c);
			fprintf(f, "\", \"rank\": ");
			if (x->rank >= 0)
				fprintf(f, "%lld", x->rank);
			else
				fputs("null", f);
			fprintf(f, ", \"micro_batch\": %ld, \"seq\": %ld, \"max_mem_allocated\": %.0f, \"step\": %d, "
				   "\"peak_phase\": \"%s\", \"activation_like\": %.0f, \"mem_allocated\": %.0f}",
				x->mbs, x->seq, x->peak, x->pk->step, x->phase ? x->phase : "unknown", x->var, x->end);
		}
		fputs("],\n \"ranks\": [", f);
		for (size_t k = 0; k < np; k++) {
			fprintf(f, "%s\n  {\"rank\": ", k ? "," : "");
			if (pr[k].rank >= 0)
				fprintf(f, "%lld", pr[k].rank);
			else
				fputs("null", f);
			fprintf(f, ", \"max_mem_allocated\": %.0f, \"mem_allocated\": %.0f, \"set_by\": \"%s\", "
				   "\"lower_bound\": %s, \"runs\": %zu}",
				pr[k].peak, pr[k].end, pr[k].from_act ? "activations" : "optimizer_step",
				pr[k].lower_bound ? "true" : "false", pr[k].nm);
		}
		fprintf(f, "],\n \"max\": {\"max_mem_allocated\": %.0f, \"rank\": ", pr[best].peak);
		if (pr[best].rank >= 0)
			fprintf(f, "%lld}}\n", pr[best].rank);
		else
			fputs("null}\n", f);
	} else {
		fprintf(f, "what-if: micro_batch %ld, seq %ld (%.0f tokens per micro-batch); GiB\nassumptions: %s\n", tm,
			ts, T, ASSUME);
		for (size_t k = 0; k < nm; k++) {
			const struct meas *x = &m[k];
			fprintf(f, "measured: %s rank %lld: micro_batch %ld, seq %ld: MaxMemAllocated %.2f in step %d (%s)",
				x->p->file ? x->p->file : "?", x->rank, x->mbs, x->seq, x->peak / GIB, x->pk->step,
				x->phase ? x->phase : "unknown phase");
			if (x->act)
				fprintf(f, ": fixed %.2f + activation-like %.2f (%.0f bytes per token)\n",
					(x->peak - x->var) / GIB, x->var / GIB, x->var / x->tokens);
			else
				fputs(": no activation at the peak, does not depend on tokens\n", f);
		}
		fprintf(f, "%-5s  %24s  %21s  %s\n", "rank", "MaxMemAllocated (proj.)", "MemAllocated (proj.)",
			"set by");
		for (size_t k = 0; k < np; k++) {
			char rk[24];
			snprintf(rk, sizeof rk, pr[k].rank >= 0 ? "%lld" : "?", pr[k].rank);
			fprintf(f, "%-5s  %24.2f  %21.2f  %s\n", rk, pr[k].peak / GIB, pr[k].end / GIB,
				pr[k].lower_bound ? "optimizer step (lower bound: no measured peak held activations)"
				: pr[k].from_act ? "activations" : "optimizer step");
		}
	}
	free(pr);
	free(grp);
	free(done);
	free(m);
	return DSMT_EXIT_OK;
}
