#pragma once
// The profiler's entry point, as `peerplan profile` (profiler/app/cmd_profile.cpp) sees it. No
// CUDA types here: the command is built in every build; run_profile() exists only in builds with
// CUDA (peerplan_profiler).
#include <cstdint>
#include <string>
#include <vector>

namespace peerplan::profiler {

struct ProfileOptions {
  std::string out = "profile.json";        // written atomically; also the checkpoint file
  std::string resume;                      // a checkpoint (partial profile) to continue from
  std::vector<std::string> only, skip;     // measurement or group names (registry.hpp)
  bool quick = false;                      // smoke run: few sizes, few samples, small models
  int64_t min_bytes = 4 << 10;             // transfer sweep, log-spaced (factor 2)
  int64_t max_bytes = int64_t(1) << 30;
  int64_t coll_max_bytes = int64_t(2) << 30;   // NCCL sweep up to 2 GiB, as the nccl-tests targets
  int64_t nop2p_coll_max_bytes = int64_t(256) << 20;  // P2P-off NCCL is ~10x slower: cap its sweep
  int samples = 20;                        // kept samples per point (>= 20 for a full profile)
  int warmup = 3;
  // Compute tables (gemm, attention, grouped_gemm, elementwise): the GPU idles after each timed
  // region so it works this share of the time (1: back to back). docs/profiler.md, "Clocks".
  double duty = 1.0;
  std::vector<std::string> models;         // config.json paths or names under models/llm
  int64_t max_tokens = 8192;               // GEMM token sweep 1..max_tokens, powers of two
  // Weight formats the GEMMs are timed in ("gemms" rows' dtype) and, with "fp8", attention over an
  // FP8 KV cache too (issue 15): bf16, fp8, int8, int4.
  std::vector<std::string> dtypes = {"bf16", "fp8", "int4"};
  bool all_groups = false;                 // NCCL on every subset of >= 2 GPUs, not just full set + pairs
  bool progress = true;                    // progress bar on stderr
  std::string name;                        // machine name in the profile (default: hostname)
  // MPI mode (`mpirun -np N peerplan profile --mpi`): one rank per GPU, rank 0 writes the profile.
  bool mpi = false;
  bool mpi_split_hosts = false;            // treat every rank as its own host (tests the network path on one host)
  bool mpi_all_pairs = false;              // measure every cross-host pair, not one per pair of hosts
  // Internal: the re-executed child that measures NCCL with NCCL_P2P_DISABLE=1 writes its
  // collectives JSON here (see measure/nccl_nop2p.cpp).
  std::string nccl_child_out;
  // Internal: the child validate starts to time a plan's missing shapes (measure_shape_set_in_child):
  // a request (shapes and sweep) to time on GPU 0 of the --machine profile, rows written to --out.
  std::string measure_shapes_request;
  // `--add-model M --machine FILE` (issue 23): time only the shapes of these models FILE lacks and
  // merge them into it (or into --out when given). out_given / dtypes_given: the option was on the
  // command line (else the profile's own formats, and FILE itself, are used).
  std::vector<std::string> add_models;
  std::string machine;
  bool out_given = false, dtypes_given = false;
};

// The shipped models timed when --model is not given.
std::vector<std::string> default_profile_models();

// Runs discovery and the selected measurements, writing `out` after each measurement group.
// Throws InputError for bad options, RuntimeError (GpuError) for failures. Defined only in CUDA builds.
void run_profile(const ProfileOptions& opts);

// `profile --add-model`: loads opts.machine (refused unless measured on this host's GPUs), times
// the model-dependent shapes of opts.add_models it lacks, merges them and rewrites it atomically
// (profiler/profile_extend.cpp). Defined only in CUDA builds.
void run_add_models(const ProfileOptions& opts);

// The child of measure_shape_set_in_child (`profile --internal-measure-shapes`). CUDA builds only.
void run_measure_shapes_child(const ProfileOptions& opts);

// The same under MPI: defined only in builds with CUDA and MPI (profiler/mpi/profile_mpi.cpp).
void run_profile_mpi(const ProfileOptions& opts);

}  // namespace peerplan::profiler
