/* standin_train.c: a small "training loop" to try dsmemtrace without a GPU.
 *
 * It runs over the stand-in CUDA and torch libraries that the tests build
 * (tests/standin: a fake driver and runtime whose device memory is host
 * memory, and a miniature of PyTorch's caching allocator).  It is linked the
 * way PyTorch is: the runtime is loaded globally, the torch library locally
 * with dlopen, and each step is an NVTX range named "train_step".
 *
 *   ninja -C build
 *   LD_LIBRARY_PATH=$PWD/build/tests/standin \
 *   LD_PRELOAD=$PWD/build/interpose/libdsmemtrace.so DSMEMTRACE_DIR=/tmp/traces \
 *       build/examples/standin_train
 *   build/decode/dsmemdecode --per-step /tmp/traces/dsmemtrace.*.zst
 *
 * (examples/run_example.sh does all of that.)  The program prints what a
 * PyTorch user would print after each step — torch.cuda.max_memory_allocated()
 * and friends, peaks reset at each step — and the decoder must print the same
 * numbers from the trace alone.  --json FILE writes them for the tests.
 */
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1024ul * 1024)
#define LAYERS 3

/* the stand-in torch API (tests/standin/torchstub.h) */
static struct {
	void *(*alloc)(size_t size, int dev, void *stream); /* torch.empty(..., device="cuda:dev") */
	int (*free)(void *ptr);                              /* del tensor */
	uint64_t (*max_memory_allocated)(int dev);
	uint64_t (*memory_allocated)(int dev);
	uint64_t (*max_memory_reserved)(int dev);
	uint64_t (*memory_reserved)(int dev);
	void (*reset_peak_memory_stats)(int dev);
} torch;

static void *sym(void *lib, const char *name)
{
	void *p = dlsym(lib, name);
	if (!p) {
		fprintf(stderr, "standin_train: %s: %s\n", name, dlerror());
		exit(1);
	}
	return p;
}

static void load_torch(void)
{
	/* like torch/__init__.py: the CUDA runtime globally, torch itself locally */
	if (!dlopen("libcudart.so.13", RTLD_NOW | RTLD_GLOBAL)) {
		fprintf(stderr, "standin_train: %s\n(set LD_LIBRARY_PATH to build/tests/standin)\n", dlerror());
		exit(1);
	}
	void *lib = dlopen("libtorchstub.so", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "standin_train: %s\n", dlerror());
		exit(1);
	}
	*(void **)&torch.alloc = sym(lib, "ts_alloc");
	*(void **)&torch.free = sym(lib, "ts_free");
	*(void **)&torch.max_memory_allocated = sym(lib, "ts_max_memory_allocated");
	*(void **)&torch.memory_allocated = sym(lib, "ts_memory_allocated");
	*(void **)&torch.max_memory_reserved = sym(lib, "ts_max_memory_reserved");
	*(void **)&torch.memory_reserved = sym(lib, "ts_memory_reserved");
	*(void **)&torch.reset_peak_memory_stats = sym(lib, "ts_reset_peak");
}

static void *empty(size_t bytes)
{
	void *p = torch.alloc(bytes, 0, NULL);
	if (!p) {
		fprintf(stderr, "standin_train: out of memory\n");
		exit(1);
	}
	return p;
}

int main(int argc, char **argv)
{
	int steps = 5;
	const char *json = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--steps") && i + 1 < argc)
			steps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--json") && i + 1 < argc)
			json = argv[++i];
		else {
			fprintf(stderr, "usage: standin_train [--steps N] [--json FILE]\n");
			return 2;
		}
	}
	load_torch();

	/* model: a 3-layer MLP; parameters live for the whole run */
	size_t param_bytes[LAYERS] = {4 * MiB + 4096, 16 * MiB, 4 * MiB + 4096};
	void *param[LAYERS], *grad[LAYERS] = {0}, *adam_m[LAYERS] = {0}, *adam_v[LAYERS] = {0};
	for (int l = 0; l < LAYERS; l++)
		param[l] = empty(param_bytes[l]);

	FILE *out = json ? fopen(json, "w") : NULL;
	if (json && !out) {
		perror(json);
		return 1;
	}
	if (out)
		fprintf(out, "{\"format\":\"victim-steps/1\",\"devices\":1,\"baseline\":[],\"steps\":[\n");

	printf("%4s %16s %16s %16s %16s\n", "step", "max_allocated", "allocated", "max_reserved", "reserved");
	torch.reset_peak_memory_stats(0);
	for (int step = 1; step <= steps; step++) {
		nvtxRangePushA("train_step");

		for (int l = 0; l < LAYERS; l++) { /* optimizer.zero_grad(set_to_none=True) */
			torch.free(grad[l]);
			grad[l] = NULL;
		}

		/* forward: activations are kept for backward, temporaries are not */
		size_t batch = 8 + 8 * (step % 2);
		void *act[LAYERS];
		for (int l = 0; l < LAYERS; l++) {
			act[l] = empty(batch * 256 * 1024);
			torch.free(empty(batch * 64 * 1024)); /* e.g. a GELU temporary */
		}

		/* backward: gradients appear, activations go */
		for (int l = LAYERS - 1; l >= 0; l--) {
			grad[l] = empty(param_bytes[l]);
			torch.free(act[l]);
		}

		/* optimizer step: AdamW creates its state at the first step */
		for (int l = 0; l < LAYERS; l++)
			if (!adam_m[l]) {
				adam_m[l] = empty(param_bytes[l]);
				adam_v[l] = empty(param_bytes[l]);
			}

		nvtxRangePop();

		/* what a PyTorch user records after each step */
		uint64_t peak = torch.max_memory_allocated(0), now = torch.memory_allocated(0);
		uint64_t rpeak = torch.max_memory_reserved(0), rnow = torch.memory_reserved(0);
		torch.reset_peak_memory_stats(0);
		printf("%4d %16llu %16llu %16llu %16llu\n", step, (unsigned long long)peak, (unsigned long long)now,
		       (unsigned long long)rpeak, (unsigned long long)rnow);
		if (out)
			fprintf(out,
				"{\"step\":%d,\"device\":0,\"peak_allocated\":%llu,\"end_allocated\":%llu,"
				"\"peak_reserved\":%llu,\"end_reserved\":%llu}%s\n",
				step, (unsigned long long)peak, (unsigned long long)now, (unsigned long long)rpeak,
				(unsigned long long)rnow, step == steps ? "" : ",");
	}
	if (out) {
		fprintf(out, "]}\n");
		fclose(out);
	}
	for (int l = 0; l < LAYERS; l++) { /* the end of the script */
		torch.free(param[l]);
		torch.free(grad[l]);
		torch.free(adam_m[l]);
		torch.free(adam_v[l]);
	}
	return 0;
}
