/* Hook cost per event, by native stack depth, measured side by side in one
 * process: rounds alternate between depths and the median per depth is
 * reported.  The recording function is called from ~30 nested frames, about
 * what torch's allocator hook sees.  Links the tracer core directly.
 *
 * Usage: hook_cost OUTDIR [events-per-round] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "tracer.h"

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static volatile int sink;

__attribute__((noinline)) static void leaf(int n, uint64_t base)
{
	for (int i = 0; i < n; i++) {
		uint64_t tot[2] = {(uint64_t)i * 512, 1 << 30};
		dsmt_ev_mem(DSMT_REC_ALLOC, DSMT_API_TORCH, 0, base + (uint64_t)(i & 63) * 512, 512, 0,
			    __builtin_return_address(0), tot);
		dsmt_ev_mem(DSMT_REC_FREE, DSMT_API_TORCH, 0, base + (uint64_t)(i & 63) * 512, 512, 0,
			    __builtin_return_address(0), tot);
	}
}

__attribute__((noinline)) static void nest(int depth, int n, uint64_t base)
{
	if (depth == 0)
		leaf(n, base);
	else
		nest(depth - 1, n, base + (uint64_t)(depth & 1));
	sink++;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	setenv("DSMEMTRACE_DIR", argv[1], 1);
	setenv("DSMEMTRACE_NATIVE_DEPTH", "32", 1);
	int n = argc > 2 ? atoi(argv[2]) : 100000;
	dsmt_config_init();
	/* every event unwound (stack cache off), then depth 32 through the cache */
	const int depths[] = {0, 4, 8, 16, 32, 32}, cache[] = {0, 0, 0, 0, 0, 1};
	enum { ND = sizeof depths / sizeof *depths, ROUNDS = 7 };
	double ns[ND][ROUNDS];
	nest(28, 1000, 1 << 20); /* warm-up: starts the writer, loads libunwind */
	for (int r = 0; r < ROUNDS; r++)
		for (int d = 0; d < ND; d++) {
			dsmt_cfg.native_depth = depths[d];
			dsmt_cfg.stack_cache = cache[d];
			uint64_t t0 = dsmt_now_ns();
			nest(28, n / 2, 1 << 20);
			ns[d][r] = (double)(dsmt_now_ns() - t0) / n;
		}
	uint64_t c0 = dsmt_now_ns();
	for (int i = 0; i < 1000000; i++)
		sink += (int)dsmt_now_ns();
	printf("clock_gettime(CLOCK_MONOTONIC): %.1f ns\n", (double)(dsmt_now_ns() - c0) / 1e6);
#if defined(__x86_64__)
	/* for comparison: the TSC, which a cheaper clock would read */
	c0 = dsmt_now_ns();
	for (int i = 0; i < 1000000; i++)
		sink += (int)__builtin_ia32_rdtsc();
	printf("rdtsc: %.1f ns\n", (double)(dsmt_now_ns() - c0) / 1e6);
#endif
	printf("native_depth  stack_cache  median_ns_per_event  (rounds=%d, events/round=%d, ~30 frames deep)\n", ROUNDS,
	       n);
	for (int d = 0; d < ND; d++) {
		qsort(ns[d], ROUNDS, sizeof(double), cmp);
		printf("%12d  %11s  %19.1f\n", depths[d], cache[d] ? "on" : "off", ns[d][ROUNDS / 2]);
	}
	dsmt_writer_stop();
	return 0;
}
