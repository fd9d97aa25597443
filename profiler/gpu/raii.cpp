#include "profiler/gpu/raii.hpp"

#include <hwloc.h>

#include <mutex>
#include <string>

namespace peerplan::gpu {
namespace {

// One hwloc topology for the process, loaded on first use: loading costs tens of milliseconds.
hwloc_topology_t host_topology() {
  static hwloc_topology_t topo = [] {
    hwloc_topology_t t = nullptr;
    if (hwloc_topology_init(&t) != 0 || hwloc_topology_load(t) != 0)
      throw RuntimeError("hwloc could not load the host topology (needed to place pinned memory on a NUMA node)");
    return t;
  }();
  return topo;
}

}  // namespace

void bind_host_memory(void* p, size_t bytes, int numa_node) {
  hwloc_topology_t topo = host_topology();
  hwloc_obj_t node = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, unsigned(numa_node));
  if (!node) throw RuntimeError("host memory: NUMA node " + std::to_string(numa_node) + " does not exist on this host");
  if (hwloc_set_area_membind(topo, p, bytes, node->nodeset, HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_BYNODESET) != 0)
    throw RuntimeError("host memory: hwloc_set_area_membind to NUMA node " + std::to_string(numa_node) + " failed");
}

PinnedHostBuffer::PinnedHostBuffer(size_t bytes, int numa_node) : bytes_(bytes), numa_(numa_node) {
  if (numa_node < 0) {
    CUDA_CHECK(cudaHostAlloc(&ptr_, bytes, cudaHostAllocPortable));
    return;
  }
  hwloc_topology_t topo = host_topology();
  hwloc_obj_t node = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, unsigned(numa_node));
  if (!node)
    throw RuntimeError("pinned host buffer: NUMA node " + std::to_string(numa_node) + " does not exist on this host");
  // BIND (not PREFERRED): a measurement labelled "numa_remote" must really be remote.
  ptr_ = hwloc_alloc_membind(topo, bytes, node->nodeset, HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_BYNODESET);
  if (!ptr_)
    throw RuntimeError("pinned host buffer: hwloc_alloc_membind of " + std::to_string(bytes) + " bytes on NUMA node " +
                       std::to_string(numa_node) + " failed");
  try {
    CUDA_CHECK(cudaHostRegister(ptr_, bytes, cudaHostRegisterPortable));
  } catch (...) {
    hwloc_free(topo, ptr_, bytes);
    ptr_ = nullptr;
    throw;
  }
  registered_ = true;
}

void PinnedHostBuffer::reset() noexcept {
  if (ptr_) {
    if (registered_) {
      cudaHostUnregister(ptr_);
      hwloc_free(host_topology(), ptr_, bytes_);
    } else {
      cudaFreeHost(ptr_);
    }
  }
  ptr_ = nullptr;
  bytes_ = 0;
  registered_ = false;
}

}  // namespace peerplan::gpu
