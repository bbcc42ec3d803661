/* dsmemtrace [options] [--] CMD [ARGS...]: run CMD traced by libdsmemtrace.so
 * (README, "The launcher"; docs/decisions.md says why C).
 *
 * Sets LD_PRELOAD (the library's absolute path before whatever LD_PRELOAD
 * held), DSMEMTRACE_DIR (absolute; created) and the DSMEMTRACE_* variables
 * of the options; with --deepspeed-env writes the same entries into
 * DeepSpeed's .deepspeed_env, which its pdsh/MPI runners export on every
 * node.  Runs CMD as a child (SIGINT and SIGQUIT reach it from the terminal;
 * SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 sent to the launcher are passed on),
 * then lists the trace files that appeared and the dsmemdecode command to
 * run next (stderr), and exits as CMD did: its exit status, or the same
 * signal.  Its own errors: 125 (one line on stderr), 126 CMD not
 * executable, 127 CMD not found (env(1)'s codes). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXIT_OWN 125
#define LIBNAME "libdsmemtrace.so"

static int quiet;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;
	fputs("dsmemtrace: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(EXIT_OWN);
}

/* ---- tracer options: one row per DSMEMTRACE_* variable ---- */

enum { K_INT, K_FLAG0, K_FLAG1, K_STR };
struct topt {
	const char *name; /* --name */
	const char *var;  /* the environment variable */
	int kind;         /* K_INT: an integer in [lo, hi]; K_FLAG0/1: sets 0/1; K_STR: as given */
	long lo, hi;
	const char *help;
};

static const struct topt topts[] = {
	{"native-depth", "DSMEMTRACE_NATIVE_DEPTH", K_INT, 0, 64, "native frames per allocation (0-64)"},
	{"py-depth", "DSMEMTRACE_PY_DEPTH", K_INT, 0, 128, "Python frames per allocation (0-128, 0 = off)"},
	{"flush-ms", "DSMEMTRACE_FLUSH_MS", K_INT, 1, 60000, "end a zstd frame at least this often (ms)"},
	{"buffer-kb", "DSMEMTRACE_BUFFER_KB", K_INT, 64, 1 << 20, "first buffer per thread (KiB)"},
	{"max-buffer-mb", "DSMEMTRACE_MAX_BUFFER_MB", K_INT, 1, 1 << 20, "all buffers together (MiB)"},
	{"sample-ms", "DSMEMTRACE_SAMPLE_MS", K_INT, 0, 3600000, "NVML samples every N ms (0 = none)"},
	{"host-sample-ms", "DSMEMTRACE_HOST_SAMPLE_MS", K_INT, 0, 3600000, "RSS samples every N ms (0 = none)"},
	{"toggle-signal", "DSMEMTRACE_TOGGLE_SIGNAL", K_STR, 0, 0, "SIG pauses/resumes recording (USR1, USR2, ...)"},
	{"run-id", "DSMEMTRACE_RUN_ID", K_STR, 0, 0, "the run id (groups the files of one run)"},
	{"cupti-lib", "DSMEMTRACE_CUPTI_LIB", K_STR, 0, 0, "the libcupti to load"},
	{"no-cupti", "DSMEMTRACE_CUPTI", K_FLAG0, 0, 0, "do not use CUPTI"},
	{"no-dlsym", "DSMEMTRACE_NO_DLSYM", K_FLAG1, 0, 0, "do not wrap the driver entry points"},
	{"no-cupti-statics", "DSMEMTRACE_CUPTI_STATICS", K_FLAG0, 0, 0, "no CUPTI MEMORY2 activity (statics)"},
	{"selftime", "DSMEMTRACE_SELFTIME", K_FLAG1, 0, 0, "print the time spent recording at exit"},
};
#define NTOPT (sizeof(topts) / sizeof(topts[0]))

/* the values set by options (NULL: not set) */
static const char *tval[NTOPT];

static void usage(FILE *f)
{
	fputs("usage: dsmemtrace [options] [--] CMD [ARGS...]\n"
	      "       dsmemtrace --deepspeed-env[=FILE] [options]     (write the entries only)\n"
	      "Run CMD with libdsmemtrace.so preloaded (one trace file per process that allocates\n"
	      "GPU memory), then say where the traces went and how to decode them.\n"
	      "\n"
	      "  -o, --output-dir DIR     directory for the traces (DSMEMTRACE_DIR; default: the\n"
	      "                           current one), created if missing, passed on absolute\n"
	      "  --deepspeed-env[=FILE]   also write LD_PRELOAD, DSMEMTRACE_DIR and the options\n"
	      "                           below into DeepSpeed's .deepspeed_env (default: $DS_ENV_FILE,\n"
	      "                           else ./.deepspeed_env), replacing our earlier entries and\n"
	      "                           keeping the others, so multi-node runners trace every rank\n"
	      "  --lib PATH               the libdsmemtrace.so to preload (default: the one installed\n"
	      "                           with this launcher, or in its build tree)\n"
	      "  -q, --quiet              no report after CMD\n"
	      "  -h, --help               this text\n"
	      "      --version            the version\n"
	      "tracer options (README, Environment variables):\n",
	      f);
	for (size_t i = 0; i < NTOPT; i++) {
		char n[64];
		snprintf(n, sizeof n, "--%s%s", topts[i].name, topts[i].kind == K_INT ? " N" : topts[i].kind == K_STR ? " S" : "");
		fprintf(f, "  %-24s %s (%s%s)\n", n, topts[i].help, topts[i].var,
			topts[i].kind == K_FLAG0 ? "=0" : topts[i].kind == K_FLAG1 ? "=1" : "");
	}
	fputs("\nExit status: CMD's (or CMD's signal); 125 bad usage or a launcher error,\n"
	      "126 CMD not executable, 127 CMD not found.\n",
	      f);
}

/* ---- paths ---- */

static char *xstrdup(const char *s)
{
	char *d = strdup(s);
	if (!d)
		die("out of memory");
	return d;
}

static char *join(const char *a, const char *b)
{
	size_t n = strlen(a) + strlen(b) + 2;
	char *p = malloc(n);
	if (!p)
		die("out of memory");
	snprintf(p, n, "%s/%s", a, b);
	return p;
}

static int is_file(const char *p)
{
	struct stat st;
	return !stat(p, &st) && S_ISREG(st.st_mode);
}

/* this program's directory, and whether it is the build tree's binary */
static char *self_dir(int *in_build)
{
	char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
	*in_build = 0;
	if (n <= 0)
		return NULL;
	buf[n] = 0;
	char b[PATH_MAX];
	if (realpath(DSMT_BUILD_SELF, b) && !strcmp(b, buf))
		*in_build = 1;
	char *s = strrchr(buf, '/');
	if (s)
		*s = 0;
	return xstrdup(buf);
}

/* the library: --lib, the build tree's (for the build tree's launcher),
 * next to an installed launcher (prefix/bindir/../libdir, wherever the
 * prefix was moved), the configured install path */
static char *find_lib(const char *opt, const char *dir, int in_build)
{
	char r[PATH_MAX];
	if (opt) {
		if (!is_file(opt) || !realpath(opt, r))
			die("--lib %s: no such file", opt);
		return xstrdup(r);
	}
	const char *cand[3] = {in_build ? DSMT_BUILD_LIB : NULL, NULL, DSMT_INSTALL_LIB};
	const char *fb = DSMT_LIB_FROM_BIN "/" LIBNAME;
	char *rel = fb[0] == '/' ? xstrdup(fb) : dir ? join(dir, fb) : NULL;
	cand[1] = rel;
	for (int i = 0; i < 3; i++)
		if (cand[i] && is_file(cand[i]) && realpath(cand[i], r)) {
			free(rel);
			return xstrdup(r);
		}
	die("%s not found (looked for %s%s%s and %s): give --lib PATH", LIBNAME, in_build ? DSMT_BUILD_LIB ", " : "",
	    rel ? rel : "", rel ? "" : "(no /proc/self/exe)", DSMT_INSTALL_LIB);
}

static const char *find_decoder(const char *dir, int in_build)
{
	if (in_build && is_file(DSMT_BUILD_DECODER))
		return DSMT_BUILD_DECODER;
	char *p = dir ? join(dir, "dsmemdecode") : NULL;
	if (p && is_file(p))
		return p;
	free(p);
	return "dsmemdecode";
}

/* mkdir -p, then the absolute path */
static char *make_dir(const char *d)
{
	char *p = xstrdup(d);
	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s)
			continue;
		char c = *s;
		*s = 0;
		if (mkdir(p, 0777) && errno != EEXIST)
			die("output directory %s: %s", p, strerror(errno));
		*s = c;
		if (!c)
			break;
	}
	char r[PATH_MAX];
	struct stat st;
	if (!realpath(p, r) || stat(r, &st) || !S_ISDIR(st.st_mode))
		die("output directory %s: not a directory", d);
	free(p);
	return xstrdup(r);
}

/* LD_PRELOAD with lib first (not twice) */
static char *preload_value(const char *lib, const char *old)
{
	if (!old || !*old)
		return xstrdup(lib);
	/* already in it (ld.so separates entries by spaces or colons) */
	size_t n = strlen(lib);
	for (const char *s = old; (s = strstr(s, lib)); s += n)
		if ((s == old || s[-1] == ':' || s[-1] == ' ') && (!s[n] || s[n] == ':' || s[n] == ' '))
			return xstrdup(old);
	size_t m = n + strlen(old) + 2;
	char *v = malloc(m);
	if (!v)
		die("out of memory");
	snprintf(v, m, "%s:%s", lib, old);
	return v;
}

/* ---- .deepspeed_env ---- */

struct kv {
	const char *k;
	char *v;
};

/* Replace our keys' lines (keeping the others, in order), add the rest.
 * LD_PRELOAD: our library in front of the file's own value.  DeepSpeed
 * reads every line as KEY=VALUE: only such lines are written. */
static void write_ds_env(const char *path, struct kv *kv, size_t n)
{
	FILE *f = fopen(path, "r");
	char **keep = NULL;
	size_t nk = 0;
	char *line = NULL;
	size_t cap = 0;
	if (!f && errno != ENOENT)
		die("--deepspeed-env %s: %s", path, strerror(errno));
	while (f && getline(&line, &cap, f) > 0) {
		size_t l = strcspn(line, "\n");
		line[l] = 0;
		char *eq = strchr(line, '=');
		size_t kl = eq ? (size_t)(eq - line) : l;
		size_t i = 0;
		while (i < n && (strlen(kv[i].k) != kl || strncmp(line, kv[i].k, kl)))
			i++;
		if (i < n) {
			if (!strcmp(kv[i].k, "LD_PRELOAD") && eq) {
				char *v = preload_value(kv[i].v, eq + 1);
				free(kv[i].v);
				kv[i].v = v;
			}
			continue; /* rewritten below */
		}
		char **nkp = realloc(keep, (nk + 1) * sizeof(*keep));
		if (!nkp)
			die("out of memory");
		keep = nkp;
		keep[nk++] = xstrdup(line);
	}
	free(line);
	if (f)
		fclose(f);
	char *tmp = malloc(strlen(path) + 16);
	if (!tmp)
		die("out of memory");
	sprintf(tmp, "%s.dsmt%ld", path, (long)getpid());
	FILE *o = fopen(tmp, "w");
	if (!o)
		die("--deepspeed-env %s: %s", path, strerror(errno));
	for (size_t i = 0; i < nk; i++) {
		fprintf(o, "%s\n", keep[i]);
		free(keep[i]);
	}
	free(keep);
	for (size_t i = 0; i < n; i++)
		fprintf(o, "%s=%s\n", kv[i].k, kv[i].v);
	if (fclose(o) || rename(tmp, path)) {
		int e = errno;
		unlink(tmp);
		die("--deepspeed-env %s: %s", path, strerror(e));
	}
	free(tmp);
}

/* ---- traces before and after ---- */

struct names {
	char **v;
	size_t n;
};

static int is_trace(const char *n)
{
	size_t l = strlen(n);
	return !strncmp(n, "dsmemtrace.", 11) && l > 15 && !strcmp(n + l - 4, ".zst");
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static struct names list_traces(const char *dir)
{
	struct names s = {NULL, 0};
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (!is_trace(e->d_name))
			continue;
		char **nv = realloc(s.v, (s.n + 1) * sizeof(*s.v));
		if (!nv)
			die("out of memory");
		s.v = nv;
		s.v[s.n++] = xstrdup(e->d_name);
	}
	if (d)
		closedir(d);
	if (s.n)
		qsort(s.v, s.n, sizeof(*s.v), cmp_name);
	return s;
}

static int has_name(const struct names *s, const char *n)
{
	return s->n && bsearch(&n, s->v, s->n, sizeof(*s->v), cmp_name) != NULL;
}

/* a word for a POSIX shell */
static void put_word(const char *w)
{
	if (*w && !w[strcspn(w, " \t\n'\"\\$`!*?[]{}()<>|&;#~")]) {
		fputs(w, stderr);
		return;
	}
	fputc('\'', stderr);
	for (; *w; w++)
		if (*w == '\'')
			fputs("'\\''", stderr);
		else
			fputc(*w, stderr);
	fputc('\'', stderr);
}

static void report(const char *dir, const struct names *before, const char *decoder)
{
	struct names after = list_traces(dir);
	size_t nnew = 0;
	for (size_t i = 0; i < after.n; i++)
		nnew += !has_name(before, after.v[i]);
	if (!nnew) {
		fprintf(stderr, "dsmemtrace: no trace in %s: no process of the command allocated GPU memory here "
				"(ranks on other nodes write on their own nodes)\n", dir);
		return;
	}
	fprintf(stderr, "dsmemtrace: %zu trace file%s in %s:\n", nnew, nnew == 1 ? "" : "s", dir);
	size_t shown = 0;
	for (size_t i = 0; i < after.n; i++)
		if (!has_name(before, after.v[i]) && shown++ < 10)
			fprintf(stderr, "  %s\n", after.v[i]);
	if (shown > 10)
		fprintf(stderr, "  ... and %zu more\n", shown - 10);
	for (int summary = 0; summary <= (nnew > 1); summary++) {
		fputs(summary ? "dsmemtrace: one row per rank: " : "dsmemtrace: decode with: ", stderr);
		put_word(decoder);
		if (summary)
			fputs(" --summary", stderr);
		for (size_t i = 0; i < after.n; i++)
			if (!has_name(before, after.v[i])) {
				char *p = join(dir, after.v[i]);
				fputc(' ', stderr);
				put_word(p);
				free(p);
			}
		fputc('\n', stderr);
	}
	for (size_t i = 0; i < after.n; i++)
		free(after.v[i]);
	free(after.v);
}

/* ---- running CMD ---- */

static volatile sig_atomic_t child_pid;

static void forward(int sig)
{
	if (child_pid > 0)
		kill((pid_t)child_pid, sig);
}

static const int fwd_sigs[] = {SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};

/* fork and exec argv; its wait status */
static int run(char **argv)
{
	sigset_t all, old;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC))
		die("pipe: %s", strerror(errno));
	pid_t pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (!pid) {
		close(pfd[0]);
		sigprocmask(SIG_SETMASK, &old, NULL);
		execvp(argv[0], argv);
		int e = errno;
		if (write(pfd[1], &e, sizeof e) < 0) {
		}
		_exit(127);
	}
	close(pfd[1]);
	child_pid = pid;
	struct sigaction sa = {0};
	sa.sa_handler = SIG_IGN; /* the terminal sends these to CMD too */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGQUIT, &sa, NULL);
	sa.sa_handler = forward;
	sa.sa_flags = SA_RESTART;
	for (size_t i = 0; i < sizeof(fwd_sigs) / sizeof(fwd_sigs[0]); i++)
		sigaction(fwd_sigs[i], &sa, NULL);
	sigprocmask(SIG_SETMASK, &old, NULL);
	int e = 0;
	ssize_t r;
	while ((r = read(pfd[0], &e, sizeof e)) < 0 && errno == EINTR)
		;
	close(pfd[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			die("waitpid: %s", strerror(errno));
	if (r == (ssize_t)sizeof e) { /* exec failed */
		fprintf(stderr, "dsmemtrace: %s: %s\n", argv[0], strerror(e));
		exit(e == ENOENT ? 127 : 126);
	}
	return st;
}

int main(int argc, char **argv)
{
	enum { O_LIB = 256, O_DSENV, O_VERSION, O_TOPT = 512 };
	struct option lo[NTOPT + 8];
	size_t k = 0;
	lo[k++] = (struct option){"output-dir", required_argument, NULL, 'o'};
	lo[k++] = (struct option){"deepspeed-env", optional_argument, NULL, O_DSENV};
	lo[k++] = (struct option){"lib", required_argument, NULL, O_LIB};
	lo[k++] = (struct option){"quiet", no_argument, NULL, 'q'};
	lo[k++] = (struct option){"help", no_argument, NULL, 'h'};
	lo[k++] = (struct option){"version", no_argument, NULL, O_VERSION};
	for (size_t i = 0; i < NTOPT; i++)
		lo[k++] = (struct option){topts[i].name, topts[i].kind == K_INT || topts[i].kind == K_STR ? required_argument
												      : no_argument,
					  NULL, O_TOPT + (int)i};
	lo[k] = (struct option){NULL, 0, NULL, 0};
	const char *outdir = NULL, *libopt = NULL, *dsenv = NULL;
	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:o:qh", lo, NULL)) != -1) {
		switch (c) {
		case 'o': outdir = optarg; break;
		case 'q': quiet = 1; break;
		case O_LIB: libopt = optarg; break;
		case O_DSENV: {
			const char *e = getenv("DS_ENV_FILE");
			dsenv = optarg ? optarg : e && *e ? e : ".deepspeed_env";
			break;
		}
		case 'h': usage(stdout); return 0;
		case O_VERSION: printf("dsmemtrace %s\n", DSMT_VERSION); return 0;
		case ':': die("option %s needs a value (dsmemtrace --help)", argv[optind - 1]);
		case '?':
			if (optopt)
				die("unknown option -%c (dsmemtrace --help)", optopt);
			die("unknown option %s (dsmemtrace --help)", argv[optind - 1]);
		default: {
			const struct topt *t = &topts[c - O_TOPT];
			if (t->kind == K_INT) {
				char *e;
				errno = 0;
				long v = strtol(optarg, &e, 10);
				if (!*optarg || *e || errno || v < t->lo || v > t->hi)
					die("--%s wants an integer from %ld to %ld, not '%s'", t->name, t->lo, t->hi, optarg);
			} else if (t->kind == K_STR && !*optarg) {
				die("--%s wants a value", t->name);
			}
			tval[c - O_TOPT] = t->kind == K_FLAG0 ? "0" : t->kind == K_FLAG1 ? "1" : optarg;
			break;
		}
		}
	}
	char **cmd = argv + optind;
	if (!*cmd && !dsenv)
		die("no command given (dsmemtrace [options] -- CMD [ARGS...]; dsmemtrace --help)");

	int in_build;
	char *dir = self_dir(&in_build);
	char *lib = find_lib(libopt, dir, in_build);
	const char *decoder = find_decoder(dir, in_build);
	const char *od = outdir ? outdir : getenv("DSMEMTRACE_DIR");
	char *tdir = make_dir(od && *od ? od : ".");

	/* the environment of CMD (and the entries of .deepspeed_env) */
	struct kv kv[NTOPT + 2];
	size_t nkv = 0;
	kv[nkv++] = (struct kv){"LD_PRELOAD", preload_value(lib, getenv("LD_PRELOAD"))};
	kv[nkv++] = (struct kv){"DSMEMTRACE_DIR", xstrdup(tdir)};
	for (size_t i = 0; i < NTOPT; i++)
		if (tval[i])
			kv[nkv++] = (struct kv){topts[i].var, xstrdup(tval[i])};
	for (size_t i = 0; i < nkv; i++)
		if (setenv(kv[i].k, kv[i].v, 1))
			die("setenv %s: %s", kv[i].k, strerror(errno));
	if (dsenv) {
		free(kv[0].v); /* the file's LD_PRELOAD, not ours, goes after the library */
		kv[0].v = xstrdup(lib);
		write_ds_env(dsenv, kv, nkv);
		if (!quiet)
			fprintf(stderr, "dsmemtrace: %s: LD_PRELOAD, DSMEMTRACE_DIR%s for every DeepSpeed rank (the paths must "
					"exist on each node)\n", dsenv, nkv > 2 ? " and the tracer options" : "");
		if (!*cmd)
			return 0;
	}
	struct names before = list_traces(tdir);
	int st = run(cmd);
	if (!quiet)
		report(tdir, &before, decoder);
	fflush(stderr);
	if (WIFSIGNALED(st)) { /* die the same way (CMD dumped core, if anyone) */
		int sig = WTERMSIG(st);
		struct rlimit nocore = {0, 0};
		setrlimit(RLIMIT_CORE, &nocore);
		signal(sig, SIG_DFL);
		sigset_t s;
		sigemptyset(&s);
		sigaddset(&s, sig);
		sigprocmask(SIG_UNBLOCK, &s, NULL);
		raise(sig);
		return 128 + sig;
	}
	return WEXITSTATUS(st);
}
