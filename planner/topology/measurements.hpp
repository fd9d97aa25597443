#pragma once
// Measured figures of a profile (the `measurements` object of the machine schema). Written by the
// profiler, read by the cost model. Times are seconds, sizes bytes, bandwidths GB/s (1e9 B/s),
// as nvbandwidth and nccl-tests report them.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace peerplan {

class JsonIn;

struct SampleStats {
  int n = 0;
  double min = 0, p10 = 0, median = 0, p90 = 0, p99 = 0, max = 0, mean = 0;  // seconds
  // Compute tables: the median SM clock (NVML) as the samples ended, MHz; 0 unknown (older
  // profiles, other measurements). A GPU at its power cap times tensor-core work below the clock
  // it serves at (docs/profiler.md, "Clocks").
  double sm_mhz = 0;
};
// Percentiles by linear interpolation between order statistics (numpy's default).
SampleStats compute_stats(std::vector<double> samples);

struct CurvePoint {
  int64_t bytes = 0;
  SampleStats time;
};

// Transfer modes, with the names used in JSON.
//  "p2p_ce"          copy engine, peer access enabled, one direction   (cudaMemcpyPeerAsync)
//  "p2p_ce_bidir"    copy engine, both directions at once; time is per direction
//  "p2p_sm_read"     SM kernel on dst reading src memory
//  "p2p_sm_write"    SM kernel on src writing dst memory
//  "nop2p_runtime"   cudaMemcpyPeerAsync with peer access NOT enabled (driver stages it)
//  "host_staged"     explicit D2H + H2D through pinned memory, chunked, two streams
//  "h2d", "d2h"      pinned host <-> device (src or dst is -1 for the host)
//  "d2d"             device-local copy (src == dst)
struct TransferCurve {
  int src = -1, dst = -1;
  std::string mode;
  std::string variant;     // e.g. "numa_local", "numa_remote" for host_staged
  std::vector<CurvePoint> points;  // ascending bytes
};

struct LatencyPoint {
  int src = -1, dst = -1;
  std::string kind;        // "ce_small" (copy of a few bytes) or "sm_pingpong" (one-way)
  SampleStats time;
};

// An NCCL collective on a group; bytes is the per-rank buffer size as nccl-tests reports "size".
struct CollectiveCurve {
  std::string op;          // all_reduce, all_gather, reduce_scatter, all_to_all, send_recv, broadcast
  std::vector<int> gpus;
  bool p2p = true;         // false: measured with NCCL_P2P_DISABLE=1
  std::vector<CurvePoint> points;
  // true: timed as calls captured in one CUDA graph, as the executor's decode graphs run them (the
  // small sizes only; all_reduce); false: stream launches, as eager iterations run them.
  bool graph = false;
};

// A peer-memory all-reduce kernel (issue 17: one-shot or two-shot over P2P, bf16, as vLLM, SGLang
// and TensorRT-LLM run them) timed on a group like the NCCL curves: bytes is the per-rank buffer.
// "peer_allreduce" in the profile; written by profiler/measure/peer_allreduce.cpp.
struct PeerAllReduceCurve {
  std::string algo;        // "one_shot" or "two_shot" (planner/plan/allreduce_rule.hpp, ArImpl)
  std::vector<int> gpus;
  std::vector<CurvePoint> points;
  bool graph = false;      // timed inside one CUDA graph (as CollectiveCurve::graph)
};
inline const std::vector<std::string> kPeerAllReduceAlgos = {"one_shot", "two_shot"};

struct GemmTime {
  int gpu = 0;
  int64_t m = 0, n = 0, k = 0;   // C[m,n] = A[m,k] B[k,n]
  std::string dtype = "bf16";
  SampleStats time;
  // Products in one strided-batched call (MLA's absorbed per-head GEMMs, torch.bmm): the time is
  // of all `batch` of them. 1: one plain GEMM. (Last, so brace-initialised rows keep their order.)
  int64_t batch = 1;
};

// One grouped expert GEMM (issue 14): the routed experts of one GPU, [k,n] each, over the rows
// routing sent them ("grouped_gemms" in the profile; profiler/measure/grouped_gemm.cpp).
struct GroupedGemmTime {
  int gpu = 0;
  int64_t n = 0, k = 0;          // per expert: C[rows,n] = A[rows,k] B_e[k,n]
  int64_t experts = 0;           // local experts the GPU holds (E_loc)
  int64_t topk = 0;              // experts per token
  int64_t tokens = 0;            // tokens routed (T)
  int64_t rows = 0;              // rows summed over the touched experts (m)
  int64_t touched = 0;           // experts with at least one row
  int64_t max_rows = 0;          // rows of the busiest expert
  std::string dtype = "bf16";
  SampleStats time;
  // Timed on the cuBLASLt-per-expert path (an eager call, moe_cublas_path) rather than the grouped
  // kernel: the row's "path", or in profiles of sessions 13-25 extra.grouped_gemm.dispatch.paths.
  bool cublas = false;
  // cuBLAS-path rows (profiles from session 29): the rows of each touched expert, in expert order, as
  // the row's routing gave them. With the expert_gemms table the pricer takes the path's fixed part
  // (offsets' copy, synchronisation, gather) out of the row: time - sum of one expert's time at each.
  std::vector<int64_t> expert_rows;
};

// One expert's matmul on the eager cuBLAS path, alone ("expert_gemms" in the profile;
// profiler/measure/expert_gemm.cpp): y[rows,n] = x[rows,k] W^T in the expert format as
// moe_expert_gemm runs each touched expert (bf16: cuBLASLt; fp8 / int8: the tokens quantized, then the
// 8-bit matmul; int4 / mxfp4: the expert dequantized to bf16, then cuBLASLt), at rows in steps of 32.
// cuBLASLt changes kernels at row counts a grouped row's per-expert mean cannot see (Mixtral int8:
// faster past 512 rows an expert, slower past 1024), so the pricer sums this over the op's experts'
// own rows (planner/cost/grouped_gemm_cost.hpp; docs/moe_routing.md).
struct ExpertGemmTime {
  int gpu = 0;
  int64_t n = 0, k = 0, rows = 0;
  std::string dtype = "bf16";
  SampleStats time;
};

// One executor elementwise kernel (RmsNorm, Rotary, MoeRoute, ...) over [rows][cols], timed back to
// back inside a CUDA graph (region / reps) like the GEMM table ("elementwise" in the profile;
// profiler/measure/elementwise.cpp). kind is the EwKind's name (ew_kind_name in
// planner/cost/compute_cost.hpp); cols as the compiler sets ew_cols (MoeRoute: experts).
struct ElementwiseTime {
  int gpu = 0;
  std::string kind;
  int64_t rows = 0, cols = 0;
  SampleStats time;
};
inline const std::vector<std::string> kElementwiseKinds = {"rms_norm", "qk_norm", "rotary", "mla_rotary",
                                                           "residual", "act", "moe_route", "moe_combine",
                                                           "add_rms_norm"};

struct AttentionTime {
  int gpu = 0;
  std::string phase;       // "prefill" or "decode"
  int64_t batch = 0, q_len = 0, context = 0, heads = 0, kv_heads = 0, head_dim = 0;
  std::string kv_dtype = "bf16";  // KV-cache format the kernel read ("fp8": issue 15)
  SampleStats time;
  // Width of V and of the output per head, 0 meaning head_dim (every model but MLA: q.k 576 / v 512
  // absorbed decode, q.k 192 / v 128 expanded prefill; docs/attention.md "MLA"). Rows of one
  // head_dim but another v_dim are another kernel's: never used for each other's price. (Last, so
  // brace-initialised rows keep their order.)
  int64_t v_dim = 0;
};
// The value head dim a row, key or op means: v_dim, or head_dim when v_dim is 0 (unset).
inline int64_t attention_v_dim(int64_t v_dim, int64_t head_dim) { return v_dim > 0 ? v_dim : head_dim; }

// How tensor-core work slows when it runs on (session 14, docs/profiler.md "Clocks"): one bf16 GEMM
// back to back for ~1.5 s after an idle pause. It runs at boost clock for `onset_s`, then the power
// cap holds it `factor` x slower (H200: ~50 ms, 1.17x). The compute tables of a paced profile
// (--duty < 1) are timed at boost; the serving simulation slows prefill work past the onset by it.
// Under the cap a mix of kernels settles at a clock of its own and each class slows by its own
// factor (session 16: a long chunk, 75 % attention, held ~1665 MHz where GEMMs alone sit at 1545;
// attention slowed 1.18x, GEMMs 1.11x, elementwise 1.05x). One mix, timed back to back after a pause.
struct ThrottleMix {
  double attention_share = 0;  // attention's share of the mix's GEMM + attention time at boost
  double gemm = 1, attention = 1, elementwise = 1;  // each class's sustained / boost time (>= 1)
};
// The same mixes with the MoE dispatch as the GEMM class (session 20): rounds of one MoE model's
// routed-expert calls (gate_up then down, the executor's moe_expert_gemm at `tokens` routed tokens),
// prefill attention and a SiLU-mul. In these mixes `gemm` is the dispatch's factor. Why its own
// table: Mixtral's long prefills ran 1.06x their boost price where the dense mixes priced 1.17x
// (session 19 E): the dispatch draws less than a dense GEMM of the same seconds.
struct GroupedThrottle {
  std::string model;                        // the profiled model it was timed for
  int64_t hidden = 0, intermediate = 0;     // its expert shape: gate_up [2 x intermediate, hidden]
  int64_t experts = 0, topk = 0;            // all experts on the one GPU timed
  int64_t tokens = 0;                       // routed tokens of each call
  // The experts' stored format ("bf16", "fp8", "int8", "int4", "mxfp4"; dtype_name): each runs another
  // dispatch (int8: quantize, IMMA and dequantize per expert on the eager path), which draws another power.
  // Absent in a file: "bf16", every profile before session 30.
  std::string dtype = "bf16";
  std::vector<ThrottleMix> mixes;           // ascending attention_share
};
struct PowerThrottle {
  double onset_s = 0;      // sustained work before the clock drops
  double factor = 1;       // sustained time / boost time of the same call (>= 1)
  double boost_s = 0, sustained_s = 0;  // the call's median time in each state
  int64_t m = 0, n = 0, k = 0;          // the GEMM timed
  // Per-class factors at several attention shares, ascending (profiles from session 17 on); empty:
  // every class slows by `factor` (planner/sim/power_state.hpp throttle_factor).
  std::vector<ThrottleMix> mixes;
  std::vector<GroupedThrottle> grouped;  // per MoE model of the profile (paced profiles from session 20)
};

struct Measurements {
  nlohmann::json meta = nlohmann::json::object();  // host, driver, cuda, nccl, date, how measured
  std::vector<TransferCurve> transfers;
  std::vector<LatencyPoint> latencies;
  std::vector<CollectiveCurve> collectives;
  std::vector<PeerAllReduceCurve> peer_allreduce;
  std::vector<GemmTime> gemms;
  std::vector<AttentionTime> attention;
  std::vector<GroupedGemmTime> grouped_gemms;
  std::vector<ExpertGemmTime> expert_gemms;  // optional section (profiles from session 29)
  // The cuBLAS path's threshold the grouped rows were timed under (extra.grouped_gemm.dispatch.min_gflop),
  // which the pricer applies to decide an op's path; absent: kMoeCublasMinGflop.
  std::optional<double> grouped_cublas_min_gflop;
  std::vector<ElementwiseTime> elementwise;  // optional section: absent in older profiles
  std::vector<double> hbm_gbps;            // per GPU, measured device-local copy (read+write)
  double launch_overhead_s = 0;            // measured empty-kernel launch
  std::optional<PowerThrottle> power_throttle;  // GPU 0's (the parts of one host are alike); absent in older profiles
  nlohmann::json extra = nlohmann::json::object();  // anything else a measurement records

  const TransferCurve* find_transfer(int src, int dst, const std::string& mode,
                                     const std::string& variant = "") const;
  // `graph`: the CUDA-graph-timed curve (CollectiveCurve::graph) instead of the stream-timed one.
  const CollectiveCurve* find_collective(const std::string& op, const std::vector<int>& gpus, bool p2p,
                                         bool graph = false) const;
  // The curve of `algo` on exactly this set of GPUs (order ignored); nullptr if not measured.
  const PeerAllReduceCurve* find_peer_allreduce(const std::string& algo, const std::vector<int>& gpus,
                                                bool graph = false) const;
};

Measurements parse_measurements(const JsonIn& j);
nlohmann::json measurements_to_json(const Measurements& m);

}  // namespace peerplan
