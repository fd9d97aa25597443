// `mpirun -np N peerplan profile --mpi`: one rank per GPU, on one or several hosts. Ranks describe
// themselves, rank 0 builds the layout; each host's first rank runs discovery; then every
// selected measurement runs in the registry's order, as its row's `mpi` column says
// (profiler/common/registry.hpp):
//   EachRank (launch overhead, HBM, host<->device): each rank on its own GPU, one rank at a time
//     (the others sleep in a barrier, so they neither load the host nor share its PCIe);
//   RankZero (gemm, attention): rank 0 on its GPU (the single-process profile also times GPU 0 only);
//   Own: the row's mpi_measure_<name> (p2p_ce: same-host pairs through CUDA IPC, then cross-host
//     pairs with NCCL send/recv; p2p_ce_bidir: both ranks of a same-host pair through IPC at once;
//     host_staged: shared pinned host memory; nccl: collectives with one rank per GPU);
//   None (SM-driven peer access, latencies, runtime-staged peer copies, NCCL without P2P): refused
//     by select_measurements before anything runs, with the names that do run.
// After each measurement rank 0 gathers every rank's figures and rewrites the merged profile.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>

#include <fmt/format.h>

#include "planner/core/error.hpp"
#include "planner/core/json_in.hpp"
#include "profiler/common/checkpoint.hpp"
#include "profiler/common/profile_merge.hpp"
#include "profiler/common/profile_models.hpp"
#include "profiler/common/registry.hpp"
#include "profiler/common/summary.hpp"
#include "profiler/discovery/discovery.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/mpi/comm.hpp"
#include "profiler/mpi/mpi_context.hpp"
#include "profiler/profile_api.hpp"

namespace peerplan::profiler {

namespace {

// A one-host machine in CUDA ordinals for the per-GPU measurements: only this rank's GPU is filled
// in (NUMA node, SM count); the count matches the host so TP degrees are those of the host.
Machine local_machine(const Machine& global, const RankLayout& layout, int me, int device, int device_count) {
  Machine m;
  m.meta = global.meta;
  int offset = global.meta["mpi"]["hosts"][size_t(layout.host_of[size_t(me)])].value("numa_offset", 0);
  for (int i = 0; i < device_count; ++i) {
    GpuSpec g = i == device ? global.gpus[size_t(me)] : GpuSpec{};
    g.id = i;
    if (i == device && g.numa >= 0) g.numa -= offset;  // back to this host's NUMA index
    m.gpus.push_back(g);
  }
  return m;
}

using MpiMeasureFn = void (*)(MpiContext&);

// The Own entries of the registry table, in its row order (nullptr for the other kinds).
MpiMeasureFn own_entry(const MeasurementInfo& m) {
#define PEERPLAN_MPI_FN_Own(name) mpi_measure_##name,
#define PEERPLAN_MPI_FN_EachRank(name) nullptr,
#define PEERPLAN_MPI_FN_RankZero(name) nullptr,
#define PEERPLAN_MPI_FN_None(name) nullptr,
#define PEERPLAN_MPI_FN(name, group, scope, mpi, models, est, help) PEERPLAN_MPI_FN_##mpi(name)
  static const MpiMeasureFn fns[] = {PEERPLAN_MEASUREMENTS(PEERPLAN_MPI_FN)};
#undef PEERPLAN_MPI_FN
#undef PEERPLAN_MPI_FN_Own
#undef PEERPLAN_MPI_FN_EachRank
#undef PEERPLAN_MPI_FN_RankZero
#undef PEERPLAN_MPI_FN_None
  return fns[m.index];
}

// EachRank / RankZero: the single-process entry on the first `ranks` ranks' own GPUs, one rank
// at a time, its figures renamed to global GPU ids.
void on_own_gpus(const MeasurementInfo& info, MpiContext& mc, int ranks) {
  Context& ctx = mc.ctx;
  for (int r = 0; r < ranks; ++r) {
    if (r == mc.me) {
      Measurements part;
      Context c{ctx.opts, ctx.plan, ctx.machine, part, ctx.progress, ""};
      c.own_gpus = {mc.device};
      measure_fn(info)(c);
      remap_gpu_ids(part, {{mc.device, mc.me}});
      append_measurements(ctx.ms, std::move(part));
    }
    mpi::barrier();
  }
}

// Runs one measurement's MPI entry on every rank.
void run_entry(const MeasurementInfo& info, MpiContext& mc, int ranks) {
  switch (info.mpi) {
    case MpiRun::EachRank: return on_own_gpus(info, mc, ranks);
    case MpiRun::RankZero: return on_own_gpus(info, mc, 1);
    case MpiRun::Own: return own_entry(info)(mc);
    case MpiRun::None: break;
  }
  throw RuntimeError(std::string("measurement '") + info.name + "' has no MPI entry; select_measurements admits only those that have one");
}

// Who is where: every rank describes itself (host, local rank, GPU), all build the same layout.
struct Ranks {
  RankLayout layout;
  int device = 0;  // this rank's CUDA ordinal
  int count = 0;   // CUDA devices on this rank's host
  bool share = false;
};

Ranks describe_ranks(const ProfileOptions& opts, int me, int n) {
  Ranks out;
  // The host's GPUs as discovery lists them (one definition of their UUIDs); none when no GPU is
  // usable, which make_rank_layout refuses with the rank and host named.
  const std::vector<GpuSpec> gpus = cuda_gpus();
  out.count = int(gpus.size());
  // Smoke-test mode for one-GPU machines: ranks share the GPU, so the cross-process paths (IPC,
  // shared-memory staging, gathering, merging) run for real; its figures describe no real pair.
  const char* share_env = std::getenv("PEERPLAN_MPI_SHARE_GPU");
  out.share = share_env && std::string(share_env) == "1";
  const int count = out.count;
  int lrank = mpi::local_rank();
  RankInfo mine{me, mpi::processor_name(), lrank, mpi::local_size(), out.share && count > 0 ? lrank % count : lrank, count, ""};
  if (mine.device < count) mine.uuid = gpus[size_t(mine.device)].uuid;
  std::vector<RankInfo> infos;
  auto all = mpi::allgather_strings(rank_info_to_json(mine).dump());
  for (int r = 0; r < n; ++r) infos.push_back(rank_info_from_json(all[size_t(r)], "rank " + std::to_string(r) + "'s description"));
  out.layout = make_rank_layout(infos, opts.mpi_split_hosts, out.share);  // same on every rank: all fail alike
  out.device = mine.device;
  CUDA_CHECK(cudaSetDevice(out.device));
  return out;
}

// Discovery by each host's first rank; rank 0 merges the hosts into the profile's base (the
// skeleton every later save starts from) and every rank gets the merged machine.
Machine discover_hosts(const ProfileOptions& opts, const Ranks& rk, int me, int n, MergeInput& base) {
  const RankLayout& layout = rk.layout;
  std::string disc;
  if (layout.leader_of(layout.host_of[size_t(me)]) == me) {
    Machine h = discover_machine();
    if (!opts.name.empty()) h.name = opts.name;
    check_p2p_functional(h);
    disc = machine_to_json(h).dump();
    CUDA_CHECK(cudaSetDevice(rk.device));
  }
  auto discs = mpi::gather_strings(disc, 0);
  base.layout = layout;
  base.name = opts.name;
  base.how = {{"launcher", "mpirun -np " + std::to_string(n)},
              {"split_hosts", opts.mpi_split_hosts},
              {"all_pairs", opts.mpi_all_pairs},
              {"shared_gpus", rk.share}};
  std::string skeleton;
  if (me == 0) {
    for (size_t h = 0; h < layout.hosts.size(); ++h) {
      int leader = layout.leader_of(int(h));
      base.host_machines.push_back(parse_machine_json(discs[size_t(leader)], "discovery of " + layout.hosts[h]));
    }
    base.rank_results.assign(size_t(n), Measurements{});
    skeleton = machine_to_json(merge_mpi_profile(base)).dump();
  }
  return parse_machine_json(mpi::bcast_string(skeleton, 0), "merged discovery");
}

// Rank 0 gathers every rank's figures, merges them into `base` and rewrites the profile.
void gather_and_save(const ProfileOptions& opts, const SweepPlan& plan, const MergeInput& base,
                     const Measurements& ms, CheckpointState& state, int me, int n, bool complete) {
  auto parts = mpi::gather_strings(rank_result_to_json(ms), 0);
  if (me != 0) return;
  MergeInput in = base;
  for (int r = 0; r < n; ++r)
    in.rank_results[size_t(r)] = rank_result_from_json(parts[size_t(r)], "rank " + std::to_string(r) + "'s measurements");
  Machine out = merge_mpi_profile(in);
  auto& mm = out.measurements->meta;
  mm["host"] = out.host;
  mm["date"] = out.date;
  mm["driver"] = out.meta.value("driver", "unknown");
  mm["cuda_runtime"] = out.meta.value("cuda_runtime", "unknown");
  mm["nccl"] = out.meta.value("nccl", "unknown");
  mm["method"] = "MPI, one rank per GPU: copies timed behind a spin kernel (nvbandwidth) on the sending rank; peer copies "
                 "through CUDA IPC, host staging through shared pinned memory with GPU-side flags; NCCL per rank "
                 "(ncclCommInitRank), members meet at a barrier before each timed region, time = mean over ranks "
                 "(nccl-tests); medians of >= samples per point";
  mm["samples_per_point"] = plan.samples;
  state.complete = complete;
  write_checkpoint_state(out, state);
  save_profile(out, opts.out);
}

void run(const ProfileOptions& opts, const mpi::Session& session) {
  auto t_start = std::chrono::steady_clock::now();
  const int me = session.rank(), n = session.size();
  if (!opts.resume.empty())
    throw InputError("", "--resume", "no --resume with --mpi: an MPI profile is re-run whole (it is rewritten after each measurement)");
  SweepPlan plan = plan_sweep(opts);
  auto selected = select_measurements(opts.only, opts.skip, RunMode::Mpi);
  for (const auto* m : selected)
    if (m->uses_models) { load_profile_models(opts.models); break; }

  const Ranks rk = describe_ranks(opts, me, n);
  MergeInput base;
  const Machine global = discover_hosts(opts, rk, me, n, base);
  int64_t job = me == 0 ? int64_t(getpid()) : 0;
  mpi::bcast_bytes(&job, sizeof job, 0);

  Measurements ms;  // this rank's figures, global GPU ids
  Machine local = local_machine(global, rk.layout, me, rk.device, rk.count);
  double total_est = 0;
  for (const auto* m : selected) total_est += m->est_seconds * (opts.quick ? 0.2 : 1.0);
  Progress progress(opts.progress && me == 0, total_est);
  Context ctx{opts, plan, local, ms, progress, ""};
  MpiContext mc{ctx, rk.layout, global, me, rk.device, job, rk.share};
  CheckpointState state;
  state.options = sweep_fingerprint(opts);
  state.options["mpi"] = base.how;
  gather_and_save(opts, plan, base, ms, state, me, n, false);

  for (const auto* m : selected) {
    const std::string name = m->name;
    progress.begin(name, m->est_seconds * (opts.quick ? 0.2 : 1.0));
    auto t0 = std::chrono::steady_clock::now();
    run_entry(*m, mc, n);
    mpi::barrier();
    if (me == 0) ms.extra["timing_s"][name] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    progress.end();
    state.completed.push_back(name);
    gather_and_save(opts, plan, base, ms, state, me, n, false);
  }
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  if (me == 0) ms.extra["wall_s"] = wall;
  gather_and_save(opts, plan, base, ms, state, me, n, true);
  progress.finish();
  if (me == 0) {
    std::cout << summary_table(load_machine(opts.out));
    std::cout << fmt::format("\nWrote {} ({} ranks on {} host(s), {:.1f} s wall).\n", opts.out, n, rk.layout.hosts.size(), wall);
  }
}

}  // namespace

void run_profile_mpi(const ProfileOptions& opts) {
  // Never NVLink multicast (NVLS), as in the single-process profile.
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  mpi::Session session;
  try {
    run(opts, session);
  } catch (const std::exception& e) {
    mpi::abort_others_on_error(session, "profile --mpi", e);
    throw;
  }
}

}  // namespace peerplan::profiler
