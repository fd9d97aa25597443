#pragma once
// One-shot and two-shot bf16 all-reduce over peer memory (issue 17), the kind vLLM, SGLang and
// TensorRT-LLM run for small tensor-parallel all-reduces instead of NCCL. Written for peerplan from
// the published description of those kernels (IPC-mapped buffers, per-block flags in peer memory,
// an epoch counter per block so CUDA graphs can replay a call), not copied from them.
//
//   one-shot  barrier; every rank reads all n buffers and writes the sum; barrier (so no peer
//             overwrites its buffer while another still reads it)
//   two-shot  barrier; rank k sums share k (1/n of the vectors) of all buffers into its scratch;
//             barrier; it gathers every rank's reduced share from their scratch; barrier
//
// Each rank's memory holds its input buffer, scratch and signal block; every rank gets all their
// pointers (peer access within one process, CUDA IPC mappings across processes). Sizes: a
// multiple of 16 bytes x ranks (whole 16-byte vectors in every share), at most the buffers.
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "planner/plan/allreduce_rule.hpp"
#include "profiler/common/peer_allreduce_plan.hpp"

namespace peerplan::kernels {

using profiler::kPeerArMaxBlocks;
using profiler::kPeerArMaxRanks;

// Flags written by peers into this rank's memory: slot [block][peer] holds the epoch peer last
// reached at that barrier. epoch[block] counts this rank's calls (on the device: graph replays
// count too). Zeroed once when allocated.
struct PeerArSignal {
  uint32_t start[kPeerArMaxBlocks][kPeerArMaxRanks];
  uint32_t mid[kPeerArMaxBlocks][kPeerArMaxRanks];
  uint32_t end[kPeerArMaxBlocks][kPeerArMaxRanks];
  uint32_t epoch[kPeerArMaxBlocks];
};

// Every rank's buffers, as seen from the calling rank's device (its own entries are local).
struct PeerArRanks {
  int n = 0;
  const __nv_bfloat16* data[kPeerArMaxRanks] = {};  // inputs (registered once, written before each call)
  __nv_bfloat16* scratch[kPeerArMaxRanks] = {};     // two-shot reduced shares, as large as data
  PeerArSignal* signal[kPeerArMaxRanks] = {};
};

// Rank `rank`'s part of one all-reduce of `bytes` into `out` (its own memory; may be its own
// data buffer: in place), on `stream`. Every rank must call it with the same impl and bytes. Throws (CUDA_CHECK) on a bad launch,
// std::invalid_argument on bytes or ranks out of range.
void peer_allreduce(ArImpl impl, const PeerArRanks& ranks, int rank, __nv_bfloat16* out, int64_t bytes,
                    cudaStream_t stream);

// All ranks in one cooperative launch on the current device (gridDim.y = ranks): the self-test on
// one GPU, flags and sums exactly as across GPUs. outs[r] is rank r's output.
void peer_allreduce_emulated(ArImpl impl, const PeerArRanks& ranks, __nv_bfloat16* const* outs, int64_t bytes,
                             cudaStream_t stream);

}  // namespace peerplan::kernels
