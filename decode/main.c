/* dsmemdecode: thin CLI over the decode library.  Parses arguments, runs the
 * decoder over each file and maps results to exit codes (here only):
 *   0 ok (a truncated trace still decodes: warning on stderr)
 *   1 usage error
 *   2 bad or damaged input (partial results are still printed) */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dirent.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "decode.h"
#include "format.h"

/* Progress on stderr while decoding, only when stderr is a terminal and the
 * decode has run DSMEMDECODE_PROGRESS_DELAY_MS (default 1000): a line
 * rewritten in place at most every 200 ms, cleared before anything else is
 * printed (the decoder's messages come after each file's last frame). */
static struct {
	int on;
	double start, delay, last;
	int shown;
	size_t file, nfiles;
} prog;

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void progress_init(void)
{
	const char *d = getenv("DSMEMDECODE_PROGRESS_DELAY_MS");
	char *e;
	long ms = d && *d ? strtol(d, &e, 10) : 1000;
	if (d && *d && (*e || ms < 0))
		ms = 1000;
	prog.on = isatty(2);
	prog.delay = (double)ms / 1000.0;
	prog.start = now_s();
}

static void progress_clear(void)
{
	if (prog.shown)
		fputs("\r\033[K", stderr);
	prog.shown = 0;
}

static void progress(void *arg, const char *file, uint64_t done, uint64_t total)
{
	(void)arg;
	if (done >= total) { /* the file's last frame: its messages follow */
		progress_clear();
		return;
	}
	double t = now_s();
	if (t - prog.start < prog.delay || (prog.shown && t - prog.last < 0.2))
		return;
	fprintf(stderr, "\rdsmemdecode: %s: %3d%%", file, (int)(100.0 * (double)done / (double)(total ? total : 1)));
	if (prog.nfiles > 1)
		fprintf(stderr, " (file %zu of %zu)", prog.file + 1, prog.nfiles);
	fputs("\033[K", stderr);
	prog.shown = 1;
	prog.last = t;
}

/* Files decoded at once (--jobs; 0: the online CPUs, or 1 when stderr is a
 * terminal and progress is shown, file by file).  Each file decodes into its
 * own slot, its messages into a memory stream copied to stderr in file order
 * afterwards, so the output does not depend on the number of jobs. */
static int njobs;

struct job {
	const char *path;
	struct dsmt_process p;
	int rc;
	char *msg;
	size_t msg_len;
};

struct pool {
	struct job *jobs;
	size_t n;
	const struct dsmt_opts *o;
	_Atomic size_t next;
};

static void *pool_worker(void *arg)
{
	struct pool *pl = arg;
	for (size_t i; (i = atomic_fetch_add(&pl->next, 1)) < pl->n;) {
		struct job *j = &pl->jobs[i];
		FILE *err = open_memstream(&j->msg, &j->msg_len);
		j->rc = dsmt_decode_file(j->path, pl->o, &j->p, err ? err : stderr);
		if (err)
			fclose(err);
	}
	return NULL;
}

static void decode_parallel(struct job *jobs, size_t n, const struct dsmt_opts *o, int nj)
{
	struct dsmt_opts po = *o;
	po.progress = NULL; /* per-file progress lines would interleave */
	struct pool pl = {.jobs = jobs, .n = n, .o = &po};
	pthread_t th[256];
	int nt = 0;
	if ((size_t)nj > n)
		nj = (int)n;
	/* the calling thread is one of the workers */
	while (nt < nj - 1 && nt < 256 && pthread_create(&th[nt], NULL, pool_worker, &pl) == 0)
		nt++;
	pool_worker(&pl);
	for (int i = 0; i < nt; i++)
		pthread_join(th[i], NULL);
}

/* Decode paths[0..n) into *ps (the ones that decoded, perhaps partly, sorted
 * by run and rank); the worst exit code into *code. */
static size_t decode_all(char *const *paths, size_t n, const struct dsmt_opts *o, struct dsmt_process **ps, int *code)
{
	*ps = calloc(n ? n : 1, sizeof(**ps));
	struct job *jobs = calloc(n ? n : 1, sizeof(*jobs));
	if (!*ps || !jobs) {
		free(jobs);
		fputs("dsmemdecode: out of memory\n", stderr);
		*code = DSMT_EXIT_BAD;
		return 0;
	}
	int nj = njobs;
	if (!nj) {
		long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
		nj = prog.on ? 1 : ncpu < 1 ? 1 : ncpu > 256 ? 256 : (int)ncpu;
	}
	for (size_t i = 0; i < n; i++)
		jobs[i].path = paths[i];
	prog.nfiles = n;
	if (n <= 1 || nj == 1) { /* one after another, messages and progress as they come */
		for (size_t i = 0; i < n; i++) {
			prog.file = i;
			jobs[i].rc = dsmt_decode_file(paths[i], o, &jobs[i].p, stderr);
			progress_clear();
			if (jobs[i].rc == DSMT_EXIT_USAGE)
				break; /* the rest stay empty */
		}
	} else {
		decode_parallel(jobs, n, o, nj);
	}
	/* in file order, as one file after another would have been */
	size_t k = 0, i = 0;
	for (; i < n; i++) {
		struct job *j = &jobs[i];
		if (j->msg_len)
			fwrite(j->msg, 1, j->msg_len, stderr);
		free(j->msg);
		int r = j->rc;
		if (r == DSMT_EXIT_USAGE) { /* bad regex: same for every file */
			*code = r;
			dsmt_process_free(&j->p);
			break;
		}
		if (r > *code)
			*code = r;
		if (j->p.rows || j->p.meta)
			(*ps)[k++] = j->p; /* decoded (perhaps partly) */
		else
			dsmt_process_free(&j->p);
	}
	for (i++; i < n; i++) { /* after a usage error: decoded for nothing */
		free(jobs[i].msg);
		dsmt_process_free(&jobs[i].p);
	}
	free(jobs);
	dsmt_sort_processes(*ps, k);
	return k;
}

static void free_all(struct dsmt_process *ps, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dsmt_process_free(&ps[i]);
	free(ps);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A diff operand: a trace file, or a directory's dsmemtrace.*.zst files
 * (sorted).  NULL with a message when a directory holds none. */
static char **operand_files(const char *path, size_t *n)
{
	struct stat st;
	char **v = NULL;
	*n = 0;
	if (stat(path, &st) || !S_ISDIR(st.st_mode)) { /* a file (the decoder says what is wrong with it) */
		v = malloc(sizeof(*v));
		if (v && (v[0] = strdup(path)))
			*n = 1;
		return v;
	}
	DIR *d = opendir(path);
	if (!d) {
		fprintf(stderr, "dsmemdecode: diff: %s: %s\n", path, strerror(errno));
		return NULL;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (strncmp(e->d_name, "dsmemtrace.", 11) || l < 15 || strcmp(e->d_name + l - 4, ".zst"))
			continue;
		char **nv = realloc(v, (*n + 1) * sizeof(*v));
		size_t pl = strlen(path) + l + 2;
		char *f = malloc(pl);
		if (!nv || !f) {
			free(f);
			v = nv ? nv : v;
			break;
		}
		v = nv;
		snprintf(f, pl, "%s/%s", path, e->d_name);
		v[(*n)++] = f;
	}
	closedir(d);
	if (!*n)
		fprintf(stderr, "dsmemdecode: diff: %s: no dsmemtrace.*.zst trace in this directory\n", path);
	else
		qsort(v, *n, sizeof(*v), cmp_str);
	return v;
}

static void free_strs(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* dsmemdecode diff A B (after the options): the exit code */
static int run_diff(char *const *ops, const struct dsmt_opts *o, FILE *out, int json, int top)
{
	char **files[2] = {NULL, NULL};
	size_t nf[2] = {0, 0}, np[2] = {0, 0};
	struct dsmt_process *ps[2] = {NULL, NULL};
	int code = DSMT_EXIT_OK;
	for (int s = 0; s < 2 && code == DSMT_EXIT_OK; s++) {
		if (!(files[s] = operand_files(ops[s], &nf[s])) || !nf[s]) {
			code = DSMT_EXIT_USAGE;
			break;
		}
		np[s] = decode_all(files[s], nf[s], o, &ps[s], &code);
		for (size_t i = 1; i < np[s] && code != DSMT_EXIT_USAGE; i++) {
			const char *x = dsmt_meta_get(&ps[s][0], "run_id"), *y = dsmt_meta_get(&ps[s][i], "run_id");
			if (!x != !y || (x && strcmp(x, y))) {
				fprintf(stderr, "dsmemdecode: diff: %s holds traces of more than one run (%s, %s): give one run "
						"per side\n", ops[s], x ? x : "(none)", y ? y : "(none)");
				code = DSMT_EXIT_USAGE;
			}
		}
		if (code == DSMT_EXIT_OK && !np[s])
			code = DSMT_EXIT_BAD;
	}
	if (code != DSMT_EXIT_USAGE && np[0] && np[1])
		dsmt_write_diff(out, ps[0], np[0], ps[1], np[1], json, top);
	for (int s = 0; s < 2; s++) {
		free_all(ps[s], np[s]);
		free_strs(files[s], nf[s]);
	}
	return code;
}

static void usage(FILE *f)
{
	fputs("usage: dsmemdecode [options] TRACE...\n"
	      "       dsmemdecode diff [options] A B\n"
	      "Rebuild per-step GPU memory numbers from dsmemtrace traces (one file per process).\n"
	      "\n"
	      "  --per-step             per-step peak/end allocated and reserved bytes (default)\n"
	      "  --dump                 print every record, one per line\n"
	      "  -f, --format FMT       table (default), csv or json\n"
	      "  --step-marker REGEX    POSIX ERE for NVTX range/mark names that delimit steps\n"
	      "                         (default: " DSMT_DEFAULT_STEP_RE ")\n"
	      "  --grad-accum N         without step markers, steps come from DeepSpeed's\n"
	      "                         DeepSpeedEngine.forward/backward ranges: N micro-steps per\n"
	      "                         step (default: --gradient_accumulation_steps in the recorded\n"
	      "                         command line, else 1)\n"
	      "  --ignore-totals        skip the cross-check against the allocator's own totals\n"
	      "  --breakdown            table: also the allocated bytes by category at each step's\n"
	      "                         peak (JSON always has them) and the growth of surviving bytes\n"
	      "  --top N                the N largest groups of live bytes at each step's peak, by\n"
	      "                         allocation site, with their Python and native frames\n"
	      "  --peak-blocks          JSON: every tensor block live at each step's peak, with its\n"
	      "                         category (for checking attribution against ground truth)\n"
	      "  --summary              one row per run and rank, like the seed's tables: model,\n"
	      "                         GPUs, ZeRO stage, offload, micro-batch, seq (from the recorded\n"
	      "                         command line), time per 10 steps, MaxMemAllocated, ...; then\n"
	      "                         the max and the skew across ranks (table or json)\n"
	      "  --what-if micro_batch=M,seq=S\n"
	      "                         project MaxMemAllocated and MemAllocated to another\n"
	      "                         micro-batch and sequence length from one or two measured\n"
	      "                         runs (their command lines give theirs); prints its\n"
	      "                         assumptions (table or json)\n"
	      "  --perfetto FILE        also write the run as a Chrome trace-event JSON file that\n"
	      "                         Perfetto (ui.perfetto.dev) and chrome://tracing open: counter\n"
	      "                         tracks per device level and category, NVTX ranges as slices\n"
	      "                         per thread, OOMs and step starts as instants\n"
	      "  --perfetto-window US   merge each counter's changes within US microseconds into\n"
	      "                         its maximum and its last value (default 0: every change;\n"
	      "                         about 110 bytes of JSON per change)\n"
	      "  --html FILE            write a self-contained HTML report to FILE instead of the\n"
	      "                         table: allocated memory by category over time (downsampled\n"
	      "                         to 1000 columns, peaks kept), reserved, device and pinned\n"
	      "                         host lines, steps, the peak's breakdown and top sites\n"
	      "                         (--top, default 10), per-step bars; one view per process\n"
	      "                         and device\n"
	      "  --torch-snapshot FILE  write one process's state at the end of its trace as the\n"
	      "                         pickle torch.cuda.memory._snapshot() gives (segments,\n"
	      "                         blocks, device_traces with frames) for memory_viz\n"
	      "  -j, --jobs N           decode up to N files at once (default: the number of online\n"
	      "                         CPUs; 1 when stderr is a terminal, which then shows each\n"
	      "                         file's progress); output and messages are the same for any N\n"
	      "  -o, --output FILE      write the report to FILE instead of stdout\n"
	      "  -v, --verbose          more diagnostics on stderr\n"
	      "  -h, --help             this text\n"
	      "      --version          decoder and format version\n"
	      "\n"
	      "diff A B: compare two runs.  A and B are each a trace file, or a directory whose\n"
	      "dsmemtrace.*.zst files are the ranks of one run.  Ranks pair up by rank (one\n"
	      "process each side: those two); per interval and device the peak and end\n"
	      "allocated/reserved (device) bytes of both and B - A, the categories at each\n"
	      "side's MaxMemAllocated peak, and the sites there (matched by category and\n"
	      "frames) that are new, grew, shrank or went.  --top N: sites shown (default 10);\n"
	      "-f table or json (dsmemdecode-diff/1).\n"
	      "\n"
	      "Progress: on a terminal, a decode that runs longer than DSMEMDECODE_PROGRESS_DELAY_MS\n"
	      "(default 1000) shows its progress on stderr; nothing otherwise.\n"
	      "\n"
	      "Exit status: 0 ok (truncated traces included), 1 usage, 2 bad or damaged input.\n",
	      f);
}

int main(int argc, char **argv)
{
	enum { O_DUMP = 256, O_PERSTEP, O_STEPRE, O_IGNTOT, O_VERSION, O_GRADACC, O_BREAKDOWN, O_TOP, O_PEAKBLK, O_SUMMARY, O_WHATIF, O_PERFETTO, O_PFWIN, O_HTML, O_TSNAP };
	static const struct option lo[] = {
		{"dump", no_argument, NULL, O_DUMP},
		{"per-step", no_argument, NULL, O_PERSTEP},
		{"format", required_argument, NULL, 'f'},
		{"step-marker", required_argument, NULL, O_STEPRE},
		{"ignore-totals", no_argument, NULL, O_IGNTOT},
		{"grad-accum", required_argument, NULL, O_GRADACC},
		{"breakdown", no_argument, NULL, O_BREAKDOWN},
		{"top", required_argument, NULL, O_TOP},
		{"peak-blocks", no_argument, NULL, O_PEAKBLK},
		{"summary", no_argument, NULL, O_SUMMARY},
		{"what-if", required_argument, NULL, O_WHATIF},
		{"perfetto", required_argument, NULL, O_PERFETTO},
		{"perfetto-window", required_argument, NULL, O_PFWIN},
		{"html", required_argument, NULL, O_HTML},
		{"torch-snapshot", required_argument, NULL, O_TSNAP},
		{"jobs", required_argument, NULL, 'j'},
		{"output", required_argument, NULL, 'o'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, O_VERSION},
		{NULL, 0, NULL, 0},
	};
	struct dsmt_opts o = {.step_re = DSMT_DEFAULT_STEP_RE};
	const int diff = argc > 1 && !strcmp(argv[1], "diff");
	if (diff) { /* dsmemdecode diff [options] A B */
		argv++;
		argc--;
	}
	const char *fmt = "table", *outpath = NULL, *whatif = NULL, *perfetto = NULL, *htmlpath = NULL, *snappath = NULL;
	int dump = 0, c, breakdown = 0, summary = 0;
	uint64_t pf_window = 0;
	while ((c = getopt_long(argc, argv, "f:j:o:vh", lo, NULL)) != -1) {
		switch (c) {
		case O_DUMP: dump = 1; break;
		case O_PERSTEP: dump = 0; break;
		case 'f': fmt = optarg; break;
		case O_STEPRE: o.step_re = optarg; break;
		case O_IGNTOT: o.ignore_totals = 1; break;
		case O_GRADACC: {
			char *e;
			long x = strtol(optarg, &e, 10);
			if (!*optarg || *e || x < 1 || x > 1000000) {
				fprintf(stderr, "dsmemdecode: --grad-accum wants a number from 1 to 1000000, not '%s'\n",
					optarg);
				return DSMT_EXIT_USAGE;
			}
			o.grad_accum = (int)x;
			break;
		}
		case O_BREAKDOWN: breakdown = 1; break;
		case O_PEAKBLK: o.peak_blocks = 1; break;
		case O_SUMMARY: summary = 1; break;
		case O_WHATIF: whatif = optarg; break;
		case O_PERFETTO: perfetto = optarg; break;
		case O_PFWIN: {
			char *e;
			long long x = strtoll(optarg, &e, 10);
			if (!*optarg || *e || x < 0 || x > 3600000000LL) {
				fprintf(stderr, "dsmemdecode: --perfetto-window wants microseconds from 0 to 3600000000, not '%s'\n",
					optarg);
				return DSMT_EXIT_USAGE;
			}
			pf_window = (uint64_t)x;
			break;
		}
		case O_HTML: htmlpath = optarg; break;
		case O_TSNAP: snappath = optarg; break;
		case O_TOP: {
			char *e;
			long x = strtol(optarg, &e, 10);
			if (!*optarg || *e || x < 1 || x > 10000) {
				fprintf(stderr, "dsmemdecode: --top wants a number from 1 to 10000, not '%s'\n", optarg);
				return DSMT_EXIT_USAGE;
			}
			o.top = (int)x;
			break;
		}
		case 'j': {
			char *e;
			long x = strtol(optarg, &e, 10);
			if (!*optarg || *e || x < 1 || x > 256) {
				fprintf(stderr, "dsmemdecode: --jobs wants a number from 1 to 256, not '%s'\n", optarg);
				return DSMT_EXIT_USAGE;
			}
			njobs = (int)x;
			break;
		}
		case 'o': outpath = optarg; break;
		case 'v': o.verbose++; break;
		case 'h': usage(stdout); return DSMT_EXIT_OK;
		case O_VERSION:
			printf("dsmemdecode %s (trace format %d.%d)\n", DSMT_VERSION, DSMT_FORMAT_MAJOR,
			       DSMT_FORMAT_MINOR);
			return DSMT_EXIT_OK;
		default: usage(stderr); return DSMT_EXIT_USAGE;
		}
	}
	if (strcmp(fmt, "table") && strcmp(fmt, "csv") && strcmp(fmt, "json")) {
		fprintf(stderr, "dsmemdecode: unknown format '%s' (table, csv or json)\n", fmt);
		return DSMT_EXIT_USAGE;
	}
	if ((summary || whatif) && !strcmp(fmt, "csv")) {
		fprintf(stderr, "dsmemdecode: %s prints a table or json, not csv\n", summary ? "--summary" : "--what-if");
		return DSMT_EXIT_USAGE;
	}
	if (summary && whatif) {
		fputs("dsmemdecode: --summary and --what-if are separate reports: one at a time\n", stderr);
		return DSMT_EXIT_USAGE;
	}
	if (diff && (dump || summary || whatif || perfetto || breakdown || o.peak_blocks || !strcmp(fmt, "csv"))) {
		fputs("dsmemdecode: diff prints a table or json; --dump, --summary, --what-if, --perfetto, --breakdown,"
		      " --peak-blocks and csv do not apply\n", stderr);
		return DSMT_EXIT_USAGE;
	}
	if (diff && argc - optind != 2) {
		fprintf(stderr, "dsmemdecode: diff wants two runs (A B: each a trace or a directory of rank traces), not %d "
				"operand%s\n", argc - optind, argc - optind == 1 ? "" : "s");
		return DSMT_EXIT_USAGE;
	}
	if (optind >= argc) {
		usage(stderr);
		return DSMT_EXIT_USAGE;
	}
	if ((htmlpath || snappath) && (dump || summary || whatif)) {
		fprintf(stderr, "dsmemdecode: --%s does not go with --%s\n", htmlpath ? "html" : "torch-snapshot",
			dump ? "dump" : summary ? "summary" : "what-if");
		return DSMT_EXIT_USAGE;
	}
	if (snappath && argc - optind != 1) {
		fprintf(stderr, "dsmemdecode: --torch-snapshot wants the trace of one process, not %d files\n",
			argc - optind);
		return DSMT_EXIT_USAGE;
	}
	o.series = htmlpath != NULL;
	o.tsnap = snappath != NULL;
	if (htmlpath && !o.top)
		o.top = 10; /* the page lists the top sites at each peak */
	/* attribution: what the JSON report and the table's --breakdown show */
	o.attrib = !strcmp(fmt, "json") || breakdown || o.top || summary || whatif; /* summary, what-if: breakdowns */
	o.timeline = perfetto != NULL;
	progress_init();
	if (prog.on) {
		o.progress = progress;
		o.progress_arg = NULL;
	}
	if (perfetto && dump) {
		fputs("dsmemdecode: --perfetto needs a decode, not --dump\n", stderr);
		return DSMT_EXIT_USAGE;
	}
	FILE *out = stdout, *pf = NULL, *html = NULL, *snap = NULL;
	if (outpath && !(out = fopen(outpath, "w"))) {
		perror(outpath);
		return DSMT_EXIT_USAGE;
	}
	if (perfetto && !(pf = fopen(perfetto, "w"))) {
		fprintf(stderr, "dsmemdecode: --perfetto %s: %s\n", perfetto, strerror(errno));
		return DSMT_EXIT_USAGE;
	}
	if ((htmlpath && !(html = fopen(htmlpath, "w"))) || (snappath && !(snap = fopen(snappath, "wb")))) {
		fprintf(stderr, "dsmemdecode: cannot write %s: %s\n", html || !htmlpath ? snappath : htmlpath,
			strerror(errno));
		if (html)
			fclose(html);
		return DSMT_EXIT_USAGE;
	}
	int code = DSMT_EXIT_OK;
	int nfiles = argc - optind;
	if (diff) {
		int shown = o.top ? o.top : 10;
		o.attrib = 1;
		o.top = shown * 4 < 40 ? 40 : shown * 4 > 10000 ? 10000 : shown * 4; /* sites beyond the shown ones: matches */
		code = run_diff(argv + optind, &o, out, !strcmp(fmt, "json"), shown);
	} else if (dump) {
		for (int i = 0; i < nfiles; i++) {
			int r = dsmt_dump_file(argv[optind + i], out, stderr);
			if (r > code)
				code = r;
		}
	} else {
		struct dsmt_process *ps;
		size_t n = decode_all(argv + optind, (size_t)nfiles, &o, &ps, &code);
		if (code != DSMT_EXIT_USAGE) {
			dsmt_sort_processes(ps, n);
			if (html || snap) {
				if (html)
					dsmt_write_html(html, ps, n);
				if (snap && n)
					dsmt_write_torch_snapshot(snap, &ps[0]);
			} else if (whatif) {
				int r = dsmt_write_whatif(out, ps, n, whatif, !strcmp(fmt, "json"), stderr);
				if (r > code)
					code = r;
			} else if (summary)
				dsmt_write_summary(out, ps, n, !strcmp(fmt, "json"));
			else if (!strcmp(fmt, "json"))
				dsmt_write_json(out, ps, n);
			else if (!strcmp(fmt, "csv"))
				dsmt_write_csv(out, ps, n);
			else {
				dsmt_write_table(out, ps, n);
				if (breakdown)
					dsmt_write_breakdown(out, ps, n);
			}
			if (pf && dsmt_write_perfetto(pf, ps, n, pf_window)) {
				fprintf(stderr, "dsmemdecode: --perfetto %s: out of memory\n", perfetto);
				code = DSMT_EXIT_BAD;
			}
		}
		free_all(ps, n);
	}
	if (html && (fflush(html) | ferror(html) | fclose(html))) {
		fprintf(stderr, "dsmemdecode: writing %s failed\n", htmlpath);
		code = DSMT_EXIT_BAD;
	}
	if (snap && (fflush(snap) | ferror(snap) | fclose(snap))) {
		fprintf(stderr, "dsmemdecode: writing %s failed\n", snappath);
		code = DSMT_EXIT_BAD;
	}
	if (fflush(out) || (out != stdout && fclose(out))) {
		perror(outpath ? outpath : "stdout");
		return DSMT_EXIT_BAD;
	}
	if (pf && fclose(pf)) {
		fprintf(stderr, "dsmemdecode: --perfetto %s: %s\n", perfetto, strerror(errno));
		return DSMT_EXIT_BAD;
	}
	return code;
}
