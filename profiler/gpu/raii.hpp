#pragma once
// Move-only RAII owners for CUDA, NCCL and cuBLASLt resources. Constructors check every call
// (cuda_check.hpp) and throw; destructors never throw (errors at teardown are ignored: the
// resource is gone either way and a throwing destructor would hide the original failure).
// Each owner remembers its device so its destructor frees on the right one.
#include <cuda_runtime.h>
#include <cublasLt.h>
#include <nccl.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "profiler/gpu/cuda_check.hpp"

namespace peerplan::gpu {

// Makes `device` current for the scope, restoring the previous device on exit.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device) {
    CUDA_CHECK(cudaGetDevice(&prev_));
    if (device != prev_) CUDA_CHECK(cudaSetDevice(device));
  }
  ~ScopedDevice() { cudaSetDevice(prev_); }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  int prev_ = 0;
};

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(int device, size_t bytes) : bytes_(bytes), device_(device) {
    ScopedDevice d(device);
    CUDA_CHECK(cudaMalloc(&ptr_, bytes));
  }
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept { swap(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept { if (this != &o) { reset(); swap(o); } return *this; }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  template <class T> T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }
  int device() const { return device_; }
  explicit operator bool() const { return ptr_ != nullptr; }
  void reset() noexcept {
    if (ptr_) { int prev = 0; cudaGetDevice(&prev); cudaSetDevice(device_); cudaFree(ptr_); cudaSetDevice(prev); }
    ptr_ = nullptr; bytes_ = 0;
  }

 private:
  void swap(DeviceBuffer& o) noexcept { std::swap(ptr_, o.ptr_); std::swap(bytes_, o.bytes_); std::swap(device_, o.device_); }
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  int device_ = -1;
};

// Page-locked host memory. numa_node < 0: cudaHostAlloc (wherever the OS puts it, normally the
// calling thread's node). numa_node >= 0: pages bound to that NUMA node (hwloc), then registered
// with cudaHostRegister, so host-staged copies can be measured node-local and node-remote.
// Portable: usable from every device's context.
class PinnedHostBuffer {
 public:
  PinnedHostBuffer() = default;
  PinnedHostBuffer(size_t bytes, int numa_node = -1);  // raii.cpp
  ~PinnedHostBuffer() { reset(); }
  PinnedHostBuffer(PinnedHostBuffer&& o) noexcept { swap(o); }
  PinnedHostBuffer& operator=(PinnedHostBuffer&& o) noexcept { if (this != &o) { reset(); swap(o); } return *this; }
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;

  void* get() const { return ptr_; }
  template <class T> T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }
  int numa_node() const { return numa_; }  // the node asked for; -1 if not placed
  void reset() noexcept;                   // raii.cpp

 private:
  void swap(PinnedHostBuffer& o) noexcept {
    std::swap(ptr_, o.ptr_); std::swap(bytes_, o.bytes_); std::swap(numa_, o.numa_); std::swap(registered_, o.registered_);
  }
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  int numa_ = -1;
  bool registered_ = false;  // true: hwloc-allocated + cudaHostRegister; false: cudaHostAlloc
};

// Binds [p, p + bytes) (not yet touched) to NUMA node `numa_node` (hwloc, strict), so memory mapped
// some other way (a shared-memory segment) is placed like PinnedHostBuffer places its own.
void bind_host_memory(void* p, size_t bytes, int numa_node);  // raii.cpp

class Stream {
 public:
  Stream() = default;
  // Non-blocking by default: timed work must not serialise behind the legacy default stream.
  explicit Stream(int device, unsigned flags = cudaStreamNonBlocking, int priority = 0) : device_(device) {
    ScopedDevice d(device);
    CUDA_CHECK(cudaStreamCreateWithPriority(&s_, flags, priority));
  }
  ~Stream() { reset(); }
  Stream(Stream&& o) noexcept { swap(o); }
  Stream& operator=(Stream&& o) noexcept { if (this != &o) { reset(); swap(o); } return *this; }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return s_; }
  operator cudaStream_t() const { return s_; }
  int device() const { return device_; }
  void synchronize() const { CUDA_CHECK(cudaStreamSynchronize(s_)); }
  void reset() noexcept { if (s_) cudaStreamDestroy(s_); s_ = nullptr; }

 private:
  void swap(Stream& o) noexcept { std::swap(s_, o.s_); std::swap(device_, o.device_); }
  cudaStream_t s_ = nullptr;
  int device_ = -1;
};

class Event {
 public:
  Event() = default;
  // Timing events by default (cudaEventDefault); pass cudaEventDisableTiming for pure sync.
  explicit Event(int device, unsigned flags = cudaEventDefault) : device_(device) {
    ScopedDevice d(device);
    CUDA_CHECK(cudaEventCreateWithFlags(&e_, flags));
  }
  ~Event() { reset(); }
  Event(Event&& o) noexcept { swap(o); }
  Event& operator=(Event&& o) noexcept { if (this != &o) { reset(); swap(o); } return *this; }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  cudaEvent_t get() const { return e_; }
  operator cudaEvent_t() const { return e_; }
  int device() const { return device_; }
  void record(cudaStream_t s) const { CUDA_CHECK(cudaEventRecord(e_, s)); }
  void synchronize() const { CUDA_CHECK(cudaEventSynchronize(e_)); }
  // Seconds from `start` to this event (both recorded and complete).
  double seconds_since(const Event& start) const {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start.e_, e_));
    return double(ms) * 1e-3;
  }
  void reset() noexcept { if (e_) cudaEventDestroy(e_); e_ = nullptr; }

 private:
  void swap(Event& o) noexcept { std::swap(e_, o.e_); std::swap(device_, o.device_); }
  cudaEvent_t e_ = nullptr;
  int device_ = -1;
};

// One communicator per listed device, all in this process (ncclCommInitAll), as nccl-tests does
// with -g N. comms()[i] belongs to devices()[i] and has rank i. Blocking communicators.
class NcclComms {
 public:
  NcclComms() = default;
  explicit NcclComms(std::vector<int> devices) : devices_(std::move(devices)), comms_(devices_.size(), nullptr) {
    NCCL_CHECK(ncclCommInitAll(comms_.data(), int(devices_.size()), devices_.data()));
  }
  ~NcclComms() { reset(); }
  NcclComms(NcclComms&& o) noexcept { swap(o); }
  NcclComms& operator=(NcclComms&& o) noexcept { if (this != &o) { reset(); swap(o); } return *this; }
  NcclComms(const NcclComms&) = delete;
  NcclComms& operator=(const NcclComms&) = delete;

  int size() const { return int(comms_.size()); }
  ncclComm_t operator[](int rank) const { return comms_[size_t(rank)]; }
  const std::vector<int>& devices() const { return devices_; }
  void reset() noexcept {
    for (auto& c : comms_) if (c) ncclCommDestroy(c);
    comms_.clear(); devices_.clear();
  }

 private:
  void swap(NcclComms& o) noexcept { std::swap(devices_, o.devices_); std::swap(comms_, o.comms_); }
  std::vector<int> devices_;
  std::vector<ncclComm_t> comms_;
};

// cuBLASLt handle of one device (a handle is bound to the device current at creation).
class CublasLtHandle {
 public:
  CublasLtHandle() = default;
  explicit CublasLtHandle(int device) : device_(device) {
    ScopedDevice d(device);
    CUBLAS_CHECK(cublasLtCreate(&h_));
  }
  ~CublasLtHandle() { reset(); }
  CublasLtHandle(CublasLtHandle&& o) noexcept { swap(o); }
  CublasLtHandle& operator=(CublasLtHandle&& o) noexcept { if (this != &o) { reset(); swap(o); } return *this; }
  CublasLtHandle(const CublasLtHandle&) = delete;
  CublasLtHandle& operator=(const CublasLtHandle&) = delete;

  cublasLtHandle_t get() const { return h_; }
  operator cublasLtHandle_t() const { return h_; }
  int device() const { return device_; }
  void reset() noexcept { if (h_) cublasLtDestroy(h_); h_ = nullptr; }

 private:
  void swap(CublasLtHandle& o) noexcept { std::swap(h_, o.h_); std::swap(device_, o.device_); }
  cublasLtHandle_t h_ = nullptr;
  int device_ = -1;
};

}  // namespace peerplan::gpu
