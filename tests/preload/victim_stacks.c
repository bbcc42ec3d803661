/* Native stacks through the stack cache: tensor blocks allocated through the
 * stand-in allocator from three native call chains of different depths, in
 * an interleaved order, no Python.  Block sizes name the chain (4096: a,
 * 8192: b, 12288: c), so run_stacks.py can check each event's recorded stack
 * against the chain it came from.  usage: victim_stacks [ROUNDS] */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "torchstub.h"

static void *(*alloc)(size_t, int, ts_stream);
static int (*release)(void *);
static volatile int sink;

#define CHAIN(name, next)                             \
	__attribute__((noinline)) static void *name(size_t n) \
	{                                             \
		void *p = next(n);                    \
		sink++;                               \
		return p;                             \
	}
static void *leaf(size_t n) { return alloc(n, 0, NULL); }
CHAIN(a1, leaf)
CHAIN(a2, a1)
CHAIN(b1, leaf)
CHAIN(b2, b1)
CHAIN(b3, b2)
CHAIN(b4, b3)
CHAIN(c1, leaf)
CHAIN(c2, c1)
CHAIN(c3, c2)
CHAIN(c4, c3)
CHAIN(c5, c4)
CHAIN(c6, c5)
CHAIN(c7, c6)

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 3000;
	void *h = dlopen("libtorchstub.so", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "victim_stacks: %s\n", dlerror());
		return 1;
	}
	alloc = (void *(*)(size_t, int, ts_stream))dlsym(h, "ts_alloc");
	release = (int (*)(void *))dlsym(h, "ts_free");
	if (!alloc || !release)
		return 1;
	unsigned x = 12345;
	for (int i = 0; i < rounds; i++) {
		x = x * 1103515245u + 12345u; /* the order of the chains varies */
		void *p[3];
		int k = (int)(x >> 16) % 3;
		for (int j = 0; j < 3; j++) {
			int c = (k + j) % 3;
			p[c] = c == 0 ? a2(4096) : c == 1 ? b4(8192) : c7(12288);
		}
		for (int j = 0; j < 3; j++)
			release(p[j]);
	}
	printf("victim_stacks: %d rounds\n", rounds);
	return 0;
}
