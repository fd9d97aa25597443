#pragma once
// Every assumption the cost model makes where a machine has no measurement, in one place, with
// its reason. Outputs print the ones used (see CostModel::provenance), so no figure hides one.
namespace peerplan {

struct CostOptions {
  // Dense GEMMs reach ~70-80 % of the bf16 tensor-core datasheet peak in cuBLAS at large shapes
  // (H100/H200); attention kernels somewhat less.
  double gemm_efficiency = 0.75;
  double attention_efficiency = 0.60;
  // Streaming kernels reach ~85-90 % of the datasheet HBM bandwidth (nominal only; a measured
  // hbm_gbps is used as is).
  double hbm_efficiency = 0.85;
  // Achieved fraction of a link's raw per-direction rate for bulk copies (PCIe TLP/DLLP overhead,
  // NVLink flow control): ~0.8 for PCIe Gen4/5 and NVLink in nvbandwidth runs.
  double link_efficiency = 0.80;
  // Fixed cost of one cudaMemcpyPeerAsync (driver + DMA setup) on top of the hop latencies.
  double copy_setup_s = 5e-6;
  // A host-staged copy pays two copies and a host-side event wait.
  double host_stage_setup_s = 12e-6;
  // NCCL: fixed cost per collective (kernel launch, protocol set-up) and per ring step.
  double nccl_base_latency_s = 8e-6;
  double nccl_step_latency_s = 1.5e-6;
  // Peer-memory all-reduce (one-shot / two-shot, peer_allreduce_cost.hpp) without a measured curve:
  // the kernel's own fixed time besides its signals and reads (block dispatch, the local sum, the
  // tail), as the floor on any kernel (~1.3-2 us measured on H200). vLLM's published 4 KB
  // one-shot on 4 PCIe GPUs (4.0 us) is this plus two ~1 us signal round trips.
  double peer_allreduce_base_s = 2e-6;
  // Kernel launch gap per compute op when no launch overhead was measured: decode iterations run
  // as CUDA graphs (~1-2 us per node), prefill launches eagerly (~4-5 us per kernel).
  double graph_launch_s = 1.5e-6;
  double eager_launch_s = 4.5e-6;
  // Minimum on-GPU time of any compute kernel when the machine file has no measured empty-kernel
  // GPU time (measurements.extra.launch.gpuN.gpu_gap_us): even a kernel moving a few KiB pays
  // block dispatch, a DRAM round trip and the tail (~1.3 us measured on H200). Without it,
  // elementwise ops priced as bytes / HBM bandwidth come out ~40 ns (validation: 0.006 ms predicted
  // vs >= 0.4 ms per 8B decode step). 0 disables the floor (closed-form tests).
  double min_kernel_s = 1.5e-6;
  // Per iteration: scheduler, sampling and the host sync that ends the step (vLLM: ~0.1-0.3 ms;
  // a lean C++ driver less). Counted as synchronisation time.
  double iteration_overhead_s = 60e-6;
  // A GEMM / attention shape the profile did not time is priced from the machine's own measured
  // shapes (`fitted`, fitted_compute.hpp) rather than the roofline. false: roofline (tests compare).
  bool fitted_fallback = true;
};

}  // namespace peerplan
