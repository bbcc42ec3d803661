/* Uses NVTX (domains, ranges, marks) but never allocates GPU memory: under
 * the preload it must leave no trace file behind. */
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>

int main(void)
{
	nvtxDomainHandle_t d = nvtxDomainCreateA("DeepSpeed");
	for (int i = 0; i < 3; i++) {
		nvtxRangePushA("train_step");
		nvtxMarkA("tick");
		nvtxRangeId_t r = nvtxRangeStartA("io");
		nvtxRangeEnd(r);
		nvtxRangePop();
	}
	nvtxDomainDestroy(d);
	printf("nvtx only: done\n");
	return 0;
}
