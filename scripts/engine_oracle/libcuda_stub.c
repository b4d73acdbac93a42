/* A stand-in libcuda.so.1 for a machine without an NVIDIA driver.
 *
 * vLLM's compiled extensions (vllm/_C_stable_libtorch.abi3.so, the FlashAttention and FlashMLA
 * extensions, cumem_allocator) are linked against the driver library, so importing them fails
 * with "libcuda.so.1: cannot open shared object file" where no driver is installed. The oracle
 * (scripts/engine_oracle/oracle.py) never launches a kernel: it only needs those imports to
 * succeed. Every symbol here answers CUDA_ERROR_NO_DEVICE (100), so anything that does try to
 * reach a GPU fails loudly instead of silently.
 *
 * The symbol list is the union of the cu* symbols that the vLLM 0.33.0 wheel's extensions and
 * torch/lib/libcaffe2_nvrtc.so import (nm -D --undefined-only). Build: see build_stub.sh.
 */
#include <stddef.h>

#define CUDA_ERROR_NO_DEVICE 100
#define STUB(name) int name(void) { return CUDA_ERROR_NO_DEVICE; }

STUB(cuInit)
STUB(cuDriverGetVersion)
STUB(cuDeviceGet)
STUB(cuDeviceGetAttribute)
STUB(cuDeviceGetCount)
STUB(cuDeviceGetName)
STUB(cuDevicePrimaryCtxGetState)
STUB(cuDevicePrimaryCtxRetain)
STUB(cuCtxGetCurrent)
STUB(cuCtxGetDevice)
STUB(cuCtxSetCurrent)
STUB(cuFuncGetAttribute)
STUB(cuFuncSetAttribute)
STUB(cuFuncSetCacheConfig)
STUB(cuGetProcAddress)
STUB(cuGetProcAddress_v2)
STUB(cuLaunchCooperativeKernel)
STUB(cuLaunchKernel)
STUB(cuLinkAddData_v2)
STUB(cuLinkComplete)
STUB(cuLinkCreate_v2)
STUB(cuMemAddressFree)
STUB(cuMemAddressReserve)
STUB(cuMemCreate)
STUB(cuMemGetAllocationGranularity)
STUB(cuMemMap)
STUB(cuMemRelease)
STUB(cuMemSetAccess)
STUB(cuMemUnmap)
STUB(cuModuleGetFunction)
STUB(cuModuleLoad)
STUB(cuModuleLoadData)
STUB(cuModuleLoadDataEx)
STUB(cuModuleUnload)
STUB(cuOccupancyMaxActiveBlocksPerMultiprocessor)
STUB(cuPointerGetAttribute)
STUB(cuTensorMapEncodeTiled)

/* These two hand back a message, so callers that print it do not read an unset pointer. */
int cuGetErrorString(int error, const char **message) {
    (void)error;
    if (message != NULL) *message = "no CUDA device (libcuda stub of the vLLM engine oracle)";
    return 0;
}

int cuGetErrorName(int error, const char **name) {
    (void)error;
    if (name != NULL) *name = "CUDA_ERROR_NO_DEVICE";
    return 0;
}
