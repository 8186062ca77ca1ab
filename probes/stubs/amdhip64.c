/* Stub of libamdhip64.so: the HIP entry points Proton resolves with dlsym
 * (Driver/GPU/HipApi.cpp). It describes a machine with no AMD GPU: zero devices,
 * and any per-device query fails with hipErrorNoDevice (100). */
#include <stddef.h>
#include "stub_common.h"

STUB_MARKER("libamdhip64.so")

#define HIP_ERROR_NO_DEVICE 100

int hipGetDeviceCount(int *count) { if (count) *count = 0; return 0; }
int hipDeviceGetAttribute(int *value, int attr, int device) {
  (void)value; (void)attr; (void)device; return HIP_ERROR_NO_DEVICE;
}
int hipGetDeviceProperties(void *prop, int device) {
  (void)prop; (void)device; return HIP_ERROR_NO_DEVICE;
}
int hipCtxGetDevice(int *device) { (void)device; return HIP_ERROR_NO_DEVICE; }
const char *hipKernelNameRef(const void *f) { (void)f; return NULL; }
const char *hipKernelNameRefByPtr(const void *f, void *stream) { (void)f; (void)stream; return NULL; }

STUB_OK(hipModuleLaunchKernel)
STUB_OK(hipDeviceSynchronize)
STUB_OK(hipMemAllocHost)
STUB_OK(hipFreeHost)
STUB_OK(hipMemAlloc)
STUB_OK(hipFree)
STUB_OK(hipMemsetD32Async)
STUB_OK(hipDeviceGetStreamPriorityRange)
STUB_OK(hipStreamCreateWithPriority)
STUB_OK(hipStreamSynchronize)
STUB_OK(hipStreamDestroy)
STUB_OK(hipMemcpyDtoHAsync)
STUB_OK(hipInit)
STUB_OK(hipRuntimeGetVersion)
STUB_OK(hipDriverGetVersion)
