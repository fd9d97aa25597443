// `mpirun -np N peerplan profile --mpi`: one rank per GPU, on one or several hosts. Ranks describe
// themselves, rank 0 builds the layout; each host's first rank runs discovery; then every
// measurement runs in the registry's order, the way its kind needs:
//   per-GPU (launch overhead, HBM, host<->device): each rank on its own GPU, one rank at a time
//     (the others sleep in a barrier, so they neither load the host nor share its PCIe);
//   gemm, attention: rank 0 on its GPU (the single-process profile also times GPU 0 only);
//   p2p_ce: same-host pairs through CUDA IPC, then cross-host pairs with NCCL send/recv;
//   p2p_ce_bidir: both ranks of a same-host pair copy through IPC at once;
//   host_staged: same-host pairs through shared pinned host memory;
//   nccl: collectives with one rank per GPU;
//   the rest (SM-driven peer access, latencies, runtime-staged peer copies, NCCL without P2P) are
//     single-process measurements: recorded as not applicable, with how to get them.
// After each measurement rank 0 gathers every rank's figures and rewrites the merged profile.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <set>

#include <fmt/format.h>

#include "planner/core/error.hpp"
#include "planner/core/json_in.hpp"
#include "profiler/common/checkpoint.hpp"
#include "profiler/common/profile_merge.hpp"
#include "profiler/common/profile_models.hpp"
#include "profiler/common/summary.hpp"
#include "profiler/discovery/discovery.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/mpi/comm.hpp"
#include "profiler/mpi/mpi_context.hpp"
#include "profiler/profile_api.hpp"

namespace peerplan::profiler {

namespace {

std::string uuid_of(int device) {
  cudaDeviceProp p{};
  CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  std::string s = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';  // nvidia-smi's 8-4-4-4-12 form, as discovery writes it
    s += fmt::format("{:02x}", static_cast<unsigned char>(p.uuid.bytes[i]));
  }
  return s;
}

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

const std::set<std::string> kPerGpu = {"launch_overhead", "hbm", "h2d_d2h"};
const std::set<std::string> kRankZero = {"gemm", "attention"};

void run(const ProfileOptions& opts, const mpi::Session& session) {
  auto t_start = std::chrono::steady_clock::now();
  const int me = session.rank(), n = session.size();
  if (!opts.resume.empty())
    throw InputError("", "--resume", "no --resume with --mpi: an MPI profile is re-run whole (it is rewritten after each measurement)");
  SweepPlan plan = plan_sweep(opts);
  auto selected = select_measurements(opts.only, opts.skip);
  for (const auto* m : selected)
    if (kRankZero.count(m->name)) { load_profile_models(opts.models); break; }

  // Who is where.
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  // Smoke-test mode for one-GPU machines: ranks share the GPU, so the cross-process paths (IPC,
  // shared-memory staging, gathering, merging) run for real; its figures describe no real pair.
  const char* share_env = std::getenv("PEERPLAN_MPI_SHARE_GPU");
  const bool share = share_env && std::string(share_env) == "1";
  int lrank = mpi::local_rank();
  RankInfo mine{me, mpi::processor_name(), lrank, mpi::local_size(), share && count > 0 ? lrank % count : lrank, count, ""};
  if (mine.device < count) mine.uuid = uuid_of(mine.device);
  std::vector<RankInfo> infos;
  auto all = mpi::allgather_strings(rank_info_to_json(mine).dump());
  for (int r = 0; r < n; ++r) infos.push_back(rank_info_from_json(all[size_t(r)], "rank " + std::to_string(r) + "'s description"));
  const RankLayout layout = make_rank_layout(infos, opts.mpi_split_hosts, share);  // same on every rank: all fail alike
  const int device = mine.device;
  CUDA_CHECK(cudaSetDevice(device));

  // Discovery by each host's first rank; rank 0 merges the skeleton and shares it.
  const int my_host = layout.host_of[size_t(me)];
  std::string disc;
  if (layout.leader_of(my_host) == me) {
    Machine h = discover_machine();
    if (!opts.name.empty()) h.name = opts.name;
    check_p2p_functional(h);
    disc = machine_to_json(h).dump();
    CUDA_CHECK(cudaSetDevice(device));
  }
  auto discs = mpi::gather_strings(disc, 0);
  nlohmann::json how = {{"launcher", "mpirun -np " + std::to_string(n)},
                        {"split_hosts", opts.mpi_split_hosts},
                        {"all_pairs", opts.mpi_all_pairs},
                        {"shared_gpus", share}};
  MergeInput base;
  base.layout = layout;
  base.name = opts.name;
  base.how = how;
  std::string skeleton;
  if (me == 0) {
    for (size_t h = 0; h < layout.hosts.size(); ++h) {
      int leader = layout.leader_of(int(h));
      base.host_machines.push_back(parse_machine_json(discs[size_t(leader)], "discovery of " + layout.hosts[h]));
    }
    base.rank_results.assign(size_t(n), Measurements{});
    skeleton = machine_to_json(merge_mpi_profile(base)).dump();
  }
  const Machine global = parse_machine_json(mpi::bcast_string(skeleton, 0), "merged discovery");
  int64_t job = me == 0 ? int64_t(getpid()) : 0;
  mpi::bcast_bytes(&job, sizeof job, 0);

  Measurements ms;  // this rank's figures, global GPU ids
  Machine local = local_machine(global, layout, me, device, count);
  double total_est = 0;
  for (const auto* m : selected) total_est += m->est_seconds * (opts.quick ? 0.2 : 1.0);
  Progress progress(opts.progress && me == 0, total_est);
  Context ctx{opts, plan, local, ms, progress, ""};
  MpiContext mc{ctx, layout, global, me, device, job};
  CheckpointState state;
  state.options = sweep_fingerprint(opts);
  state.options["mpi"] = how;

  auto gather_and_save = [&](bool complete) {
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
  };
  gather_and_save(false);

  for (const auto* m : selected) {
    const std::string name = m->name;
    progress.begin(name, m->est_seconds * (opts.quick ? 0.2 : 1.0));
    auto t0 = std::chrono::steady_clock::now();
    if (kPerGpu.count(name) || kRankZero.count(name)) {
      for (int r = 0; r < (kRankZero.count(name) ? 1 : n); ++r) {
        if (r == me) {
          Measurements part;
          Context c{opts, plan, local, part, progress, ""};
          c.own_gpus = {device};
          measure_fn(name)(c);
          remap_gpu_ids(part, {{device, me}});
          append_measurements(ms, std::move(part));
        }
        mpi::barrier();
      }
    } else if (name == "p2p_ce") {
      mpi_measure_p2p_ce(mc);
      if (!share) mpi_measure_network(mc);  // NCCL refuses two ranks on one GPU
    } else if (name == "p2p_ce_bidir" && share) {
      if (me == 0) ctx.not_applicable(name, "PEERPLAN_MPI_SHARE_GPU: both directions would share one GPU's copy engines");
    } else if (name == "p2p_ce_bidir") {
      mpi_measure_p2p_ce_bidir(mc);
    } else if (name == "host_staged") {
      mpi_measure_host_staged(mc);
    } else if (name == "nccl" && share) {
      if (me == 0) ctx.not_applicable(name, "PEERPLAN_MPI_SHARE_GPU: NCCL refuses two ranks on one GPU");
    } else if (name == "nccl") {
      mpi_measure_nccl(mc);
    } else if (me == 0) {
      ctx.not_applicable(name, "single-process measurement: run `peerplan profile --only " + name + "` (without --mpi) on the host");
    }
    mpi::barrier();
    if (me == 0) ms.extra["timing_s"][name] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    progress.end();
    state.completed.push_back(name);
    gather_and_save(false);
  }
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  if (me == 0) ms.extra["wall_s"] = wall;
  gather_and_save(true);
  progress.finish();
  if (me == 0) {
    std::cout << summary_table(load_machine(opts.out));
    std::cout << fmt::format("\nWrote {} ({} ranks on {} host(s), {:.1f} s wall).\n", opts.out, n, layout.hosts.size(), wall);
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
