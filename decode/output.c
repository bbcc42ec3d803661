/* Reports: JSON (dsmemdecode-steps/1), aligned table, CSV. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"

static void json_str(FILE *f, const char *s)
{
	if (!s) {
		fputs("null", f);
		return;
	}
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

/* A META value that is a decimal integer, as JSON (else null). */
static void json_int_meta(FILE *f, const struct dsmt_process *p, const char *key)
{
	const char *v = dsmt_meta_get(p, key);
	char *e;
	if (v && *v) {
		long long x = strtoll(v, &e, 10);
		if (!*e) {
			fprintf(f, "%lld", x);
			return;
		}
	}
	fputs("null", f);
}

static void json_row(FILE *f, const struct dsmt_row *r, int with_step)
{
	fprintf(f, "{\"device\": %d, ", r->device);
	if (with_step)
		fprintf(f, "\"step\": %d, ", r->step);
	fprintf(f,
		"\"start_ns\": %" PRIu64 ", \"end_ns\": %" PRIu64 ", \"peak_allocated\": %" PRIu64
		", \"end_allocated\": %" PRIu64 ", \"peak_reserved\": %" PRIu64 ", \"end_reserved\": %" PRIu64
		", \"allocs\": %" PRIu64 ", \"frees\": %" PRIu64 "}",
		r->start_ns, r->end_ns, r->peak_alloc, r->end_alloc, r->peak_res, r->end_res, r->allocs,
		r->frees);
}

static void json_rows(FILE *f, const struct dsmt_process *p, const char *name, int which)
{
	fprintf(f, "     \"%s\": [", name);
	int first = 1;
	for (size_t i = 0; i < p->nrows; i++) {
		const struct dsmt_row *r = &p->rows[i];
		int k = r->step > 0 ? 1 : r->step;
		if (k != which)
			continue;
		fputs(first ? "\n      " : ",\n      ", f);
		first = 0;
		json_row(f, r, which == 1);
	}
	fputs("]", f);
}

void dsmt_write_json(FILE *f, const struct dsmt_process *ps, size_t n)
{
	fputs("{\"format\": \"dsmemdecode-steps/1\",\n \"processes\": [", f);
	for (size_t i = 0; i < n; i++) {
		const struct dsmt_process *p = &ps[i];
		fputs(i ? ",\n    {" : "\n    {", f);
		fputs("\"file\": ", f);
		json_str(f, p->file);
		fputs(", \"host\": ", f);
		json_str(f, dsmt_meta_get(p, "host"));
		fputs(", \"pid\": ", f);
		json_int_meta(f, p, "pid");
		fputs(", \"rank\": ", f);
		json_int_meta(f, p, "rank");
		fputs(", \"world_size\": ", f);
		json_int_meta(f, p, "world_size");
		fprintf(f, ",\n     \"truncated\": %s, \"damaged\": %s, \"events\": %" PRIu64 ", \"ooms\": %" PRIu64
			   ", \"lost_events\": %" PRIu64 ", \"missing_events\": %" PRIu64 ",\n",
			p->truncated ? "true" : "false", p->damaged ? "true" : "false", p->events, p->ooms,
			p->lost, p->missing);
		json_rows(f, p, "steps", 1);
		fputs(",\n", f);
		json_rows(f, p, "init", 0);
		fputs(",\n", f);
		json_rows(f, p, "tail", -1);
		fputs("}", f);
	}
	fputs("]}\n", f);
}

static const char *step_label(const struct dsmt_row *r, char *buf, size_t n)
{
	if (r->step == 0)
		return "init";
	if (r->step < 0)
		return "tail";
	snprintf(buf, n, "%d", r->step);
	return buf;
}

#define NCOL 10

void dsmt_write_table(FILE *f, const struct dsmt_process *ps, size_t n)
{
	static const char *hdr[NCOL] = {"step", "device", "peak_allocated", "end_allocated", "peak_reserved",
					"end_reserved", "allocs", "frees", "peak_alloc_MiB", "peak_res_MiB"};
	for (size_t i = 0; i < n; i++) {
		const struct dsmt_process *p = &ps[i];
		const char *host = dsmt_meta_get(p, "host"), *pid = dsmt_meta_get(p, "pid"),
			   *rank = dsmt_meta_get(p, "rank");
		if (i)
			fputc('\n', f);
		fprintf(f, "%s  host=%s pid=%s rank=%s%s%s\n", p->file, host ? host : "?", pid ? pid : "?",
			rank ? rank : "-", p->truncated ? "  (truncated)" : "", p->damaged ? "  (damaged)" : "");
		size_t w[NCOL];
		for (int k = 0; k < NCOL; k++)
			w[k] = strlen(hdr[k]);
		char(*cells)[NCOL][32] = calloc(p->nrows ? p->nrows : 1, sizeof(*cells));
		if (!cells)
			return;
		for (size_t r = 0; r < p->nrows; r++) {
			const struct dsmt_row *x = &p->rows[r];
			char sb[16];
			snprintf(cells[r][0], 32, "%s", step_label(x, sb, sizeof(sb)));
			snprintf(cells[r][1], 32, "%d", x->device);
			snprintf(cells[r][2], 32, "%" PRIu64, x->peak_alloc);
			snprintf(cells[r][3], 32, "%" PRIu64, x->end_alloc);
			snprintf(cells[r][4], 32, "%" PRIu64, x->peak_res);
			snprintf(cells[r][5], 32, "%" PRIu64, x->end_res);
			snprintf(cells[r][6], 32, "%" PRIu64, x->allocs);
			snprintf(cells[r][7], 32, "%" PRIu64, x->frees);
			snprintf(cells[r][8], 32, "%.1f", (double)x->peak_alloc / 1048576.0);
			snprintf(cells[r][9], 32, "%.1f", (double)x->peak_res / 1048576.0);
			for (int k = 0; k < NCOL; k++)
				if (strlen(cells[r][k]) > w[k])
					w[k] = strlen(cells[r][k]);
		}
		for (int k = 0; k < NCOL; k++)
			fprintf(f, k ? "  %*s" : "%-*s", (int)w[k], hdr[k]);
		fputc('\n', f);
		for (size_t r = 0; r < p->nrows; r++) {
			for (int k = 0; k < NCOL; k++)
				fprintf(f, k ? "  %*s" : "%-*s", (int)w[k], cells[r][k]);
			fputc('\n', f);
		}
		if (!p->nrows)
			fputs("(no device allocations)\n", f);
		free(cells);
	}
}

static void csv_field(FILE *f, const char *s)
{
	if (!s)
		return;
	if (!strpbrk(s, ",\"\n\r")) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

void dsmt_write_csv(FILE *f, const struct dsmt_process *ps, size_t n)
{
	fputs("file,host,pid,rank,step,device,start_ns,end_ns,peak_allocated,end_allocated,peak_reserved,"
	      "end_reserved,allocs,frees\n",
	      f);
	for (size_t i = 0; i < n; i++) {
		const struct dsmt_process *p = &ps[i];
		for (size_t r = 0; r < p->nrows; r++) {
			const struct dsmt_row *x = &p->rows[r];
			char sb[16];
			csv_field(f, p->file);
			fputc(',', f);
			csv_field(f, dsmt_meta_get(p, "host"));
			fputc(',', f);
			csv_field(f, dsmt_meta_get(p, "pid"));
			fputc(',', f);
			csv_field(f, dsmt_meta_get(p, "rank"));
			fprintf(f,
				",%s,%d,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
				",%" PRIu64 ",%" PRIu64 "\n",
				step_label(x, sb, sizeof(sb)), x->device, x->start_ns, x->end_ns, x->peak_alloc,
				x->end_alloc, x->peak_res, x->end_res, x->allocs, x->frees);
		}
	}
}
