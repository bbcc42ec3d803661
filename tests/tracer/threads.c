/* Given 8 threads allocating and freeing through one allocator mutex (as
 * torch's caching allocator does, with the report inside the mutex), when
 * the tracer records them into per-thread rings, then the decoder's replay
 * in sequence order agrees with the allocator's running totals at every
 * event, and every event is present.
 *
 * Usage: threads OUTDIR NTHREADS NEVENTS  (links the tracer core directly;
 * up to 256 threads) */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "format.h"
#include "tracer.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t total;
static int nevents;

static void *worker(void *arg)
{
	uintptr_t base = (uintptr_t)arg << 32;
	uint64_t live[16] = {0};
	for (int i = 0; i < nevents; i++) {
		int slot = i % 16;
		pthread_mutex_lock(&mu);
		if (live[slot]) {
			total -= live[slot];
			uint64_t tot[2] = {total, 1ull << 30};
			dsmt_ev_mem(DSMT_REC_FREE, DSMT_API_TORCH, 0, base + (uint64_t)slot * 4096, live[slot], 0,
				    NULL, tot);
			live[slot] = 0;
		} else {
			live[slot] = 512u * (uint64_t)(1 + (i * 7 + (int)(base >> 32)) % 31);
			total += live[slot];
			uint64_t tot[2] = {total, 1ull << 30};
			dsmt_ev_mem(DSMT_REC_ALLOC, DSMT_API_TORCH, 0, base + (uint64_t)slot * 4096, live[slot], 0,
				    NULL, tot);
		}
		pthread_mutex_unlock(&mu);
	}
	pthread_mutex_lock(&mu);
	for (int slot = 0; slot < 16; slot++)
		if (live[slot]) {
			total -= live[slot];
			uint64_t tot[2] = {total, 1ull << 30};
			dsmt_ev_mem(DSMT_REC_FREE, DSMT_API_TORCH, 0, base + (uint64_t)slot * 4096, live[slot], 0,
				    NULL, tot);
		}
	pthread_mutex_unlock(&mu);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	setenv("DSMEMTRACE_DIR", argv[1], 1);
	setenv("DSMEMTRACE_NATIVE_DEPTH", "0", 1);
	int n = atoi(argv[2]);
	nevents = atoi(argv[3]);
	dsmt_config_init();
	/* one step marker so the report has a step */
	dsmt_ev_nvtx(DSMT_REC_NVTX_MARK, 0, dsmt_intern("dsmemtrace:step", 15), 0);
	pthread_t t[256];
	for (int i = 0; i < n && i < 256; i++)
		pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
	for (int i = 0; i < n && i < 256; i++)
		pthread_join(t[i], NULL);
	dsmt_ev_nvtx(DSMT_REC_NVTX_MARK, 0, dsmt_intern("dsmemtrace:step", 15), 0);
	dsmt_writer_stop();
	printf("%llu\n", (unsigned long long)total);
	return 0;
}
