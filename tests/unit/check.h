/* Minimal test helpers: CHECK prints the failing expression and counts it. */
#ifndef DSMT_TEST_CHECK_H
#define DSMT_TEST_CHECK_H
#include <stdio.h>
static int check_failures;
#define CHECK(e)                                                                 \
	do {                                                                     \
		if (!(e)) {                                                      \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #e); \
			check_failures++;                                        \
		}                                                                \
	} while (0)
#define CHECK_DONE() (check_failures ? (fprintf(stderr, "%d failure(s)\n", check_failures), 1) : 0)
#endif
