#pragma once
// The one table of measurements (as nvbandwidth's createTestcases()). A measurement is one file
// plus one row of PEERPLAN_MEASUREMENTS below; nothing else lists measurements:
//   - CPU side (registry.cpp, always built and tested): names, groups, --list, --only/--skip;
//   - single-process entry (measure/table.cpp): `void measure_<name>(Context&)`, in
//     profiler/measure/<name>.cpp;
//   - MPI entry (mpi/profile_mpi.cpp), by the row's `mpi` column:
//       EachRank  the single-process entry on each rank's own GPU, one rank at a time;
//       RankZero  the single-process entry on rank 0's GPU only;
//       Own       `void mpi_measure_<name>(MpiContext&)`, in profiler/mpi/;
//       None      single-process only: `profile --mpi` refuses the name (InputError, the valid
//                 names listed), it never runs it nor answers "not applicable".
// A row whose entry is missing fails at link time (the entries are referenced from the row).
#include <string>
#include <vector>

// X(name, group, scope, mpi, uses_models, est_seconds, description)
//   uses_models: times the --model shapes (the models are loaded, and a bad --model refused,
//                before any measuring); est_seconds: rough cost on a 2-GPU host, for the ETA.
// Order matters: cheap checks first, so a crash in a late, long measurement loses little (a
// checkpoint is written after each entry).
#define PEERPLAN_MEASUREMENTS(X)                                                                                  \
  X(launch_overhead, "compute", PerGpu, EachRank, false, 0.2,                                                     \
    "empty-kernel launch overhead (back-to-back launches)")                                                       \
  X(hbm, "compute", PerGpu, EachRank, false, 0.5,                                                                 \
    "device-local copy bandwidth, cudaMemcpyAsync D2D (HBM read+write)")                                          \
  X(h2d_d2h, "host", PerGpu, EachRank, false, 1.5, "pinned host -> device and device -> host, copy engine")       \
  X(p2p_ce, "transfer", Pair, Own, false, 1.0,                                                                    \
    "peer copy by copy engine, one direction (cudaMemcpyPeerAsync, peer access on)")                              \
  X(p2p_ce_bidir, "transfer", Pair, Own, false, 1.0,                                                              \
    "peer copy by copy engine, both directions at once (two streams)")                                            \
  X(p2p_sm, "transfer", Pair, None, false, 1.5,                                                                   \
    "peer access by an SM kernel: dst reads src's memory, src writes dst's memory")                               \
  X(nop2p_runtime, "transfer", Pair, None, false, 2.0,                                                            \
    "cudaMemcpyPeerAsync with peer access NOT enabled (the runtime stages it)")                                   \
  X(host_staged, "transfer", Pair, Own, false, 3.0,                                                               \
    "D2H + H2D via pinned host memory, chunked, two streams; NUMA-local and remote")                              \
  X(latency_ce, "latency", Pair, None, false, 0.3, "copy-engine latency of a 4-byte peer copy")                   \
  X(latency_sm, "latency", Pair, None, false, 0.3,                                                                \
    "SM latency: dependent loads through peer memory (nvbandwidth), and a ping-pong (one-way)")                   \
  X(nccl, "collective", Group, Own, false, 6.0,                                                                   \
    "NCCL all_reduce, all_gather, reduce_scatter, all_to_all, send_recv, broadcast")                              \
  X(nccl_nop2p, "collective", Group, None, false, 10.0,                                                           \
    "the same collectives with NCCL_P2P_DISABLE=1 (child process)")                                               \
  X(peer_allreduce, "collective", Group, Own, false, 3.0,                                                         \
    "one-shot and two-shot bf16 all-reduce over peer memory, as serving engines' custom all-reduce; sum checked") \
  X(gemm, "compute", Once, RankZero, true, 10.0,                                                                  \
    "bf16 cuBLASLt GEMMs of the models' shapes (TP 1..N, tokens 1..8192)")                                        \
  X(attention, "compute", Once, RankZero, true, 4.0,                                                              \
    "attention decode/prefill kernels of the executor over batch x context")                                      \
  X(grouped_gemm, "compute", Once, RankZero, true, 8.0,                                                           \
    "grouped expert GEMMs of the MoE models (routed tokens 1..8192, TP and EP shards; the executor's kernel)"     \
    "; one expert's cuBLAS GEMM by rows (expert_gemms)")                                                          \
  X(elementwise, "compute", Once, RankZero, true, 3.0,                                                            \
    "the executor's elementwise kernels of the models (norms, rotary, act, MoE route/combine), rows 1..8192")

namespace peerplan::profiler {

enum class Scope {
  Pair,       // runs on every ordered GPU pair (not applicable with one GPU)
  PerGpu,     // runs on each GPU
  Group,      // runs on GPU groups (full set and every pair); needs >= 2 GPUs
  Once,       // runs once (e.g. on GPU 0)
};

// How a measurement runs under `profile --mpi` (the table's `mpi` column, described above).
enum class MpiRun { EachRank, RankZero, Own, None };

// Single process (`profile`) or one rank per GPU (`mpirun ... profile --mpi`).
enum class RunMode { SingleProcess, Mpi };

struct MeasurementInfo {
  const char* name;         // --only/--skip name, also the checkpoint key
  const char* group;        // "transfer", "latency", "host", "collective", "compute"
  Scope scope;
  MpiRun mpi;
  bool uses_models;         // times the --model shapes
  double est_seconds;       // rough cost on a 2-GPU host, for the progress bar's ETA before any timing
  const char* description;  // one line for --list
  size_t index;             // row number in measurement_table() (the entries' tables share it)
  bool runs_in(RunMode mode) const { return mode == RunMode::SingleProcess || mpi != MpiRun::None; }
};

// Every measurement, in the order a profile runs them.
const std::vector<MeasurementInfo>& measurement_table();
const MeasurementInfo* find_measurement(const std::string& name);

// Resolves --only / --skip (names or group names, comma-separated lists allowed) into the ordered
// list of measurements to run in `mode`. A name that is unknown, or known but without an entry for
// `mode` (a single-process-only measurement with --mpi), throws InputError listing the valid ones;
// a group selects its members that run in `mode` (a group with none is refused). Giving both
// --only and --skip is allowed (skip applies after only); an empty result is an error.
std::vector<const MeasurementInfo*> select_measurements(const std::vector<std::string>& only,
                                                        const std::vector<std::string>& skip,
                                                        RunMode mode = RunMode::SingleProcess);

// The `--list` text: a table of name, group, scope, how it runs with --mpi and description.
std::string format_measurement_list();

const char* to_string(Scope s);
const char* to_string(MpiRun r);

}  // namespace peerplan::profiler
