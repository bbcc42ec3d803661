/* dsmt_py_line against CPython itself, and against hostile tables.
 *
 *   test_pyline                      spec cases and fuzzing only
 *   test_pyline PYTHON pylines.py    also: run PYTHON pylines.py, which dumps
 *                                    code objects with CPython's line of every
 *                                    code unit, and check each one (exit 77,
 *                                    skipped, when PYTHON is missing or older
 *                                    than 3.11)
 *
 * Every table is checked in place at the end of a page followed by a
 * PROT_NONE page, so a read past its end faults.  Also checked: each real
 * table cut at every entry boundary gives the same lines for the kept
 * entries and -1 after them; cut anywhere it never reads out of bounds. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "symbol.h"

static uint8_t *guard_base;
static size_t page;

/* a copy of tab[0..n) ending right before the guard page */
static const uint8_t *guarded(const uint8_t *tab, size_t n)
{
	if (!guard_base) {
		page = (size_t)sysconf(_SC_PAGESIZE);
		guard_base = mmap(NULL, 64 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (guard_base == MAP_FAILED) {
			perror("mmap");
			exit(1);
		}
		if (mprotect(guard_base + 63 * page, page, PROT_NONE)) {
			perror("mprotect");
			exit(1);
		}
	}
	if (n > 63 * page) {
		fprintf(stderr, "table too long for the guard area: %zu\n", n);
		exit(1);
	}
	uint8_t *p = guard_base + 63 * page - n;
	if (n)
		memcpy(p, tab, n);
	return p;
}

static int py_line(const uint8_t *tab, size_t n, int first, unsigned instr)
{
	return dsmt_py_line(guarded(tab, n), n, first, instr);
}

static void spec_cases(void)
{
	/* empty and NULL */
	CHECK(dsmt_py_line(NULL, 0, 1, 0) == -1);
	CHECK(dsmt_py_line(NULL, 5, 1, 0) == -1);
	CHECK(py_line((const uint8_t *)"", 0, 1, 0) == -1);

	/* short form (code 0, length 3 units, 1 column byte): line = firstlineno */
	const uint8_t s0[] = {0x80 | (0 << 3) | 2, 0x05};
	CHECK(py_line(s0, sizeof s0, 7, 0) == 7);
	CHECK(py_line(s0, sizeof s0, 7, 2) == 7);
	CHECK(py_line(s0, sizeof s0, 7, 3) == -1); /* past the table */

	/* one-line forms 10, 11, 12: +0, +1, +2, cumulative */
	const uint8_t ol[] = {0x80 | (10 << 3) | 0, 1, 2, 0x80 | (11 << 3) | 1, 1, 2, 0x80 | (12 << 3) | 0, 1, 2};
	CHECK(py_line(ol, sizeof ol, 10, 0) == 10);
	CHECK(py_line(ol, sizeof ol, 10, 1) == 11);
	CHECK(py_line(ol, sizeof ol, 10, 2) == 11);
	CHECK(py_line(ol, sizeof ol, 10, 3) == 13);
	CHECK(py_line(ol, sizeof ol, 10, 4) == -1);

	/* no-column form 13 with signed varints: +5, -3; 15: no line, keeps the running line */
	const uint8_t nc[] = {0x80 | (13 << 3) | 0, 10 /* +5 */, 0x80 | (15 << 3) | 1, 0x80 | (13 << 3) | 0,
			      7 /* -3 */, 0x80 | (0 << 3) | 0, 0};
	CHECK(py_line(nc, sizeof nc, 100, 0) == 105);
	CHECK(py_line(nc, sizeof nc, 100, 1) == -1);
	CHECK(py_line(nc, sizeof nc, 100, 2) == -1);
	CHECK(py_line(nc, sizeof nc, 100, 3) == 102);
	CHECK(py_line(nc, sizeof nc, 100, 4) == 102);

	/* long form 14: multi-chunk varint +1000 = zigzag 2000 = 0b11111010000:
	 * chunks 010000 (16, more) 011111 (31) -> 0x50, 0x1f; then end line
	 * delta, column+1, end column+1 */
	const uint8_t lf[] = {0x80 | (14 << 3) | 7, 0x50, 0x1f, 0, 1, 2, 0x80 | (14 << 3) | 0, 0x51, 0x1f, 0, 1, 2};
	CHECK(py_line(lf, sizeof lf, 1, 0) == 1001);
	CHECK(py_line(lf, sizeof lf, 1, 7) == 1001);
	CHECK(py_line(lf, sizeof lf, 1, 8) == 1); /* -1000 */

	/* malformed: first byte without bit 7; varint cut by the table end or by
	 * the next entry; a varint too long */
	const uint8_t m1[] = {0x05, 0x80};
	CHECK(py_line(m1, sizeof m1, 1, 0) == -1);
	const uint8_t m2[] = {0x80 | (13 << 3), 0x40}; /* continuation, then the end */
	CHECK(py_line(m2, sizeof m2, 1, 0) == -1);
	const uint8_t m3[] = {0x80 | (13 << 3), 0x80 | (0 << 3)};
	CHECK(py_line(m3, sizeof m3, 1, 0) == -1);
	uint8_t m4[40];
	m4[0] = 0x80 | (14 << 3);
	memset(m4 + 1, 0x7f, sizeof m4 - 2);
	m4[sizeof m4 - 1] = 0x3f;
	CHECK(py_line(m4, sizeof m4, 1, 0) == -1);
	/* an entry whose line leaves int range */
	const uint8_t big[] = {0x80 | (13 << 3), 0x40 | 0x3e, 0x7f, 0x7f, 0x7f, 0x7f, 0x1f};
	CHECK(py_line(big, sizeof big, 1, 0) == -1);
	/* a negative line */
	const uint8_t neg[] = {0x80 | (13 << 3), 21 /* -10 */};
	CHECK(py_line(neg, sizeof neg, 5, 0) == -1);
	/* huge instr */
	CHECK(py_line(s0, sizeof s0, 7, 0xffffffffu) == -1);
}

static uint64_t rng = 88172645463325252ULL;
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void fuzz(void)
{
	uint8_t tab[512];
	for (int round = 0; round < 20000; round++) {
		size_t n = rnd() % sizeof tab;
		for (size_t i = 0; i < n; i++) {
			uint64_t r = rnd();
			/* mostly well-formed-looking: entry starts, small varints */
			tab[i] = (uint8_t)(r % 4 == 0 ? (0x80 | (r >> 8)) : (r >> 16) & (r % 3 ? 0x7f : 0x3f));
		}
		for (unsigned instr = 0; instr < 8 * n + 4; instr += 1 + (unsigned)(rnd() % 3)) {
			int l = py_line(tab, n, (int)(rnd() % 1000) - 10, instr);
			CHECK(l >= -1);
		}
	}
}

/* --- real tables --- */

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static long n_codes, n_units, n_bad, n_cuts;

/* entry boundaries of a well-formed table */
static void check_cuts(const uint8_t *tab, size_t n, int first, const int *lines, size_t nl)
{
	size_t units = 0; /* code units covered by the entries before cut */
	for (size_t cut = 0; cut <= n; cut++) {
		int boundary = cut == n || (tab[cut] & 0x80);
		if (boundary) {
			for (unsigned i = 0; i < nl + 2; i++) {
				int l = py_line(tab, cut, first, i);
				int want = i < units && i < nl ? lines[i] : -1;
				if (l != want && n_bad++ < 20)
					fprintf(stderr, "cut at %zu/%zu: unit %u: %d, expected %d\n", cut, n, i, l,
						want);
			}
		} else { /* inside an entry: only that it stays in bounds */
			CHECK(py_line(tab, cut, first, (unsigned)units) >= -1);
			CHECK(py_line(tab, cut, first, (unsigned)nl) >= -1);
		}
		n_cuts++;
		if (cut < n && (tab[cut] & 0x80))
			units += (tab[cut] & 7) + 1u;
	}
}

static int run_python(const char *python, const char *script)
{
	struct stat sb;
	if (stat(python, &sb) != 0) {
		/* a bare name: let the shell's PATH find it */
		if (strchr(python, '/')) {
			printf("SKIP: %s not found\n", python);
			return 77;
		}
	}
	char cmd[8192];
	snprintf(cmd, sizeof cmd, "'%s' '%s'", python, script);
	FILE *f = popen(cmd, "r");
	if (!f) {
		perror("popen");
		return 1;
	}
	char *buf = NULL;
	size_t cap = 0;
	ssize_t len;
	int ver = 0;
	uint8_t *tab = NULL;
	int *lines = NULL;
	size_t cap_tab = 0, cap_lines = 0;
	long mism = 0;
	while ((len = getline(&buf, &cap, f)) > 0) {
		if (buf[0] == 'V') {
			ver = atoi(buf + 2);
			continue;
		}
		if (buf[0] != 'C')
			continue;
		char *p = buf + 2, *end;
		int first = (int)strtol(p, &end, 10);
		p = end + 1;
		char *hex = p;
		char *sp = strchr(hex, ' ');
		if (!sp) {
			fprintf(stderr, "bad dump line\n");
			n_bad++;
			break;
		}
		*sp = 0;
		size_t hl = strcmp(hex, "-") ? strlen(hex) : 0;
		if (hl / 2 > cap_tab) {
			cap_tab = hl / 2 * 2;
			tab = realloc(tab, cap_tab);
		}
		size_t n = hl / 2;
		for (size_t i = 0; i < n; i++)
			tab[i] = (uint8_t)(hexval(hex[2 * i]) << 4 | hexval(hex[2 * i + 1]));
		size_t nl = 0;
		p = sp + 1;
		if (!(p[0] == '-' && (p[1] == '\n' || p[1] == 0))) {
			while (*p && *p != '\n') {
				long v = strtol(p, &end, 10);
				if (end == p) {
					fprintf(stderr, "bad line list in the dump\n");
					n_bad++;
					break;
				}
				if (nl == cap_lines) {
					cap_lines = cap_lines ? 2 * cap_lines : 1024;
					lines = realloc(lines, cap_lines * sizeof *lines);
				}
				lines[nl++] = (int)v;
				p = *end == ',' ? end + 1 : end;
			}
		}
		for (size_t i = 0; i < nl; i++) {
			int got = py_line(tab, n, first, (unsigned)i);
			n_units++;
			if (got != lines[i]) {
				if (mism++ < 20)
					fprintf(stderr, "%d.%d: code at line %d, unit %zu: got %d, CPython says %d\n",
						ver / 100, ver % 100, first, i, got, lines[i]);
			}
		}
		/* beyond the last code unit */
		if (py_line(tab, n, first, (unsigned)nl + 8) != -1)
			mism++;
		if (n_codes % 5 == 0 && n <= 160)
			check_cuts(tab, n, first, lines, nl);
		n_codes++;
	}
	int st = pclose(f);
	free(buf);
	free(tab);
	free(lines);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
		printf("SKIP: %s is older than 3.11\n", python);
		return 77;
	}
	if (!ver) { /* printed nothing: not a working interpreter (e.g. a pyenv shim of another version) */
		printf("SKIP: %s could not be run (status %d)\n", python, st);
		return 77;
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "%s %s failed (status %d)\n", python, script, st);
		return 1;
	}
	printf("python %d.%d: %ld code objects, %ld code units, %ld mismatches; %ld cut tables, %ld bad\n",
	       ver / 100, ver % 100, n_codes, n_units, mism, n_cuts, n_bad);
	CHECK(mism == 0);
	CHECK(n_bad == 0);
	CHECK(n_codes > 100);
	return 0;
}

int main(int argc, char **argv)
{
	spec_cases();
	fuzz();
	if (argc >= 3) {
		int rc = run_python(argv[1], argv[2]);
		if (rc == 77)
			return check_failures ? CHECK_DONE() : 77;
		if (rc)
			return rc;
	}
	return CHECK_DONE();
}
