#pragma once
// CHECK macros for every CUDA runtime, driver, NCCL and cuBLAS call. A failure throws
// peerplan::gpu::GpuError (a peerplan::RuntimeError, so the CLI exits 1) whose message carries
// the call's text, the library's error name and string, file:line and the current device, e.g.
//   CUDA error cudaErrorPeerAccessUnsupported (peer access is not supported between these two
//   devices) in cudaDeviceEnablePeerAccess(peer, 0) at profiler/measure/p2p_ce.cu:42 [device 1]
// Library code never exits: callers decide whether a failure is fatal or a finding (a broken pair).
#include <cuda.h>
#include <cuda_runtime.h>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <nccl.h>

#include <string>

#include "planner/core/error.hpp"

namespace peerplan::gpu {

class GpuError : public RuntimeError {
 public:
  GpuError(std::string library, std::string call, std::string error_name, int code, int device,
           const std::string& message)
      : RuntimeError(message),
        library_(std::move(library)),
        call_(std::move(call)),
        error_name_(std::move(error_name)),
        code_(code),
        device_(device) {}
  const std::string& library() const { return library_; }    // "CUDA", "CU", "NCCL", "cuBLAS"
  const std::string& call() const { return call_; }          // the call's source text
  const std::string& error_name() const { return error_name_; }  // e.g. "cudaErrorInvalidValue"
  int code() const { return code_; }
  int device() const { return device_; }  // current device when the call failed (-1 unknown)

 private:
  std::string library_, call_, error_name_;
  int code_, device_;
};

class CudaError : public GpuError { using GpuError::GpuError; };
class CuDriverError : public GpuError { using GpuError::GpuError; };
class NcclError : public GpuError { using GpuError::GpuError; };
class CublasError : public GpuError { using GpuError::GpuError; };

namespace detail {

inline int current_device_or_minus1() {
  int d = -1;
  if (cudaGetDevice(&d) != cudaSuccess) d = -1;
  return d;
}

inline std::string format_gpu_error(const char* lib, const char* name, const char* text, const char* call,
                                    const char* file, int line, int device) {
  std::string m = std::string(lib) + " error " + name;
  if (text && *text) m += std::string(" (") + text + ")";
  m += std::string(" in ") + call + " at " + file + ":" + std::to_string(line);
  m += device >= 0 ? " [device " + std::to_string(device) + "]" : std::string(" [device unknown]");
  return m;
}

[[noreturn]] inline void throw_cuda(cudaError_t e, const char* call, const char* file, int line) {
  cudaGetLastError();  // clear a sticky-free error so the next call is not blamed for this one
  int dev = current_device_or_minus1();
  const char* name = cudaGetErrorName(e);
  throw CudaError("CUDA", call, name, int(e), dev,
                  format_gpu_error("CUDA", name, cudaGetErrorString(e), call, file, line, dev));
}

[[noreturn]] inline void throw_cu(CUresult e, const char* call, const char* file, int line) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName(e, &name) != CUDA_SUCCESS) name = "CUDA_ERROR_UNKNOWN";
  if (cuGetErrorString(e, &text) != CUDA_SUCCESS) text = "";
  int dev = current_device_or_minus1();
  throw CuDriverError("CU", call, name, int(e), dev, format_gpu_error("CUDA driver", name, text, call, file, line, dev));
}

inline const char* nccl_result_name(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: return "ncclUnknownError";
  }
}

[[noreturn]] inline void throw_nccl(ncclResult_t r, const char* call, const char* file, int line) {
  int dev = current_device_or_minus1();
  std::string text = ncclGetErrorString(r);
  const char* last = ncclGetLastError(nullptr);
  if (last && *last) text += std::string("; NCCL says: ") + last;
  const char* name = nccl_result_name(r);
  throw NcclError("NCCL", call, name, int(r), dev, format_gpu_error("NCCL", name, text.c_str(), call, file, line, dev));
}

[[noreturn]] inline void throw_cublas(cublasStatus_t s, const char* call, const char* file, int line) {
  int dev = current_device_or_minus1();
  const char* name = cublasGetStatusName(s);
  throw CublasError("cuBLAS", call, name, int(s), dev,
                    format_gpu_error("cuBLAS", name, cublasGetStatusString(s), call, file, line, dev));
}

}  // namespace detail
}  // namespace peerplan::gpu

#define CUDA_CHECK(call)                                                                         \
  do {                                                                                           \
    cudaError_t pp_err_ = (call);                                                                \
    if (pp_err_ != cudaSuccess) ::peerplan::gpu::detail::throw_cuda(pp_err_, #call, __FILE__, __LINE__); \
  } while (0)

#define CU_CHECK(call)                                                                           \
  do {                                                                                           \
    CUresult pp_err_ = (call);                                                                   \
    if (pp_err_ != CUDA_SUCCESS) ::peerplan::gpu::detail::throw_cu(pp_err_, #call, __FILE__, __LINE__); \
  } while (0)

// ncclInProgress is a failure here: peerplan creates communicators in blocking mode.
#define NCCL_CHECK(call)                                                                         \
  do {                                                                                           \
    ncclResult_t pp_err_ = (call);                                                               \
    if (pp_err_ != ncclSuccess) ::peerplan::gpu::detail::throw_nccl(pp_err_, #call, __FILE__, __LINE__); \
  } while (0)

#define CUBLAS_CHECK(call)                                                                       \
  do {                                                                                           \
    cublasStatus_t pp_err_ = (call);                                                             \
    if (pp_err_ != CUBLAS_STATUS_SUCCESS)                                                        \
      ::peerplan::gpu::detail::throw_cublas(pp_err_, #call, __FILE__, __LINE__);                 \
  } while (0)

// After a <<<...>>> launch: launch-configuration errors surface only through cudaGetLastError.
// `what` names the kernel in the message. Asynchronous faults appear at the next synchronisation.
#define CUDA_CHECK_LAUNCH(what)                                                                  \
  do {                                                                                           \
    cudaError_t pp_err_ = cudaGetLastError();                                                    \
    if (pp_err_ != cudaSuccess)                                                                  \
      ::peerplan::gpu::detail::throw_cuda(pp_err_, "launch of " what, __FILE__, __LINE__);       \
  } while (0)
