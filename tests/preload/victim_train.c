/* A "training script" over the stand-in torch (tests/standin), shaped like a
 * PyTorch loop under the caching allocator, that records the numbers a torch
 * user would record: after each step, torch.cuda.max_memory_allocated(),
 * memory_allocated(), max_memory_reserved(), memory_reserved() per device,
 * then reset_peak_memory_stats().  These are the expected per-step values for
 * dsmemdecode, computed without it.
 *
 * Loads torch like torch does: dlopen("libcudart.so.13", RTLD_GLOBAL) first
 * (libtorch_global_deps), then the torch library RTLD_LOCAL, so libc10.so is
 * not in the global scope.  --local-cudart skips the first dlopen.
 *
 * Each step: zero_grad (set_to_none: frees last step's gradients), forward
 * (activations kept, temporaries freed, one activation used on a side stream
 * with record_stream, a buffer on the side stream), backward on an autograd
 * thread per device named pt_autograd_<dev> (gradients allocated, activations
 * freed), optimizer (state allocated at the first step, a temporary).
 * --oom-step K: step K also asks for more than the device holds (the
 * allocator releases its cache, reports OOM, returns NULL; caught, go on).
 * --empty-step K: step K ends with empty_cache().
 *
 * Step markers (--markers): push   nvtxRangePushA("train_step") / Pop
 *                           start  nvtxRangeStartA / nvtxRangeEnd
 *                           domain nvtxDomainRangePushEx in domain "DeepSpeed"
 *                                  with a registered string "train_step"
 *                           mark   dsmemtrace_mark_step() before the first
 *                                  step and after each (weak: a no-op
 *                                  without the preload)
 * Nested ranges (forward/backward/optimizer) are pushed too, as torch and
 * DeepSpeed do; they must not be taken for steps.
 *
 * --ext: also load libvictimext.so (an extension library linking cudart) that
 * calls cudaMalloc, cudaMallocAsync, cudaMallocManaged, cudaHostAlloc,
 * cudaMallocHost, cudaHostRegister directly: none of it is torch's reserved
 * memory.
 *
 * usage: victim_train --out FILE.json [--steps N] [--devices 1|2]
 *        [--markers push|start|domain|mark] [--local-cudart] [--ext]
 *        [--oom-step K] [--empty-step K]
 * Prints a deterministic summary on stdout; exit status 0 on success.
 */
#include "dsmemtrace.h"
#include "torchstub.h"

#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MiB (1024ull * 1024)
#define MAX_DEV 2
#define LAYERS 4
#define MAX_STEPS 64

#define TS_PTR(ret, name, args) static ret(*name##_p) args;
TS_FUNCTIONS(TS_PTR)

static uint64_t (*c10_reports_p)(void), (*c10_report_sum_p)(void), (*c10_ooms_p)(void), (*c10_oom_sum_p)(void);
static uint64_t (*alloc_reports_p)(void), (*alloc_report_sum_p)(void), (*alloc_ooms_p)(void), (*alloc_oom_sum_p)(void);

enum markers { M_PUSH, M_START, M_DOMAIN, M_MARK };
static struct {
	const char *out;
	int steps, ndev, markers, local_cudart, ext, oom_step, empty_step, sleep_ms;
} opt = {NULL, 6, 1, M_PUSH, 0, 0, 3, 4, 0};

static nvtxDomainHandle_t ds_domain;
static nvtxStringHandle_t ds_train_step;

struct model {
	int dev;
	ts_stream side;
	void *weight[LAYERS], *bias[LAYERS];
	size_t wsize[LAYERS], bsize[LAYERS];
	void *exp_avg[2 * LAYERS], *exp_avg_sq[2 * LAYERS];
	void *grad[2 * LAYERS];
	void *act[LAYERS];
	int step;
	/* autograd thread */
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int job, done, quit;
};

static struct model models[MAX_DEV];

static void *must_alloc(size_t size, int dev, ts_stream s)
{
	void *p = ts_alloc_p(size, dev, s);
	if (!p) {
		fprintf(stderr, "victim: unexpected allocation failure (%zu bytes on device %d)\n", size, dev);
		exit(3);
	}
	return p;
}

static size_t act_size(int step, int layer)
{
	size_t batch = 2 + step % 3;
	return batch * (256 * 1024 + layer * 100 * 1024 + 333);
}

static void range_push(const char *name)
{
	if (opt.markers == M_DOMAIN) {
		nvtxEventAttributes_t a = {0};
		a.version = NVTX_VERSION;
		a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
		a.messageType = NVTX_MESSAGE_TYPE_ASCII;
		a.message.ascii = name;
		nvtxDomainRangePushEx(ds_domain, &a);
	} else {
		nvtxRangePushA(name);
	}
}

static void range_pop(void)
{
	if (opt.markers == M_DOMAIN)
		nvtxDomainRangePop(ds_domain);
	else
		nvtxRangePop();
}

/* ---- backward, on the autograd thread ---- */

static void backward(struct model *m)
{
	range_push("backward");
	void *bucket = must_alloc(3 * MiB + 1536, m->dev, m->side); /* comm bucket on the side stream */
	for (int i = LAYERS - 1; i >= 0; i--) {
		void *gin = must_alloc(act_size(m->step, i), m->dev, NULL); /* grad of the activation */
		if (!m->grad[2 * i]) {
			m->grad[2 * i] = must_alloc(m->wsize[i], m->dev, NULL);
			m->grad[2 * i + 1] = must_alloc(m->bsize[i], m->dev, NULL);
		}
		ts_free_p(m->act[i]); /* act[0] was used on the side stream: deferred */
		m->act[i] = NULL;
		ts_free_p(gin);
	}
	ts_free_p(bucket);
	range_pop();
}

static void *autograd_main(void *arg)
{
	struct model *m = arg;
	char name[16];
	snprintf(name, sizeof name, "pt_autograd_%d", m->dev);
	pthread_setname_np(pthread_self(), name);
	pthread_mutex_lock(&m->mu);
	for (;;) {
		while (!m->job && !m->quit)
			pthread_cond_wait(&m->cv, &m->mu);
		if (m->quit)
			break;
		pthread_mutex_unlock(&m->mu);
		backward(m);
		pthread_mutex_lock(&m->mu);
		m->job = 0;
		m->done = 1;
		pthread_cond_broadcast(&m->cv);
	}
	pthread_mutex_unlock(&m->mu);
	return NULL;
}

static void start_backward(struct model *m)
{
	pthread_mutex_lock(&m->mu);
	m->done = 0;
	m->job = 1;
	pthread_cond_broadcast(&m->cv);
	pthread_mutex_unlock(&m->mu);
}

static void wait_backward(struct model *m)
{
	pthread_mutex_lock(&m->mu);
	while (!m->done)
		pthread_cond_wait(&m->cv, &m->mu);
	pthread_mutex_unlock(&m->mu);
}

/* ---- the loop ---- */

static void init_model(struct model *m, int dev)
{
	m->dev = dev;
	m->side = ts_stream_create_p(dev);
	for (int i = 0; i < LAYERS; i++) {
		m->wsize[i] = (3 + i) * MiB + 4096 * i + 1000 * (dev + 1); /* large pool */
		m->bsize[i] = 4096 + 24 * i;                               /* small pool */
		m->weight[i] = must_alloc(m->wsize[i], dev, NULL);
		m->bias[i] = must_alloc(m->bsize[i], dev, NULL);
	}
	pthread_mutex_init(&m->mu, NULL);
	pthread_cond_init(&m->cv, NULL);
	if (pthread_create(&m->thread, NULL, autograd_main, m)) {
		perror("pthread_create");
		exit(3);
	}
}

static void forward(struct model *m, int step)
{
	m->step = step;
	ts_stream_sync_p(m->side); /* last step's side-stream work is done */
	for (int i = 0; i < 2 * LAYERS; i++) { /* zero_grad(set_to_none=True) */
		ts_free_p(m->grad[i]);
		m->grad[i] = NULL;
	}
	range_push("forward");
	for (int i = 0; i < LAYERS; i++) {
		m->act[i] = must_alloc(act_size(step, i), m->dev, NULL);
		void *tmp = must_alloc(64 * 1024 * (size_t)(1 + step % 2) + 100, m->dev, NULL);
		ts_free_p(tmp);
	}
	ts_record_stream_p(m->act[0], m->side); /* act[0] is read by the side stream */
	range_pop();
}

static int optimizer(struct model *m, int step)
{
	int oom = 0;
	range_push("optimizer");
	for (int i = 0; i < LAYERS; i++) {
		if (!m->exp_avg[2 * i]) { /* AdamW state, created at the first step */
			m->exp_avg[2 * i] = must_alloc(m->wsize[i], m->dev, NULL);
			m->exp_avg_sq[2 * i] = must_alloc(m->wsize[i], m->dev, NULL);
			m->exp_avg[2 * i + 1] = must_alloc(m->bsize[i], m->dev, NULL);
			m->exp_avg_sq[2 * i + 1] = must_alloc(m->bsize[i], m->dev, NULL);
		}
	}
	void *foreach_tmp = must_alloc(5 * MiB + 7, m->dev, NULL);
	if (step == opt.oom_step) {
		void *huge = ts_alloc_p(64ull << 30, m->dev, NULL); /* torch.OutOfMemoryError */
		if (huge) {
			fprintf(stderr, "victim: a 64 GiB allocation succeeded\n");
			exit(3);
		}
		oom = 1;
	}
	ts_free_p(foreach_tmp);
	range_pop();
	return oom;
}

struct counters {
	uint64_t peak_alloc, alloc, peak_res, res;
};

static struct counters read_and_reset(int dev)
{
	struct counters c = {ts_max_memory_allocated_p(dev), ts_memory_allocated_p(dev), ts_max_memory_reserved_p(dev),
			     ts_memory_reserved_p(dev)};
	ts_reset_peak_p(dev);
	return c;
}

static void *load(void *h, const char *name)
{
	void *p = dlsym(h, name);
	if (!p) {
		fprintf(stderr, "victim: %s not found\n", name);
		exit(3);
	}
	return p;
}

static void usage(void)
{
	fprintf(stderr, "usage: victim_train --out FILE.json [--steps N] [--devices 1|2] "
			"[--markers push|start|domain|mark] [--local-cudart] [--ext] [--oom-step K] [--empty-step K]\n"
			"       [--step-sleep-ms MS]  (each step sleeps MS after its forward pass)\n");
	exit(2);
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--local-cudart"))
			opt.local_cudart = 1;
		else if (!strcmp(a, "--ext"))
			opt.ext = 1;
		else if (!v)
			usage();
		else if (!strcmp(a, "--out"))
			opt.out = v, i++;
		else if (!strcmp(a, "--steps"))
			opt.steps = atoi(v), i++;
		else if (!strcmp(a, "--devices"))
			opt.ndev = atoi(v), i++;
		else if (!strcmp(a, "--oom-step"))
			opt.oom_step = atoi(v), i++;
		else if (!strcmp(a, "--empty-step"))
			opt.empty_step = atoi(v), i++;
		else if (!strcmp(a, "--step-sleep-ms"))
			opt.sleep_ms = atoi(v), i++;
		else if (!strcmp(a, "--markers")) {
			i++;
			if (!strcmp(v, "push"))
				opt.markers = M_PUSH;
			else if (!strcmp(v, "start"))
				opt.markers = M_START;
			else if (!strcmp(v, "domain"))
				opt.markers = M_DOMAIN;
			else if (!strcmp(v, "mark"))
				opt.markers = M_MARK;
			else
				usage();
		} else
			usage();
	}
	if (!opt.out || opt.steps < 1 || opt.steps > MAX_STEPS || opt.ndev < 1 || opt.ndev > MAX_DEV)
		usage();

	if (!opt.local_cudart && !dlopen("libcudart.so.13", RTLD_NOW | RTLD_GLOBAL)) {
		fprintf(stderr, "victim: %s\n", dlerror());
		return 3;
	}
	void *th = dlopen("libtorchstub.so", RTLD_NOW | RTLD_LOCAL);
	if (!th) {
		fprintf(stderr, "victim: %s\n", dlerror());
		return 3;
	}
#define TS_LOAD(ret, name, args) *(void **)&name##_p = load(th, #name);
	TS_FUNCTIONS(TS_LOAD)
	*(void **)&c10_reports_p = load(th, "standin_c10_reports");
	*(void **)&c10_report_sum_p = load(th, "standin_c10_report_sum");
	*(void **)&c10_ooms_p = load(th, "standin_c10_ooms");
	*(void **)&c10_oom_sum_p = load(th, "standin_c10_oom_sum");
	*(void **)&alloc_reports_p = load(th, "standin_alloc_reports");
	*(void **)&alloc_report_sum_p = load(th, "standin_alloc_report_sum");
	*(void **)&alloc_ooms_p = load(th, "standin_alloc_ooms");
	*(void **)&alloc_oom_sum_p = load(th, "standin_alloc_oom_sum");
	if (ts_device_count_p() < opt.ndev) {
		fprintf(stderr, "victim: %d devices needed\n", opt.ndev);
		return 3;
	}

	void *ext = NULL;
	int (*ext_release)(void) = NULL;
	if (opt.ext) {
		ext = dlopen("libvictimext.so", RTLD_NOW | RTLD_LOCAL);
		if (!ext) {
			fprintf(stderr, "victim: %s\n", dlerror());
			return 3;
		}
		int (*ext_init)(void) = (int (*)(void))load(ext, "victimext_init");
		*(void **)&ext_release = load(ext, "victimext_release");
		if (ext_init()) {
			fprintf(stderr, "victim: victimext_init failed\n");
			return 3;
		}
	}

	if (opt.markers == M_DOMAIN) {
		ds_domain = nvtxDomainCreateA("DeepSpeed");
		ds_train_step = nvtxDomainRegisterStringA(ds_domain, "train_step");
	}
	nvtxNameOsThreadA(0, "main"); /* any NVTX call: the injection loads here */

	for (int d = 0; d < opt.ndev; d++)
		init_model(&models[d], d);

	struct counters res[MAX_STEPS + 1][MAX_DEV];
	int ooms[MAX_STEPS + 1][MAX_DEV] = {{0}};
	for (int d = 0; d < opt.ndev; d++)
		res[0][d] = read_and_reset(d);
	if (opt.markers == M_MARK)
		DSMEMTRACE_MARK_STEP();

	for (int s = 1; s <= opt.steps; s++) {
		nvtxRangeId_t rid = 0;
		switch (opt.markers) {
		case M_PUSH: nvtxRangePushA("train_step"); break;
		case M_START: rid = nvtxRangeStartA("train_step"); break;
		case M_DOMAIN: {
			nvtxEventAttributes_t a = {0};
			a.version = NVTX_VERSION;
			a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
			a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
			a.message.registered = ds_train_step;
			nvtxDomainRangePushEx(ds_domain, &a);
			break;
		}
		case M_MARK: break;
		}
		for (int d = 0; d < opt.ndev; d++)
			forward(&models[d], s);
		if (opt.sleep_ms > 0)
			nanosleep(&(struct timespec){opt.sleep_ms / 1000, (long)(opt.sleep_ms % 1000) * 1000000L}, NULL);
		nvtxMarkA("loss computed");
		for (int d = 0; d < opt.ndev; d++)
			start_backward(&models[d]); /* the devices' autograd threads run concurrently */
		for (int d = 0; d < opt.ndev; d++)
			wait_backward(&models[d]);
		for (int d = 0; d < opt.ndev; d++)
			ooms[s][d] = optimizer(&models[d], s);
		if (s == opt.empty_step)
			ts_empty_cache_p(-1); /* torch.cuda.empty_cache() */
		switch (opt.markers) {
		case M_PUSH: nvtxRangePop(); break;
		case M_START: nvtxRangeEnd(rid); break;
		case M_DOMAIN: nvtxDomainRangePop(ds_domain); break;
		case M_MARK: DSMEMTRACE_MARK_STEP(); break;
		}
		for (int d = 0; d < opt.ndev; d++)
			res[s][d] = read_and_reset(d);
	}

	for (int d = 0; d < opt.ndev; d++) {
		struct model *m = &models[d];
		pthread_mutex_lock(&m->mu);
		m->quit = 1;
		pthread_cond_broadcast(&m->cv);
		pthread_mutex_unlock(&m->mu);
		pthread_join(m->thread, NULL);
	}
	if (ext_release && ext_release()) {
		fprintf(stderr, "victim: victimext_release failed\n");
		return 3;
	}

	FILE *f = fopen(opt.out, "w");
	if (!f) {
		perror(opt.out);
		return 3;
	}
	fprintf(f, "{\"format\":\"victim-steps/1\",\"markers\":\"%s\",\"devices\":%d,\n",
		(const char *[]){"push", "start", "domain", "mark"}[opt.markers], opt.ndev);
	fprintf(f, " \"baseline\":[");
	for (int d = 0; d < opt.ndev; d++)
		fprintf(f, "%s{\"device\":%d,\"allocated\":%llu,\"reserved\":%llu}", d ? "," : "", d,
			(unsigned long long)res[0][d].alloc, (unsigned long long)res[0][d].res);
	fprintf(f, "],\n \"steps\":[\n");
	for (int s = 1; s <= opt.steps; s++)
		for (int d = 0; d < opt.ndev; d++) {
			struct counters *c = &res[s][d];
			fprintf(f,
				"  {\"step\":%d,\"device\":%d,\"peak_allocated\":%llu,\"end_allocated\":%llu,"
				"\"peak_reserved\":%llu,\"end_reserved\":%llu,\"oom\":%d}%s\n",
				s, d, (unsigned long long)c->peak_alloc, (unsigned long long)c->alloc,
				(unsigned long long)c->peak_res, (unsigned long long)c->res, ooms[s][d],
				s == opt.steps && d == opt.ndev - 1 ? "" : ",");
		}
	fprintf(f, " ],\n \"c10\":{\"reports\":%llu,\"report_sum\":%llu,\"ooms\":%llu,\"oom_sum\":%llu},\n",
		(unsigned long long)c10_reports_p(), (unsigned long long)c10_report_sum_p(),
		(unsigned long long)c10_ooms_p(), (unsigned long long)c10_oom_sum_p());
	fprintf(f, " \"allocator\":{\"reports\":%llu,\"report_sum\":%llu,\"ooms\":%llu,\"oom_sum\":%llu}}\n",
		(unsigned long long)alloc_reports_p(), (unsigned long long)alloc_report_sum_p(),
		(unsigned long long)alloc_ooms_p(), (unsigned long long)alloc_oom_sum_p());
	if (fclose(f)) {
		perror(opt.out);
		return 3;
	}

	for (int s = 1; s <= opt.steps; s++)
		for (int d = 0; d < opt.ndev; d++)
			printf("step %d dev %d: max_allocated %llu allocated %llu max_reserved %llu reserved %llu%s\n", s, d,
			       (unsigned long long)res[s][d].peak_alloc, (unsigned long long)res[s][d].alloc,
			       (unsigned long long)res[s][d].peak_res, (unsigned long long)res[s][d].res,
			       ooms[s][d] ? " (OOM caught)" : "");
	printf("reports %llu ooms %llu\n", (unsigned long long)alloc_reports_p(), (unsigned long long)alloc_ooms_p());
	return 0;
}
