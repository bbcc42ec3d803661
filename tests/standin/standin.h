/* Shared between the stand-in libraries (not an API of the real ones). */
#ifndef STANDIN_H
#define STANDIN_H
#include <stddef.h>
#include <stdint.h>

/* c10::Device: DeviceType (int8_t, CUDA = 1) and DeviceIndex (int8_t) */
struct c10_device {
	int8_t type;
	int8_t index;
};

/* order-independent per-call fingerprint, summed by sender and receiver */
static inline uint64_t standin_report_hash(uint64_t ptr, int64_t size, uint64_t alloc, uint64_t reserved,
					   struct c10_device d)
{
	uint64_t h = 1469598103934665603ULL;
	uint64_t v[5] = {ptr, (uint64_t)size, alloc, reserved, (uint64_t)(uint8_t)d.type << 8 | (uint8_t)d.index};
	for (int i = 0; i < 5; i++) {
		h ^= v[i];
		h *= 1099511628211ULL;
		h ^= h >> 29;
	}
	return h;
}
#endif
