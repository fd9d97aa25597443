// `peerplan profile`: measure this host's GPUs, links, collectives and kernels into a machine
// profile (docs/profiler.md). --list and --compare work in every build; measuring needs a CUDA
// build. The profiler's own command: it calls profiler code only, so it lives here, not in
// planner/cli.
#include <iostream>

#include "planner/core/error.hpp"
#include "planner/validate/launch.hpp"
#include "profiler/app/app.hpp"
#include "profiler/common/profile_compare.hpp"
#include "profiler/common/registry.hpp"
#include "profiler/common/sweep.hpp"
#include "profiler/profile_api.hpp"

namespace peerplan::app {

namespace {

// --add-model extends one existing profile of this host: options of a fresh profile make no sense.
void check_add_model_options(const profiler::ProfileOptions& o) {
  if (o.add_models.empty()) {
    if (!o.machine.empty())
      throw InputError("", "--machine", "only with --add-model (the profile to extend); a fresh profile is written to --out");
    return;
  }
  if (o.machine.empty())
    throw InputError("", "--add-model", "--machine FILE too: the profile of this host to add the models to (e.g. "
                                        "peerplan profile --add-model qwen1.5-moe-a2.7b --machine my-host.json)");
  if (!o.resume.empty()) throw InputError("", "--resume", "not with --add-model (it continues a crashed full profile)");
  if (!o.models.empty())
    throw InputError("", "--model", "not with --add-model (--model picks the models of a fresh profile; list them in --add-model)");
  if (o.mpi) throw InputError("", "--mpi", "not with --add-model (the model shapes are timed on GPU 0 by one process)");
}

}  // namespace

void add_profile_command(CLI::App& app, bool built_with_mpi) {
  auto* sub = app.add_subcommand("profile", "Measure this host: GPU pairs, host paths, NCCL collectives, GEMMs, attention");
  sub->footer(
      "\nWhat it does:\n"
      "  Discovers the GPUs, peer capability (and checks it really works), PCIe tree, NUMA nodes and NVLinks,\n"
      "  then runs every measurement of `--list` and writes one machine file (machine schema + measurements).\n"
      "  Copies are timed as nvbandwidth times them; NCCL as nccl-tests does (busBw by its formulas).\n"
      "  The file is rewritten after each measurement: if the run dies, continue with --resume.\n"
      "\nAdding a model to an existing profile (--add-model):\n"
      "  Loads the profile of THIS host given by --machine (refused if its GPU UUIDs are not this host's),\n"
      "  times only the model-dependent shapes it lacks -- the GEMMs of the model's weights at every TP degree\n"
      "  in every weight format the profile already has (or --dtypes), the attention grid of its head\n"
      "  configurations, the grouped expert GEMMs of an MoE -- with the profile's own token counts and\n"
      "  samples, merges them in (no duplicates; meta.added_shapes records the models, date and peerplan\n"
      "  version) and rewrites the file atomically (or writes --out). Seconds to minutes, not a new profile.\n"
      "\nExamples:\n"
      "  peerplan profile --out my-host.json                 # full profile (about a minute on 2 GPUs)\n"
      "  peerplan profile --quick --out smoke.json           # seconds: fewer sizes and samples\n"
      "  peerplan profile --only transfer,latency            # just the copy paths\n"
      "  peerplan profile --skip nccl_nop2p --model mistral-7b\n"
      "  peerplan profile --resume my-host.json --out my-host.json\n"
      "  peerplan profile --add-model qwen1.5-moe-a2.7b --machine my-host.json    # add one model's shapes\n"
      "  peerplan profile --add-model ./Qwen2-7B/config.json,mistral-7b --machine my-host.json --out my-host2.json\n"
      "  mpirun -np 8 peerplan profile --mpi --out host.json  # one process per GPU, as serving engines run\n"
      "  mpirun -np 16 --map-by ppr:8:node -H a,b peerplan profile --mpi --out ab.json   # two hosts\n"
      "  peerplan topo --machine my-host.json                # look at the result\n"
      "  peerplan profile --compare single.json mpi.json     # do two profiles of a host agree?\n");
  auto o = std::make_shared<profiler::ProfileOptions>();
  auto list = std::make_shared<bool>(false);
  auto min_s = std::make_shared<std::string>("4K");
  auto max_s = std::make_shared<std::string>("1G");
  auto coll_s = std::make_shared<std::string>("2G");
  auto nop2p_s = std::make_shared<std::string>("256M");
  auto no_progress = std::make_shared<bool>(false);
  auto compare = std::make_shared<std::vector<std::string>>();
  sub->add_flag("--list", *list, "List the measurements (names, groups) and exit");
  sub->add_option("--compare", *compare,
                  "Compare two profiles (A B): every common figure, B against A, largest difference first; e.g. a "
                  "single-process and an MPI profile of one host")
      ->expected(2);
  sub->add_option("--out,-o", o->out, "Profile to write (atomically, after each measurement)")->capture_default_str();
  sub->add_option("--resume", o->resume, "Continue from this partial profile (same GPUs and options)");
  sub->add_option("--add-model", o->add_models,
                  "Add these models' shapes (shipped name, config.json, HF cache id; comma-separated) to the profile "
                  "of this host given by --machine, measuring only what it lacks")
      ->delimiter(',');
  sub->add_option("--machine", o->machine, "With --add-model: the profile of THIS host to extend (rewritten unless --out)");
  sub->add_option("--only", o->only, "Run only these measurements or groups (comma-separated; see --list)");
  sub->add_option("--skip", o->skip, "Skip these measurements or groups");
  sub->add_flag("--quick", o->quick, "Smoke run: 5 sizes, 5 samples, small token counts (seconds)");
  sub->add_option("--min-size", *min_s, "Smallest transfer/collective size (4K, 64MiB, ...)")->capture_default_str();
  sub->add_option("--max-size", *max_s, "Largest transfer size")->capture_default_str();
  sub->add_option("--coll-max-size", *coll_s, "Largest NCCL size (P2P allowed)")->capture_default_str();
  sub->add_option("--nop2p-coll-max-size", *nop2p_s, "Largest NCCL size with P2P disabled (slow path)")->capture_default_str();
  sub->add_option("--samples", o->samples, "Timed samples kept per point (>= 20 for a full profile)")->capture_default_str();
  sub->add_option("--warmup", o->warmup, "Untimed warm-up repetitions per point")->capture_default_str();
  sub->add_option("--duty", o->duty,
                  "Compute tables (GEMM, attention, grouped GEMM, elementwise): idle after each timed region so the "
                  "GPU works this share of the time. 1 times back to back, which holds an H200 at its power cap "
                  "(large GEMMs ~15 % slower than the boost clock short prefills run at); 0.5 times at boost and "
                  "lets the simulator apply the measured throttle to long prefills, by class (GEMM, attention, elementwise, "
                  "and each MoE model's expert dispatch: ~8 s plus ~12 s a MoE model). The SM clock of each row is "
                  "recorded either way (docs/profiler.md, Clocks)")->capture_default_str();
  sub->add_option("--model", o->models,
                  "Model(s) whose GEMM/attention shapes to time: shipped name or config.json, comma-separated or "
                  "repeated (default: llama-3.1-8b, llama-3.1-70b, mixtral-8x7b)")
      ->delimiter(',');
  sub->add_option("--max-tokens", o->max_tokens, "GEMM token counts 1..N, powers of two")->capture_default_str();
  sub->add_option("--dtypes", o->dtypes,
                  "Weight formats to time the GEMMs in (comma-separated): bf16, fp8 (e4m3, per-tensor scales, x "
                  "quantized first), int8 (per-channel W: W8A16 GEMV at 1-2 tokens, W8A8 with per-token x above), int4 "
                  "(W4A16, group 128); each as the executor runs it; fp8 also "
                  "times attention over an FP8 KV cache (docs/quantization.md)")
      ->delimiter(',')
      ->check(CLI::IsMember({"bf16", "fp8", "int8", "int4"}))
      ->capture_default_str();
  sub->add_flag("--all-groups", o->all_groups, "NCCL on every GPU subset of 2+, not just the full set and pairs");
  sub->add_option("--name", o->name, "Machine name in the profile (default: the hostname)");
  sub->add_flag("--no-progress", *no_progress, "No progress bar on stderr");
  sub->add_flag("--mpi", o->mpi,
                "Run under mpirun, one rank per GPU (rank i on its host's GPU <local rank>): peer copies through CUDA "
                "IPC, host staging through shared memory, NCCL per rank, cross-host pairs by NCCL send/recv; rank 0 "
                "writes one profile with a subtree per host (docs/profiler.md, \"MPI\")");
  sub->add_flag("--mpi-split-hosts", o->mpi_split_hosts,
                "With --mpi: treat every rank as its own host, to measure the cross-host (network) path between GPUs of one machine");
  sub->add_flag("--all-pairs", o->mpi_all_pairs,
                "With --mpi: measure every cross-host GPU pair, not one representative pair per pair of hosts");
  sub->add_option("--internal-nccl-child", o->nccl_child_out)->group("");  // re-exec for NCCL_P2P_DISABLE=1
  sub->add_option("--internal-measure-shapes", o->measure_shapes_request)->group("");  // validate's missing shapes

  sub->callback([sub, o, list, min_s, max_s, coll_s, nop2p_s, no_progress, compare, built_with_mpi] {
    if (*list) {
      std::cout << profiler::format_measurement_list();
      return;
    }
    if (!compare->empty()) {
      const auto& f = *compare;
      auto c = profiler::compare_profiles(load_machine(f[0]), load_machine(f[1]));
      std::cout << profiler::format_comparison(c, f[0], f[1]);
      return;
    }
    o->min_bytes = profiler::parse_size(*min_s, "--min-size");
    o->max_bytes = profiler::parse_size(*max_s, "--max-size");
    o->coll_max_bytes = profiler::parse_size(*coll_s, "--coll-max-size");
    o->nop2p_coll_max_bytes = profiler::parse_size(*nop2p_s, "--nop2p-coll-max-size");
    o->progress = !*no_progress;
    if (!o->measure_shapes_request.empty()) {  // the child validate starts (measure_shape_set_in_child)
#ifdef PEERPLAN_WITH_CUDA
      return profiler::run_measure_shapes_child(*o);
#else
      throw RuntimeError("--internal-measure-shapes needs a build with CUDA");
#endif
    }
    o->out_given = sub->count("--out") > 0;
    o->dtypes_given = sub->count("--dtypes") > 0;
    check_add_model_options(*o);
    // Validate everything that needs no GPU first, so mistakes are reported in every build.
    profiler::plan_sweep(*o);
    profiler::select_measurements(o->only, o->skip, o->mpi ? profiler::RunMode::Mpi : profiler::RunMode::SingleProcess);
    if ((o->mpi_split_hosts || o->mpi_all_pairs) && !o->mpi)
      throw InputError("", o->mpi_split_hosts ? "--mpi-split-hosts" : "--all-pairs", "only with --mpi (under mpirun)");
    check_mpi_launch(o->mpi, built_with_mpi, launcher_size_from_env());
#ifdef PEERPLAN_WITH_CUDA
    if (!o->add_models.empty()) return profiler::run_add_models(*o);
    if (o->mpi) {
#ifdef PEERPLAN_WITH_MPI
      profiler::run_profile_mpi(*o);
#endif
      return;
    }
    profiler::run_profile(*o);
#else
    throw RuntimeError(
        "profiling needs a build with CUDA and NCCL; this peerplan was built without them (planner only). "
        "Build one where the CUDA toolkit and NCCL are installed (`scripts/gpu/build.sh`, or "
        "`cmake -S . -B build-gpu -DCMAKE_CUDA_ARCHITECTURES=90`) and run it on the GPU host; or plan "
        "with a shipped profile such as models/hardware/h200x2-nvlink.json");
#endif
  });
}

}  // namespace peerplan::app
