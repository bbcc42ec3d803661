/* Process-lifecycle victim for tests/lifecycle/run_life.py: allocates through
 * the stand-in torch (tests/standin, loaded like torch: libcudart.so.13
 * RTLD_GLOBAL, then libtorchstub.so RTLD_LOCAL) and then exits, dies by a
 * signal, forks, spawns, execs, pauses tracing...  Every allocator call is
 * logged after it returns, one line per call written with write(2) to the
 * log file (--log, O_APPEND), so the driver knows what the trace must hold:
 *
 *   A|F <ptr hex> <size> <CLOCK_MONOTONIC ns>   must be in this process's trace
 *   a|f <ptr hex> <size> <ns>                    must not (paused, forked child)
 *   S <dev> <allocated> <reserved>               allocator counters at a PAUSE
 *   R <dev> <allocated> <reserved>               allocator counters at a RESUME
 *   H <sig>                                      the program's own handler ran
 *   D <what>                                     a fact for the driver (pids...)
 *
 * Sizes are multiples of 512, so the allocator's block size (what the trace
 * records) is the requested size.  RLIMIT_CORE is set to 0 first: the
 * crashing modes leave no core file.
 *
 * usage: victim_life MODE [--log FILE] [--n N] [--devices D] [--seed S]
 *   exit             allocate, return 0
 *   self-signal SIG  allocate, kill(getpid(), SIG) (TERM INT USR2 ...), return 5 if alive
 *   wait-signal      allocate, print "ready", wait (the driver signals), return 4 after 30 s
 *   segv             allocate, write through a NULL pointer
 *   abort            allocate, abort()
 *   own-continue     own SIGTERM handler (sa_handler) first; allocate, kill(SIGTERM),
 *                    allocate more, return 7
 *   own-exit         own SIGTERM handler (SA_SIGINFO) that _exit(9)s; allocate, kill(SIGTERM)
 *   ignored          SIGTERM must arrive ignored; allocate, kill(SIGTERM), allocate, return 0
 *   fork             allocate; a child that allocates and exits 0; a child that allocates
 *                    and dies by SIGTERM; allocate again, return 0
 *   spawn            allocate; posix_spawn(self child) and fork+execv(self child) with logs
 *                    FILE.spawn and FILE.forkexec; allocate again, return 0
 *   exec VIA         allocate, exec self as `child --log FILE.exec` (VIA execv|execvp|execve)
 *   child            allocate, return 0 (the image spawn and exec start)
 *   loop             allocate/free at random until killed (return 0 after 30 s)
 *   pause            allocate on D devices, dsmemtrace_pause(), allocate + NVTX, resume, allocate
 *   pause-first      pause before the first allocation, allocate, resume, allocate
 *   toggle           like pause, with kill(getpid(), SIGUSR2) twice (and 300 ms for the
 *                    writer thread to apply each toggle)
 *   nvtx-signal SIG  NVTX ranges only (no allocation), then kill(getpid(), SIG)
 *   nvtx-wait        NVTX ranges only, print "ready", wait for the driver's signal
 *   threads          --n threads allocate and free (sizes up to 32 KiB, up to 8
 *                    live each) --ops times each (--ops 0: until --secs have
 *                    passed), all started together, then free what they hold;
 *                    prints the counts, and with --secs the allocator's peak
 *                    and final allocated bytes (device 0)
 *   secure           prints whether the process runs in secure mode (AT_SECURE)
 *                    and whether NVTX_INJECTION64_PATH / CUDA_INJECTION64_PATH
 *                    are set, allocates, prints them again
 */
#include "dsmemtrace.h"
#include "torchstub.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <nvtx3/nvToolsExt.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define TS_PTR(ret, name, args) static ret(*name##_p) args;
TS_FUNCTIONS(TS_PTR)

static int log_fd = -1;
static const char *log_path, *self_path;
static int ndev = 1, nops = 40;
static unsigned long long seed = 1;
static volatile sig_atomic_t handler_ran;

static uint64_t mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* one write(2) per line: async-signal-safe, visible to the driver at once */
static void logline(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logline(const char *fmt, ...)
{
	if (log_fd < 0)
		return;
	char b[160];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(b, sizeof b, fmt, ap);
	va_end(ap);
	if (n > 0 && write(log_fd, b, (size_t)n) < 0)
		_exit(98);
}

/* size bases of the phases of a run: every size stays <= 1 MiB (the small
 * pool, where the block is exactly the rounded request) */
#define B1 (256 * 1024)
#define B2 (512 * 1024)
#define B3 (768 * 1024)

static int paused; /* log a/f instead of A/F */
static int child_tag;

static void *xalloc(size_t size, int dev)
{
	void *p = ts_alloc_p(size, dev, NULL);
	uint64_t t = mono_ns();
	if (!p) {
		fprintf(stderr, "victim_life: allocation of %zu bytes failed\n", size);
		exit(3);
	}
	logline("%c %p %zu %llu\n", paused || child_tag ? 'a' : 'A', p, size, (unsigned long long)t);
	return p;
}

static void xfree(void *p, size_t size)
{
	ts_free_p(p);
	uint64_t t = mono_ns();
	logline("%c %p %zu %llu\n", paused || child_tag ? 'f' : 'F', p, size, (unsigned long long)t);
}

static void *load(void *h, const char *name)
{
	void *p = dlsym(h, name);
	if (!p) {
		fprintf(stderr, "victim_life: %s not found\n", name);
		exit(3);
	}
	return p;
}

static void load_torch(void)
{
	if (!dlopen("libcudart.so.13", RTLD_NOW | RTLD_GLOBAL)) {
		fprintf(stderr, "victim_life: %s\n", dlerror());
		exit(3);
	}
	void *th = dlopen("libtorchstub.so", RTLD_NOW | RTLD_LOCAL);
	if (!th) {
		fprintf(stderr, "victim_life: %s\n", dlerror());
		exit(3);
	}
#define TS_LOAD(ret, name, args) *(void **)&name##_p = load(th, #name);
	TS_FUNCTIONS(TS_LOAD)
	if (ts_device_count_p() < ndev) {
		fprintf(stderr, "victim_life: %d devices needed\n", ndev);
		exit(3);
	}
}

/* n allocations spread over the devices (sizes from `base`), every other one
 * freed at once, the rest freed at the end: 1.5 n log lines per call */
static void work(int n, size_t base)
{
	void *keep[256];
	size_t ksz[256];
	int dk[256], nk = 0;
	if (n > 256)
		n = 256;
	for (int i = 0; i < n; i++) {
		int dev = i % ndev;
		size_t size = base + 512 * (size_t)(1 + (i * 37) % 300);
		void *p = xalloc(size, dev);
		if ((i / ndev) % 2) {
			xfree(p, size);
		} else {
			keep[nk] = p;
			ksz[nk] = size;
			dk[nk++] = dev;
		}
	}
	for (int i = 0; i < nk; i++)
		if (i % 3 == 0) /* some stay live: the totals are not back to zero */
			xfree(keep[i], ksz[i]);
	(void)dk;
}

static void nvtx_ranges(const char *name)
{
	nvtxRangePushA(name);
	nvtxMarkA("mark");
	nvtxRangeId_t r = nvtxRangeStartA("started");
	nvtxRangeEnd(r);
	nvtxRangePop();
}

static void counters(char what)
{
	for (int d = 0; d < ndev; d++)
		logline("%c %d %llu %llu\n", what, d, (unsigned long long)ts_memory_allocated_p(d),
			(unsigned long long)ts_memory_reserved_p(d));
}

static int signum(const char *s)
{
	static const struct {
		const char *n;
		int s;
	} t[] = {{"TERM", SIGTERM}, {"INT", SIGINT}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
		 {"HUP", SIGHUP},   {"SEGV", SIGSEGV}, {"ABRT", SIGABRT}, {"KILL", SIGKILL}};
	for (size_t i = 0; i < sizeof t / sizeof *t; i++)
		if (!strcmp(s, t[i].n))
			return t[i].s;
	fprintf(stderr, "victim_life: unknown signal %s\n", s);
	exit(2);
}

static void wait_for_signal(void)
{
	printf("ready\n");
	fflush(stdout);
	uint64_t end = mono_ns() + 30ull * 1000000000ull;
	while (mono_ns() < end) {
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	fprintf(stderr, "victim_life: no signal came\n");
	exit(4);
}

static void msleep(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void on_term_plain(int sig)
{
	handler_ran = 1;
	logline("H %d\n", sig);
}

static void on_term_info(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	logline("H %d %d\n", sig, si ? si->si_code : -99);
	_exit(9);
}

static const char *disposition(int sig)
{
	struct sigaction sa;
	if (sigaction(sig, NULL, &sa))
		return "error";
	if (sa.sa_flags & SA_SIGINFO)
		return "siginfo-handler";
	if (sa.sa_handler == SIG_IGN)
		return "ignored";
	if (sa.sa_handler == SIG_DFL)
		return "default";
	return "handler";
}

static int child_status(pid_t pid, const char *what)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			perror("waitpid");
			exit(3);
		}
	if (WIFEXITED(st))
		printf("%s: exit %d\n", what, WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		printf("%s: signal %d\n", what, WTERMSIG(st));
	fflush(stdout);
	return st;
}

static char *sub_log(const char *suffix)
{
	static char buf[4][4096];
	static int k;
	char *b = buf[k++ & 3];
	snprintf(b, sizeof buf[0], "%s%s", log_path ? log_path : "/dev/null", suffix);
	return b;
}

static void loop(void)
{
	enum { LIVE = 64 };
	void *live[LIVE];
	size_t lsz[LIVE];
	int n = 0;
	uint64_t end = mono_ns() + 30ull * 1000000000ull;
	unsigned long long x = seed * 2862933555777941757ull + 3037000493ull;
	for (unsigned long i = 0; mono_ns() < end; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		unsigned r = (unsigned)(x >> 33);
		if (n == 0 || (n < LIVE && (r & 1))) {
			lsz[n] = 512 * (size_t)(1 + (r >> 1) % 2048);
			live[n] = xalloc(lsz[n], 0);
			n++;
		} else {
			int k = (int)((r >> 1) % (unsigned)n);
			xfree(live[k], lsz[k]);
			live[k] = live[--n];
			lsz[k] = lsz[n];
		}
		if (i % 8 == 7) {
			struct timespec ts = {0, 50 * 1000};
			nanosleep(&ts, NULL);
		}
	}
}

/* ---- threads ---- */

static int nthreads_ops;
static uint64_t threads_end;
static pthread_barrier_t threads_go;
static _Atomic unsigned long long t_allocs, t_frees, t_bytes;

static void *thread_main(void *arg)
{
	unsigned long long x = (uintptr_t)arg * 0x9E3779B97F4A7C15ull + seed;
	void *live[8];
	size_t lsz[8];
	int n = 0;
	unsigned long long a = 0, f = 0, b = 0;
	pthread_barrier_wait(&threads_go);
	for (long i = 0; nthreads_ops ? i < nthreads_ops : mono_ns() < threads_end; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		unsigned r = (unsigned)(x >> 33);
		if (n == 0 || (n < 8 && (r & 1))) {
			lsz[n] = 512 * (size_t)(1 + (r >> 1) % 64);
			live[n] = ts_alloc_p(lsz[n], 0, NULL);
			if (!live[n]) {
				fprintf(stderr, "victim_life: allocation of %zu bytes failed\n", lsz[n]);
				exit(3);
			}
			a++;
			b += lsz[n];
			n++;
		} else {
			int k = (int)((r >> 1) % (unsigned)n);
			ts_free_p(live[k]);
			f++;
			live[k] = live[--n];
			lsz[k] = lsz[n];
		}
	}
	while (n > 0) {
		ts_free_p(live[--n]);
		f++;
	}
	t_allocs += a;
	t_frees += f;
	t_bytes += b;
	return NULL;
}

static int run_threads(int n, int secs, int ops)
{
	pthread_t *t = calloc((size_t)n, sizeof *t);
	if (!t || pthread_barrier_init(&threads_go, NULL, (unsigned)n + 1))
		return 3;
	nthreads_ops = ops;
	for (int i = 0; i < n; i++) {
		int rc = pthread_create(&t[i], NULL, thread_main, (void *)(uintptr_t)(i + 1));
		if (rc) {
			fprintf(stderr, "victim_life: pthread_create: %s\n", strerror(rc));
			return 3;
		}
	}
	threads_end = mono_ns() + (uint64_t)secs * 1000000000ull;
	pthread_barrier_wait(&threads_go);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	free(t);
	printf("threads %d: %llu allocs, %llu frees, %llu bytes\n", n, (unsigned long long)t_allocs,
	       (unsigned long long)t_frees, (unsigned long long)t_bytes);
	if (!ops)
		printf("allocator: peak %llu, end %llu\n", (unsigned long long)ts_max_memory_allocated_p(0),
		       (unsigned long long)ts_memory_allocated_p(0));
	return 0;
}

static void secure_report(const char *when)
{
	const char *nv = getenv("NVTX_INJECTION64_PATH"), *cu = getenv("CUDA_INJECTION64_PATH");
	printf("%s: AT_SECURE=%lu NVTX_INJECTION64_PATH %s CUDA_INJECTION64_PATH %s\n", when, getauxval(AT_SECURE),
	       nv ? "set" : "unset", cu ? "set" : "unset");
	fflush(stdout);
}

static void usage(void)
{
	fprintf(stderr, "usage: victim_life MODE [ARG] [--log FILE] [--n N] [--devices D] [--seed S] [--secs S] [--ops K]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct rlimit rl = {0, 0};
	setrlimit(RLIMIT_CORE, &rl);
	if (argc < 2)
		usage();
	self_path = argv[0];
	const char *mode = argv[1], *marg = NULL;
	int i = 2, secs = 0, ops = 0;
	if (!strcmp(mode, "self-signal") || !strcmp(mode, "exec") || !strcmp(mode, "nvtx-signal")) {
		if (argc < 3)
			usage();
		marg = argv[i++];
	}
	for (; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			usage();
		if (!strcmp(a, "--log"))
			log_path = v;
		else if (!strcmp(a, "--n"))
			nops = atoi(v);
		else if (!strcmp(a, "--devices"))
			ndev = atoi(v);
		else if (!strcmp(a, "--seed"))
			seed = strtoull(v, NULL, 10);
		else if (!strcmp(a, "--secs"))
			secs = atoi(v);
		else if (!strcmp(a, "--ops"))
			ops = atoi(v);
		else
			usage();
		i++;
	}
	if (ndev < 1 || ndev > 2 || nops < 1 || nops > 4096)
		usage();
	if (log_path) {
		log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (log_fd < 0) {
			perror(log_path);
			return 3;
		}
	}

	if (!strcmp(mode, "nvtx-signal") || !strcmp(mode, "nvtx-wait")) {
		load_torch(); /* loaded, never used */
		nvtx_ranges("no_alloc");
		if (marg)
			kill(getpid(), signum(marg));
		else
			wait_for_signal();
		return 5;
	}

	/* handlers and dispositions the program sets before its first allocation */
	if (!strcmp(mode, "own-continue")) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_term_plain;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGTERM, &sa, NULL);
	} else if (!strcmp(mode, "own-exit")) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_sigaction = on_term_info;
		sa.sa_flags = SA_SIGINFO;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGTERM, &sa, NULL);
	} else if (!strcmp(mode, "ignored")) {
		printf("SIGTERM at start: %s\n", disposition(SIGTERM));
	}

	if (!strcmp(mode, "secure"))
		secure_report("start");
	load_torch();
	nvtxNameOsThreadA(0, "main"); /* the NVTX injection loads here */

	if (!strcmp(mode, "threads"))
		return (secs > 0) == (ops > 0) ? 2 : run_threads(nops, secs, ops);

	if (!strcmp(mode, "pause-first")) {
		DSMEMTRACE_PAUSE();
		paused = 1;
		nvtx_ranges("paused");
		work(nops, 0);
		DSMEMTRACE_RESUME();
		paused = 0;
		counters('R');
		work(nops, B1);
		nvtx_ranges("resumed");
		return 0;
	}

	work(nops, 0);

	if (!strcmp(mode, "secure")) {
		secure_report("end");
		return 0;
	}
	if (!strcmp(mode, "exit") || !strcmp(mode, "child")) {
		printf("done\n");
		return 0;
	} else if (!strcmp(mode, "self-signal")) {
		kill(getpid(), signum(marg));
		printf("survived\n");
		return 5;
	} else if (!strcmp(mode, "wait-signal")) {
		wait_for_signal();
	} else if (!strcmp(mode, "segv")) {
		fflush(stdout);
		*(volatile int *)(uintptr_t)(argc < 0) = 1; /* NULL, opaque to the compiler */
		return 5;
	} else if (!strcmp(mode, "abort")) {
		abort();
	} else if (!strcmp(mode, "own-continue")) {
		kill(getpid(), SIGTERM);
		printf("handler ran: %d\n", (int)handler_ran);
		work(nops, B1);
		return 7;
	} else if (!strcmp(mode, "own-exit")) {
		kill(getpid(), SIGTERM);
		printf("survived\n");
		return 5;
	} else if (!strcmp(mode, "ignored")) {
		printf("SIGTERM after the first allocation: %s\n", disposition(SIGTERM));
		kill(getpid(), SIGTERM);
		work(nops, B1);
		printf("SIGTERM at the end: %s\n", disposition(SIGTERM));
		return 0;
	} else if (!strcmp(mode, "fork")) {
		fflush(stdout);
		pid_t c = fork();
		if (c == 0) {
			child_tag = 1;
			logline("D child-exit %d\n", (int)getpid());
			work(nops, B2);
			exit(0); /* atexit handlers run in the child too */
		}
		child_status(c, "child 1");
		uint64_t t0 = mono_ns();
		c = fork();
		if (c == 0) {
			child_tag = 1;
			logline("D child-term %d\n", (int)getpid());
			work(nops, B3);
			kill(getpid(), SIGTERM);
			_exit(5);
		}
		child_status(c, "child 2");
		/* a child must not wait for the parent's writer thread on its way out */
		logline("T child-term-ms %llu\n", (unsigned long long)((mono_ns() - t0) / 1000000));
		work(nops, B1);
		return 0;
	} else if (!strcmp(mode, "spawn")) {
		char n[16];
		snprintf(n, sizeof n, "%d", nops);
		char *sargv[] = {(char *)self_path, "child", "--log", sub_log(".spawn"), "--n", n, NULL};
		pid_t c;
		fflush(stdout);
		int rc = posix_spawn(&c, self_path, NULL, NULL, sargv, environ);
		if (rc) {
			fprintf(stderr, "posix_spawn: %s\n", strerror(rc));
			return 3;
		}
		logline("D spawn %d\n", (int)c);
		child_status(c, "posix_spawn child");
		char *fargv[] = {(char *)self_path, "child", "--log", sub_log(".forkexec"), "--n", n, NULL};
		c = fork();
		if (c == 0) {
			execv(self_path, fargv);
			_exit(127);
		}
		logline("D forkexec %d\n", (int)c);
		child_status(c, "fork+exec child");
		work(nops, B1);
		return 0;
	} else if (!strcmp(mode, "exec")) {
		char n[16];
		snprintf(n, sizeof n, "%d", nops);
		char *eargv[] = {(char *)self_path, "child", "--log", sub_log(".exec"), "--n", n, NULL};
		fflush(stdout);
		if (!strcmp(marg, "execv"))
			execv(self_path, eargv);
		else if (!strcmp(marg, "execvp"))
			execvp(self_path, eargv);
		else if (!strcmp(marg, "execve"))
			execve(self_path, eargv, environ);
		else
			usage();
		perror("exec");
		return 3;
	} else if (!strcmp(mode, "loop")) {
		loop();
		return 0;
	} else if (!strcmp(mode, "pause") || !strcmp(mode, "toggle")) {
		int api = !strcmp(mode, "pause");
		if (!api)
			printf("SIGUSR2 after the first allocation: %s\n", disposition(SIGUSR2));
		fflush(stdout);
		counters('S');
		if (api)
			DSMEMTRACE_PAUSE();
		else {
			kill(getpid(), SIGUSR2);
			msleep(300);
		}
		paused = 1;
		nvtx_ranges("paused");
		work(nops, B1);
		counters('R');
		if (api)
			DSMEMTRACE_RESUME();
		else {
			kill(getpid(), SIGUSR2);
			msleep(300);
		}
		paused = 0;
		nvtx_ranges("resumed");
		work(nops, B2);
		return 0;
	}
	usage();
	return 2;
}
