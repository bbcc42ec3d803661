/* libFuzzer target over the whole decoder: the reader (header, zstd frames,
 * record framing), the replay (decode.c), attribution (attrib.c), every
 * report (json, table + breakdown, csv, summary) and --dump.  The input is a
 * trace file's bytes; it is handed to the decoder as a file (a memfd), the
 * way dsmemdecode gets it.
 *
 * Two input modes, chosen by the first byte:
 *   'R' (records): the rest is  uvar hdr_len, header record stream (META),
 *       then frames as  uvar len, record stream.  The target compresses each
 *       frame itself (zstd level 1, checksum on, independent frames) behind a
 *       valid header frame, so the mutations land on the records that the
 *       replay, attribution and reports parse instead of dying in zstd's
 *       checksum.  Seeds: real traces turned inside out by trace2rec.
 *   anything else: the bytes are the trace file (header frame, zstd frames,
 *       truncation, damage: the reader's paths).
 *
 * Whatever the bytes, the decoder must return 0 or 2 without a crash, a
 * sanitizer report, a leak, or memory beyond libFuzzer's -rss_limit_mb.
 * Built only with clang (-Dfuzz=enabled, tests/fuzz/meson.build); run by
 * tests/fuzz/run_fuzz.sh (bounded, in CI) and by hand for the long run
 * (docs/validation.md). */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <zstd.h>

#include "decode.h"
#include "format.h"
#include "varint.h"

static int fd = -1;
static char path[64];
static FILE *sink;

static void set_input(const uint8_t *data, size_t size)
{
	if (fd < 0) {
		fd = memfd_create("dsmt-fuzz", MFD_CLOEXEC);
		if (fd < 0) {
			perror("memfd_create");
			abort();
		}
		snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
		sink = fopen("/dev/null", "w");
		if (!sink)
			abort();
	}
	if (ftruncate(fd, 0) != 0)
		abort();
	for (size_t off = 0; off < size;) {
		ssize_t w = pwrite(fd, data + off, size - off, (off_t)off);
		if (w <= 0)
			abort();
		off += (size_t)w;
	}
}

#include "recbuild.h"

/* The decoder's buffers (a 1 MiB frame window per file...) would be fresh
 * mmaps, page-faulted in and unmapped again for every input: kept on the
 * heap instead (glibc malloc; the sanitizers' allocators ignore this). */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	mallopt(M_MMAP_THRESHOLD, 256 << 20);
	mallopt(M_TRIM_THRESHOLD, 512 << 20);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 0 && data[0] == 'R') {
		size_t n = dsmt_rec_build(data + 1, data + size);
		set_input(dsmt_rec_built, n);
	} else {
		set_input(data, size);
	}
	/* --dump for every other input, the second decode (--grad-accum 2, the
	 * multi-process reports) for the others: each path is exercised, at
	 * less cost per input */
	int rc;
	if (size % 2 == 0) {
		rc = dsmt_dump_file(path, sink, sink);
		if (rc != 0 && rc != 2)
			abort();
	}
	/* the options of the reports: attribution (json, --breakdown, --top,
	 * --summary) with peak blocks; the totals cross-check stays on.  The
	 * reorder window is bounded at 64 Ki events instead of 16 Mi: the same
	 * code paths (growth, the bound, gaps), without walking millions of
	 * empty slots for every input with a wild seq (docs/decisions.md) */
	struct dsmt_opts o = {.step_re = DSMT_DEFAULT_STEP_RE, .attrib = 1, .top = 5, .peak_blocks = 1, .verbose = 1,
			      .reorder_max = 1u << 16};
	struct dsmt_process ps[2];
	memset(ps, 0, sizeof ps);
	rc = dsmt_decode_file(path, &o, &ps[0], sink);
	if (rc != 0 && rc != 2)
		abort();
	size_t n = ps[0].rows || ps[0].meta ? 1 : 0;
	if (n && size % 2 == 1) {
		/* a second process (the same file with --grad-accum 2, no
		 * attribution) for the multi-rank paths of the summary */
		struct dsmt_opts o2 = {.step_re = DSMT_DEFAULT_STEP_RE, .grad_accum = 2, .reorder_max = 1u << 16};
		rc = dsmt_decode_file(path, &o2, &ps[1], sink);
		if (rc != 0 && rc != 2)
			abort();
		if (ps[1].rows || ps[1].meta)
			n = 2;
		dsmt_sort_processes(ps, n);
	}
	if (n) {
		dsmt_write_json(sink, ps, n);
		dsmt_write_table(sink, ps, n);
		dsmt_write_breakdown(sink, ps, n);
		dsmt_write_csv(sink, ps, n);
		dsmt_write_summary(sink, ps, n, 0);
		dsmt_write_summary(sink, ps, n, 1);
	}
	for (size_t i = 0; i < 2; i++)
		dsmt_process_free(&ps[i]);
	return 0;
}
