// GpuBackend on the executor: one process drives every GPU of a plan, or, joined to an MPI launch
// (run_ranks + RankGroup::join_gpus), this rank drives its own GPU and talks to the others
// through MpiBus.
#include "profiler/exec/backend.hpp"

#include <cstdlib>
#include <memory>
#include <string>

#include "planner/core/error.hpp"
#include "profiler/discovery/discovery.hpp"
#include "profiler/exec/executor.hpp"
#include "profiler/gpu/cuda_check.hpp"
#include "profiler/measure/shape_timing.hpp"
#ifdef PEERPLAN_WITH_MPI
#include "profiler/common/rank_preflight.hpp"
#include "profiler/exec/mpi_bus.hpp"
#include "profiler/mpi/comm.hpp"
#endif

namespace peerplan::exec {

namespace {

ExecOptions exec_options(const ExecSettings& s, RankBus* bus) {
  ExecOptions eo;
  eo.p2p = s.p2p;
  eo.cuda_graphs = s.cuda_graphs;
  eo.warm_gemm_plans = s.warm_gemm_plans;
  eo.kv_slots = s.kv_slots;
  eo.bus = bus;
  return eo;
}

#ifdef PEERPLAN_WITH_MPI
// `--mpi`, inside an mpi::Session: this rank's description with its GPU's UUID and memory (from
// the one discovery, profiler::cuda_gpus), for MpiBus and the preflight of the ranks' GPUs; the
// rank's device is made current.
profiler::RankInfo describe_rank_gpu(bool* share) {
  profiler::RankInfo me = describe_mpi_rank();
  const std::vector<GpuSpec> gpus = profiler::cuda_gpus();
  me.device_count = int(gpus.size());
  // Smoke-test mode for a one-GPU machine (as `profile --mpi`): ranks share the GPU, so the
  // message flow with real followers runs; a plan must then leave the sharing ranks idle
  // (NCCL refuses two ranks of one communicator on one GPU).
  const char* share_env = std::getenv("PEERPLAN_MPI_SHARE_GPU");
  *share = share_env && std::string(share_env) == "1";
  if (*share && me.device_count > 0 && me.device >= me.device_count) me.device %= me.device_count;
  if (me.device < 0 || me.device >= me.device_count) return me;  // the rank layout says what is wrong
  CUDA_CHECK(cudaSetDevice(me.device));
  // The GPU's memory travels with the rank's description, so the preflight can check a plan
  // whose GPUs are on other hosts (rank_preflight.hpp).
  me.uuid = gpus[size_t(me.device)].uuid;
  me.memory_bytes = gpus[size_t(me.device)].memory_bytes;
  return me;
}

class MpiRanks final : public RankGroup {
 public:
  explicit MpiRanks(RankBus** joined) : joined_(joined) {}
  ~MpiRanks() override { *joined_ = nullptr; }
  int rank() const override { return session_.rank(); }
  int size() const override { return session_.size(); }
  void barrier() override { mpi::barrier(); }
  std::string broadcast(const std::string& root_s) override { return mpi::bcast_string(root_s, 0); }
  void check_plan(const std::vector<int>& plan_gpus, const std::string& plan_origin) override {
    check_plan_ranks(plan_gpus, session_.size(), plan_origin);
  }
  void join_gpus() override {
    bool share = false;
    const profiler::RankInfo me = describe_rank_gpu(&share);
    bus_ = std::make_unique<MpiBus>(me, share);  // collective: one rank per GPU
    *joined_ = bus_.get();
  }
  std::vector<std::string> preflight(const Plan& plan, const std::string& plan_origin, const Machine& profile,
                                     const std::string& profile_file, const MemoryReport& mem,
                                     const PreflightOptions& opt) override {
    if (!bus_) throw RuntimeError("internal: the rank preflight before the ranks joined their GPUs");
    // Every rank's (host, GPU UUID, memory), gathered over MPI: the same list on every rank.
    return profiler::preflight_ranks(plan, plan_origin, profile, profile_file, bus_->layout().ranks, mem, opt,
                                     profiler::discover_host());
  }
  const mpi::Session& session() const { return session_; }

 private:
  mpi::Session session_;  // first member: MPI starts before the bus and ends after it
  std::unique_ptr<MpiBus> bus_;
  RankBus** joined_;
};
#endif

class CudaBackend final : public GpuBackend {
 public:
  HostInfo describe_host() override { return profiler::discover_host(); }
  void check_executable(const ModelConfig& cfg) override { exec::check_model_executable(cfg); }
  nlohmann::json host_context() override { return profiler::host_context(); }

  int64_t kv_slots_that_fit(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const Machine& machine,
                            int64_t max_ctx, int64_t max_tokens) override {
    return exec::kv_slots_that_fit(plan, cfg, fig, machine, max_ctx, max_tokens, bus_);
  }

  ServeResult serve(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const Machine& machine,
                    const Workload& workload, const ExecSettings& settings) override {
    return exec::serve(plan, cfg, fig, machine, workload, exec_options(settings, bus_));
  }

  std::vector<StepBench> bench_steps(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig,
                                     const Machine& machine, const std::vector<int64_t>& batches, int64_t context,
                                     int64_t prefill_tokens, const ExecSettings& settings) override {
    return exec::bench_steps(plan, cfg, fig, machine, batches, context, prefill_tokens, exec_options(settings, nullptr));
  }

  Measurements measure_shapes(const Machine& profile, const ShapeSet& shapes, const ShapeSweep& sweep) override {
    // In a child process: timing here would slow the serving that follows (child_process.hpp).
    return profiler::measure_shape_set_in_child(profile, shapes, sweep, true);
  }

  std::vector<SelfTestResult> self_test(int device, uint64_t seed) override { return kernel_self_test(device, seed); }

  void run_ranks(const std::string& command, const std::function<void(RankGroup&)>& body) override {
#ifdef PEERPLAN_WITH_MPI
    MpiRanks ranks(&bus_);
    try {
      body(ranks);
    } catch (const std::exception& e) {
      mpi::abort_others_on_error(ranks.session(), command, e);
      throw;
    }
#else
    (void)command, (void)body;
    throw InputError("", "--mpi", "a peerplan built with MPI (cmake -DPEERPLAN_MPI=ON)");
#endif
  }

 private:
  RankBus* bus_ = nullptr;  // set while joined to an MPI launch's ranks (this rank's GPU only)
};

}  // namespace

std::unique_ptr<GpuBackend> make_cuda_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace peerplan::exec
