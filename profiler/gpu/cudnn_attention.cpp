// cuDNN fused attention for prefill (see cudnn_attention.hpp). The operation graph below is the
// pattern cuDNN's flash-attention engines match (the same nodes cudnn-frontend's SDPA forward
// expands to in inference mode: matmul, scale, padding mask, bottom-right causal band, softmax as
// max/sub/exp/sum/div, matmul); every call goes through the dlopen'ed backend entry points.
#include "profiler/gpu/cudnn_attention.hpp"

#include <dlfcn.h>
#include <glob.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

#include <cudnn_graph.h>
#include <fmt/format.h>

#include "profiler/gpu/cuda_check.hpp"
#include "profiler/gpu/raii.hpp"

namespace peerplan::gpu {

void launch_cudnn_prep(const int* q_start, const int* seq_lens, const int* slots, int n, int b, int64_t q_stride,
                       int64_t o_stride, int64_t slot_stride, int* buf, int pitch, cudaStream_t s);

namespace {

// ---- the library ----

struct Api {
  void* lib = nullptr;
  std::string path, error;
  size_t (*GetVersion)() = nullptr;
  cudnnStatus_t (*Create)(cudnnHandle_t*) = nullptr;
  cudnnStatus_t (*SetStream)(cudnnHandle_t, cudaStream_t) = nullptr;
  const char* (*GetErrorString)(cudnnStatus_t) = nullptr;
  void (*GetLastErrorString)(char*, size_t) = nullptr;
  cudnnStatus_t (*CreateDescriptor)(cudnnBackendDescriptorType_t, cudnnBackendDescriptor_t*) = nullptr;
  cudnnStatus_t (*DestroyDescriptor)(cudnnBackendDescriptor_t) = nullptr;
  cudnnStatus_t (*Finalize)(cudnnBackendDescriptor_t) = nullptr;
  cudnnStatus_t (*SetAttribute)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t, cudnnBackendAttributeType_t,
                                int64_t, const void*) = nullptr;
  cudnnStatus_t (*GetAttribute)(cudnnBackendDescriptor_t const, cudnnBackendAttributeName_t,
                                cudnnBackendAttributeType_t, int64_t, int64_t*, void*) = nullptr;
  cudnnStatus_t (*Execute)(cudnnHandle_t, cudnnBackendDescriptor_t, cudnnBackendDescriptor_t) = nullptr;
};

std::vector<std::string> glob_paths(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  globfree(&g);
  return out;
}

std::string dir_of(const std::string& p) { return p.substr(0, p.find_last_of('/')); }

// Sub-libraries first (by full path, RTLD_GLOBAL), so the front library's own dlopen by soname
// finds them loaded whatever its search path; NVRTC from the pip package's siblings (nvidia/*/lib).
void preload_beside(const std::string& dir) {
  for (const char* n : {"libcudnn_graph.so.9", "libcudnn_engines_precompiled.so.9", "libcudnn_engines_runtime_compiled.so.9",
                        "libcudnn_heuristic.so.9", "libcudnn_ops.so.9", "libcudnn_cnn.so.9", "libcudnn_adv.so.9"})
    dlopen((dir + "/" + n).c_str(), RTLD_NOW | RTLD_GLOBAL);
  for (const auto& p : glob_paths(dir + "/../../*/lib/libnvrtc*.so*")) dlopen(p.c_str(), RTLD_NOW | RTLD_GLOBAL);
}

Api load_api() {
  Api a;
  std::vector<std::string> tried;
  auto try_open = [&](const std::string& p, bool by_path) {
    if (by_path) preload_beside(dir_of(p));
    a.lib = dlopen(p.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!a.lib) {
      const char* e = dlerror();
      tried.push_back(p + ": " + (e ? e : "not found"));
    } else {
      a.path = p;
      Dl_info info{};
      if (!by_path && dladdr(dlsym(a.lib, "cudnnGetVersion"), &info) && info.dli_fname) a.path = info.dli_fname;
    }
    return a.lib != nullptr;
  };
  const char* env = std::getenv("PEERPLAN_CUDNN_LIB");
  bool ok = env && *env ? try_open(env, true) : try_open("libcudnn.so.9", false);
  if (!ok && !(env && *env)) {
    for (const char* pat : {"/opt/*/.venv/lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so.9",
                            "/opt/*/lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so.9",
                            "/usr/local/lib/python3*/dist-packages/nvidia/cudnn/lib/libcudnn.so.9",
                            "/usr/local/lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so.9",
                            "/usr/lib/python3*/dist-packages/nvidia/cudnn/lib/libcudnn.so.9"}) {
      for (const auto& p : glob_paths(pat))
        if ((ok = try_open(p, true))) break;
      if (ok) break;
    }
  }
  if (!ok) {
    a.error = "cuDNN not found (set PEERPLAN_CUDNN_LIB or LD_LIBRARY_PATH); tried";
    for (const auto& t : tried) a.error += " [" + t + "]";
    return a;
  }
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(a.lib, name));
    if (!fn && a.error.empty()) a.error = fmt::format("{}: symbol {} missing", a.path, name);
  };
  sym(a.GetVersion, "cudnnGetVersion");
  sym(a.Create, "cudnnCreate");
  sym(a.SetStream, "cudnnSetStream");
  sym(a.GetErrorString, "cudnnGetErrorString");
  sym(a.GetLastErrorString, "cudnnGetLastErrorString");
  sym(a.CreateDescriptor, "cudnnBackendCreateDescriptor");
  sym(a.DestroyDescriptor, "cudnnBackendDestroyDescriptor");
  sym(a.Finalize, "cudnnBackendFinalize");
  sym(a.SetAttribute, "cudnnBackendSetAttribute");
  sym(a.GetAttribute, "cudnnBackendGetAttribute");
  sym(a.Execute, "cudnnBackendExecute");
  if (a.error.empty() && a.GetVersion() < 90000)
    a.error = fmt::format("{}: cuDNN {} is older than 9.0", a.path, a.GetVersion());
  return a;
}

const Api& api() {
  static const Api a = load_api();
  return a;
}

// A refused or failed backend call: the status, cuDNN's own last message, and the call.
struct CudnnFailure {
  std::string what;
};

void check(cudnnStatus_t st, const char* call) {
  if (st == CUDNN_STATUS_SUCCESS) return;
  char msg[512] = {0};
  if (api().GetLastErrorString) api().GetLastErrorString(msg, sizeof msg);
  throw CudnnFailure{fmt::format("{} -> {} ({})", call, api().GetErrorString ? api().GetErrorString(st) : "?",
                                 msg[0] ? msg : "no message")};
}
#define CK_DNN(x) check((x), #x)

// An owned backend descriptor.
class Desc {
 public:
  explicit Desc(cudnnBackendDescriptorType_t t) { CK_DNN(api().CreateDescriptor(t, &d_)); }
  ~Desc() {
    if (d_) api().DestroyDescriptor(d_);
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }
  Desc& set(cudnnBackendAttributeName_t n, cudnnBackendAttributeType_t t, int64_t count, const void* v) {
    check(api().SetAttribute(d_, n, t, count, v), "cudnnBackendSetAttribute");
    return *this;
  }
  Desc& set_desc(cudnnBackendAttributeName_t n, const Desc& other) {
    auto o = other.get();
    return set(n, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o);
  }
  Desc& set_i64(cudnnBackendAttributeName_t n, int64_t v) { return set(n, CUDNN_TYPE_INT64, 1, &v); }
  Desc& set_dtype(cudnnBackendAttributeName_t n, cudnnDataType_t v) { return set(n, CUDNN_TYPE_DATA_TYPE, 1, &v); }
  void finalize(const char* what) { check(api().Finalize(d_), what); }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

using Dims = std::array<int64_t, 4>;

// ---- one graph: its descriptors, plan, workspace and device-side inputs ----

enum Uid : int64_t {
  kQ = 1, kK, kV, kO, kSeqQ, kSeqKV, kPageK, kPageV, kQOff, kOOff, kScale, kNegInf, kWindow, kKOff, kVOff, kStats,
  kFirstVirtual = 100
};

struct Graph {
  std::vector<std::unique_ptr<Desc>> keep;  // every descriptor the plan was built from
  Desc* plan = nullptr;
  int64_t workspace_bytes = 0;
  DeviceBuffer workspace, prep;  // prep: seq_q, seq_kv, page, q_off, o_off, kv_off (`pitch` ints each)
  bool ragged = false;
  int kv_mode = 0;  // KvMode
  int b = 0, pitch = 0;
  std::string engine;  // "engine <id>" chosen by the heuristics
};

class Builder {
 public:
  explicit Builder(Graph& g) : g_(g) {}

  Desc& make(cudnnBackendDescriptorType_t t) {
    g_.keep.push_back(std::make_unique<Desc>(t));
    return *g_.keep.back();
  }

  Desc& tensor(int64_t uid, cudnnDataType_t dt, Dims dims, Dims strides, bool is_virtual, bool by_value = false,
               const Desc* ragged = nullptr) {
    Desc& t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    t.set_i64(CUDNN_ATTR_TENSOR_UNIQUE_ID, uid)
        .set_dtype(CUDNN_ATTR_TENSOR_DATA_TYPE, dt)
        .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data())
        .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data())
        .set_i64(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, 16);
    bool v = is_virtual, bv = by_value;
    t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &v);
    if (by_value) t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &bv);
    if (ragged) t.set_desc(CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, *ragged);
    t.finalize("tensor descriptor");
    return t;
  }
  // A virtual tensor shaped like `like` (dims, packed strides) with its own type.
  Desc& virt(cudnnDataType_t dt, Dims dims) {
    Dims st{dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
    return tensor(next_uid_++, dt, dims, st, true);
  }
  Desc& scalar(int64_t uid, cudnnDataType_t dt) { return tensor(uid, dt, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true); }

  void pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t prec, const Desc& x, const Desc* b, const Desc* t,
                 const Desc& y, int64_t axis = -1) {
    Desc& pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode).set_dtype(CUDNN_ATTR_POINTWISE_MATH_PREC, prec);
    if (mode == CUDNN_POINTWISE_GEN_INDEX) pw.set_i64(CUDNN_ATTR_POINTWISE_AXIS, axis);
    pw.finalize("pointwise descriptor");
    Desc& op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw)
        .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x)
        .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
    if (b) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
    if (t) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
    float one = 1.0f;
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one);
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one);
    op.finalize("pointwise operation");
    ops_.push_back(&op);
  }
  void reduction(cudnnReduceTensorOp_t mode, const Desc& x, const Desc& y) {
    Desc& r = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    cudnnDataType_t f = CUDNN_DATA_FLOAT;
    r.set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f)
        .set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode);
    r.finalize("reduction descriptor");
    Desc& op = make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, r)
        .set_desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x)
        .set_desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y);
    op.finalize("reduction operation");
    ops_.push_back(&op);
  }
  void matmul(const Desc& a, const Desc& b, const Desc& c, const Desc* m_over, const Desc* n_over, const Desc* k_over) {
    Desc& mm = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    mm.set_dtype(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_DATA_FLOAT);
    mm.finalize("matmul descriptor");
    Desc& op = make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a)
        .set_desc(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b)
        .set_desc(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c)
        .set_desc(CUDNN_ATTR_OPERATION_MATMUL_DESC, mm);
    if (m_over) op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, *m_over);
    if (n_over) op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, *n_over);
    if (k_over) op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, *k_over);
    op.finalize("matmul operation");
    ops_.push_back(&op);
  }
  void paged_load(const Desc& container, const Desc& seq_kv, const Desc& page, const Desc& y) {
    Desc& op = make(CUDNN_BACKEND_OPERATION_PAGED_CACHE_LOAD_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_CONTAINER_DESC, container)
        .set_desc(CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_PAGE_TABLE_DESC, page)
        .set_desc(CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_SEQUENCE_DESC, seq_kv)
        .set_desc(CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_YDESC, y);
    op.finalize("paged cache load operation");
    ops_.push_back(&op);
  }

  // Operation graph -> heuristics (mode A, then fallback) -> the first engine config that builds.
  void build_plan(cudnnHandle_t h) {
    Desc& og = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    std::vector<cudnnBackendDescriptor_t> raw;
    for (auto* o : ops_) raw.push_back(o->get());
    og.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(raw.size()), raw.data());
    og.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
    og.finalize("operation graph");
    std::string refusals;
    for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
      Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
      auto ogd = og.get();
      heur.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ogd)
          .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
      try {
        heur.finalize("engine heuristics");
      } catch (const CudnnFailure& f) {
        refusals += " [" + f.what + "]";
        continue;
      }
      int64_t n = 0;
      CK_DNN(api().GetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n, nullptr));
      if (n <= 0) continue;
      std::vector<std::unique_ptr<Desc>> cfgs;
      std::vector<cudnnBackendDescriptor_t> raw_cfgs;
      for (int64_t i = 0; i < n; ++i) {
        cfgs.push_back(std::make_unique<Desc>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
        raw_cfgs.push_back(cfgs.back()->get());
      }
      int64_t got = 0;
      CK_DNN(api().GetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, &got,
                                raw_cfgs.data()));
      for (int64_t i = 0; i < got; ++i) {
        auto plan = std::make_unique<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
        try {
          auto cfg = raw_cfgs[size_t(i)];
          plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h)
              .set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg);
          plan->finalize("execution plan");
        } catch (const CudnnFailure& f) {
          refusals += " [" + f.what + "]";
          continue;
        }
        int64_t ws = 0, cnt = 0;
        CK_DNN(api().GetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &cnt, &ws));
        g_.workspace_bytes = ws;
        g_.engine = fmt::format("heuristics {} config {}", mode == CUDNN_HEUR_MODE_A ? "A" : "fallback", i);
        for (auto& c : cfgs) g_.keep.push_back(std::move(c));
        g_.keep.push_back(std::move(plan));
        g_.plan = g_.keep.back().get();
        return;
      }
    }
    throw CudnnFailure{"no cuDNN engine runs this attention graph" + refusals};
  }

 private:
  Graph& g_;
  std::vector<Desc*> ops_;
  int64_t next_uid_ = kFirstVirtual;
};

// How K and V are addressed: the cache as [batch][kv][max_ctx][d] (no slot table: slot = index),
// through a page table of one page per slot (cuDNN paged attention), or through per-sequence ragged
// offsets of each slot (PEERPLAN_CUDNN_KV=ragged; =off: calls with a slot table run the own kernel).
enum KvMode { kDense = 0, kPaged = 1, kRaggedKV = 2 };

struct Key {
  int dev, b, s_q, s_kv, heads, kv, d, window;  // s_kv: the key extent (paged: max_ctx rounded up to 2^n)
  int pages;                                     // paged: the cache's slots (the container's extent)
  int64_t cap;                                   // the cache's max_ctx (token stride of a slot's heads)
  int64_t q_stride;
  bool ragged;
  int kv_mode;
  float scale;
  auto tie() const { return std::tie(dev, b, s_q, s_kv, heads, kv, d, window, pages, cap, q_stride, ragged, kv_mode, scale); }
  bool operator<(const Key& o) const { return tie() < o.tie(); }
};

// Query-length bucket of a graph: powers of two from 64 (the padding mask hides the rows past
// each sequence's own length), so an executor running many chunk sizes builds few graphs.
int bucket_q(int q) {
  int b = 64;
  while (b < q) b *= 2;
  return b;
}

// Sequence-count bucket: powers of two. The prep kernel gives the bucket's extra sequences no
// tokens, so a serving run meets few graphs and the start-up warm-up (cudnn_prefill_warmup) builds
// them all: each new graph costs 50-85 ms of host time (cuDNN compiles its engine), which landed
// inside serving iterations (H200 2026-12-03: 4-8 per long-prompt validation, 0.3-1.4 s in all).
int bucket_b(int n) {
  int b = 1;
  while (b < n) b *= 2;
  return b;
}

void build(Graph& g, const Key& k, cudnnHandle_t h) {
  Builder B(g);
  const int64_t b = k.b, H = k.heads, HK = k.kv, D = k.d, SQ = k.s_q, SKV = k.s_kv;
  const cudnnDataType_t bf = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT, i32 = CUDNN_DATA_INT32,
                        boolean = CUDNN_DATA_BOOLEAN;
  Dims seq_dims{b, 1, 1, 1}, seq_str{1, 1, 1, 1};
  Desc& seq_q = B.tensor(kSeqQ, i32, seq_dims, seq_str, false);
  Desc& seq_kv = B.tensor(kSeqKV, i32, seq_dims, seq_str, false);
  const Desc* q_off = nullptr;
  const Desc* o_off = nullptr;
  if (k.ragged) {
    q_off = &B.tensor(kQOff, i32, {b + 1, 1, 1, 1}, seq_str, false);
    o_off = &B.tensor(kOOff, i32, {b + 1, 1, 1, 1}, seq_str, false);
  }
  // Q: token t's head h at t*q_stride + h*D; O: at t*H*D + h*D.
  Desc& q = B.tensor(kQ, bf, {b, H, SQ, D}, {SQ * k.q_stride, D, k.q_stride, 1}, false, false, q_off);
  Desc& o = B.tensor(kO, bf, {b, H, SQ, D}, {SQ * H * D, D, H * D, 1}, false, false, o_off);
  // K^T and V: one slot is [kv][max_ctx][D].
  const Desc* kt;
  const Desc* v;
  if (k.kv_mode == kPaged) {
    // One page per slot. cuDNN wants a power-of-two page (block) size: the page spans max_ctx
    // rounded up, its strides those of the cache (tokens past a sequence's length are never read).
    // The container spans every slot of the cache: a sequence in slot 3 of a 2-sequence call reads
    // page 3 (with the extent set to the call's sequences, H200 2026-12-03: zeros, rel. error 1.0).
    Dims cont{k.pages, HK, SKV, D}, cont_str{HK * k.cap * D, k.cap * D, D, 1};
    Desc& kc = B.tensor(kK, bf, cont, cont_str, false);
    Desc& vc = B.tensor(kV, bf, cont, cont_str, false);
    Desc& pk = B.tensor(kPageK, i32, {b, 1, 1, 1}, {1, 1, 1, 1}, false);
    Desc& pv = B.tensor(kPageV, i32, {b, 1, 1, 1}, {1, 1, 1, 1}, false);
    Desc& kl = B.tensor(50, bf, {b, HK, D, SKV}, {HK * D * SKV, D * SKV, 1, D}, true);
    Desc& vl = B.tensor(51, bf, {b, HK, SKV, D}, {HK * SKV * D, SKV * D, D, 1}, true);
    B.paged_load(kc, seq_kv, pk, kl);
    B.paged_load(vc, seq_kv, pv, vl);
    kt = &kl;
    v = &vl;
  } else {
    const Desc* k_off = nullptr;
    const Desc* v_off = nullptr;
    if (k.kv_mode == kRaggedKV) {
      k_off = &B.tensor(kKOff, i32, {b + 1, 1, 1, 1}, seq_str, false);
      v_off = &B.tensor(kVOff, i32, {b + 1, 1, 1, 1}, seq_str, false);
    }
    kt = &B.tensor(kK, bf, {b, HK, D, SKV}, {HK * SKV * D, SKV * D, 1, D}, false, false, k_off);
    v = &B.tensor(kV, bf, {b, HK, SKV, D}, {HK * SKV * D, SKV * D, D, 1}, false, false, v_off);
  }
  const Dims sdims{b, H, SQ, SKV};
  Desc& s = B.virt(f32, sdims);
  B.matmul(q, *kt, s, &seq_q, &seq_kv, nullptr);
  Desc& scale = B.scalar(kScale, f32);
  Desc& s1 = B.virt(f32, sdims);
  B.pointwise(CUDNN_POINTWISE_MUL, f32, s, &scale, nullptr, s1);
  Desc& neg_inf = B.scalar(kNegInf, f32);
  // Padding: row < seq_q and col < seq_kv.
  Desc& prow = B.virt(i32, sdims);
  B.pointwise(CUDNN_POINTWISE_GEN_INDEX, i32, s1, nullptr, nullptr, prow, 2);
  Desc& pcol = B.virt(i32, sdims);
  B.pointwise(CUDNN_POINTWISE_GEN_INDEX, i32, s1, nullptr, nullptr, pcol, 3);
  Desc& rok = B.virt(boolean, sdims);
  B.pointwise(CUDNN_POINTWISE_CMP_LT, boolean, prow, &seq_q, nullptr, rok);
  Desc& cok = B.virt(boolean, sdims);
  B.pointwise(CUDNN_POINTWISE_CMP_LT, boolean, pcol, &seq_kv, nullptr, cok);
  Desc& pok = B.virt(boolean, sdims);
  B.pointwise(CUDNN_POINTWISE_LOGICAL_AND, boolean, rok, &cok, nullptr, pok);
  Desc& s2 = B.virt(f32, sdims);
  B.pointwise(CUDNN_POINTWISE_BINARY_SELECT, f32, s1, &neg_inf, &pok, s2);
  // Causal, bottom-right: row + seq_kv - seq_q >= col.
  Desc& row = B.virt(i32, sdims);
  B.pointwise(CUDNN_POINTWISE_GEN_INDEX, f32, s2, nullptr, nullptr, row, 2);
  Desc& col = B.virt(i32, sdims);
  B.pointwise(CUDNN_POINTWISE_GEN_INDEX, f32, s2, nullptr, nullptr, col, 3);
  Desc& r1 = B.virt(i32, sdims);
  B.pointwise(CUDNN_POINTWISE_ADD, i32, row, &seq_kv, nullptr, r1);
  Desc& r2 = B.virt(i32, sdims);
  B.pointwise(CUDNN_POINTWISE_SUB, i32, r1, &seq_q, nullptr, r2);
  Desc& causal = B.virt(boolean, sdims);
  B.pointwise(CUDNN_POINTWISE_CMP_GE, boolean, r2, &col, nullptr, causal);
  Desc* masked = &B.virt(f32, sdims);
  B.pointwise(CUDNN_POINTWISE_BINARY_SELECT, f32, s2, &neg_inf, &causal, *masked);
  if (k.window > 0) {
    // Sliding window: col + window - seq_kv + seq_q > row.
    Desc& wrow = B.virt(i32, sdims);
    B.pointwise(CUDNN_POINTWISE_GEN_INDEX, f32, *masked, nullptr, nullptr, wrow, 2);
    Desc& wcol = B.virt(i32, sdims);
    B.pointwise(CUDNN_POINTWISE_GEN_INDEX, f32, *masked, nullptr, nullptr, wcol, 3);
    Desc& win = B.scalar(kWindow, i32);
    Desc& c1 = B.virt(i32, sdims);
    B.pointwise(CUDNN_POINTWISE_ADD, i32, wcol, &win, nullptr, c1);
    Desc& c2 = B.virt(i32, sdims);
    B.pointwise(CUDNN_POINTWISE_SUB, i32, c1, &seq_kv, nullptr, c2);
    Desc& c3 = B.virt(i32, sdims);
    B.pointwise(CUDNN_POINTWISE_ADD, i32, c2, &seq_q, nullptr, c3);
    Desc& inwin = B.virt(boolean, sdims);
    B.pointwise(CUDNN_POINTWISE_CMP_GT, boolean, c3, &wrow, nullptr, inwin);
    Desc& m2 = B.virt(f32, sdims);
    B.pointwise(CUDNN_POINTWISE_BINARY_SELECT, f32, *masked, &neg_inf, &inwin, m2);
    masked = &m2;
  }
  // Softmax: max, sub, exp, sum, div (inference: no statistics written).
  const Dims rdims{b, H, SQ, 1};
  Desc& mx = B.virt(f32, rdims);
  B.reduction(CUDNN_REDUCE_TENSOR_MAX, *masked, mx);
  Desc& sub = B.virt(f32, sdims);
  B.pointwise(CUDNN_POINTWISE_SUB, f32, *masked, &mx, nullptr, sub);
  Desc& ex = B.virt(f32, sdims);
  B.pointwise(CUDNN_POINTWISE_EXP, f32, sub, nullptr, nullptr, ex);
  Desc& sum = B.virt(f32, rdims);
  B.reduction(CUDNN_REDUCE_TENSOR_ADD, ex, sum);
  // Statistics (max + log sum): written to a real buffer. The fused engine writes them whenever the
  // graph has a softmax (H200, cuDNN 9.19: a graph without this output faulted on an out-of-range
  // 4-byte store from the sm90 flash kernel, compute-sanitizer 2026-12-02).
  Desc& lg = B.virt(f32, rdims);
  B.pointwise(CUDNN_POINTWISE_LOG, f32, sum, nullptr, nullptr, lg);
  Desc& stats = B.tensor(kStats, f32, rdims, {H * SQ, SQ, 1, 1}, false);
  B.pointwise(CUDNN_POINTWISE_ADD, f32, mx, &lg, nullptr, stats);
  Desc& p = B.virt(bf, sdims);
  B.pointwise(CUDNN_POINTWISE_DIV, f32, ex, &sum, nullptr, p);
  B.matmul(p, *v, o, &seq_q, nullptr, &seq_kv);
  B.build_plan(h);
  g.ragged = k.ragged;
  g.kv_mode = k.kv_mode;
  g.b = k.b;
  g.pitch = (k.b + 1 + 63) / 64 * 64;
  if (g.workspace_bytes > 0) g.workspace = DeviceBuffer(k.dev, size_t(g.workspace_bytes));
  g.prep = DeviceBuffer(k.dev, sizeof(int) * 6 * size_t(g.pitch));
}

struct Cache {
  std::mutex mu;
  std::map<int, cudnnHandle_t> handles;                    // per device
  std::map<Key, std::unique_ptr<Graph>> graphs;            // nullptr entry: refused (reason below)
  std::map<Key, std::string> refused;
  std::map<int, std::vector<DeviceBuffer>> stats;          // per device: the softmax statistics (see graph_of)
};
Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: handles outlive static teardown order issues
  return *c;
}

std::string version_string(size_t v) { return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100); }

std::mutex backend_mu;
bool backend_set = false;
PrefillBackend backend_value = PrefillBackend::Auto;

}  // namespace

const std::string& cudnn_load_error() { return api().error; }

std::string cudnn_description() {
  const Api& a = api();
  if (!a.error.empty() || !a.lib) return "";
  return fmt::format("{} ({})", version_string(a.GetVersion()), a.path);
}

PrefillBackend prefill_backend() {
  std::lock_guard<std::mutex> l(backend_mu);
  if (!backend_set) {
    backend_set = true;
    const char* e = std::getenv("PEERPLAN_PREFILL_ATTENTION");
    const std::string v = e ? e : "";
    if (v == "cudnn") backend_value = PrefillBackend::Cudnn;
    else if (v == "own") backend_value = PrefillBackend::Own;
    else if (v == "auto") backend_value = PrefillBackend::Auto;
    else if (v.empty()) backend_value = PrefillBackend::Auto;  // verified on H200 2026-12-03 (docs/attention.md)
    else
      throw InputError("", "PEERPLAN_PREFILL_ATTENTION (environment)", "auto, cudnn or own, not '" + v + "'");
  }
  return backend_value;
}

void set_prefill_backend(PrefillBackend b) {
  std::lock_guard<std::mutex> l(backend_mu);
  backend_set = true;
  backend_value = b;
}

const char* prefill_backend_name(PrefillBackend b) {
  return b == PrefillBackend::Cudnn ? "cudnn" : b == PrefillBackend::Own ? "own" : "auto";
}

namespace {

// The graph key of a call (its bucketed batch and query length), or nullopt with *why when cuDNN
// cannot run it (the caller then runs the own kernel).
std::optional<Key> key_of(const CudnnPrefill& a, std::string* why) {
  const Api& A = api();
  if (!A.error.empty()) {
    if (why) *why = A.error;
    return std::nullopt;
  }
  if (a.head_dim % 8 != 0 || a.head_dim > 256) {
    if (why) *why = fmt::format("head_dim {}: cuDNN's fused attention needs a multiple of 8 up to 256", a.head_dim);
    return std::nullopt;
  }
  int kv_mode = kDense;
  if (a.slots) {
    static const std::string env = [] {
      const char* e = std::getenv("PEERPLAN_CUDNN_KV");
      return std::string(e ? e : "paged");
    }();
    if (env == "off") {
      if (why) *why = "PEERPLAN_CUDNN_KV=off: calls with a slot table run the own kernel";
      return std::nullopt;
    }
    kv_mode = env == "ragged" ? kRaggedKV : kPaged;
  }
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  int s_kv = a.max_ctx;
  if (kv_mode == kPaged)
    for (s_kv = 1; s_kv < a.max_ctx; s_kv *= 2) {
    }
  // Q and O always through ragged offsets, one sequence too: with a plain [b][s_q] layout the engine
  // writes all s_q rows of the bucket, past the sequence's own tokens (H200 2026-12-03: an illegal
  // address once a 1100-token prompt's bucket of 2048 rows ran past the output buffer).
  Key k{dev, bucket_b(a.num_seqs), bucket_q(a.max_q_len), s_kv, a.heads, a.kv_heads, a.head_dim, a.window,
        kv_mode == kPaged ? std::max(a.num_slots, a.num_seqs) : 0, a.max_ctx, a.q_row_stride, true, kv_mode,
        a.scale > 0 ? a.scale : 1.0f / std::sqrt(float(a.head_dim))};
  // Ragged offsets are int32 elements.
  if (k.ragged && int64_t(k.b) * k.s_q * std::max<int64_t>(a.q_row_stride, int64_t(a.heads) * a.head_dim) >=
                      std::numeric_limits<int32_t>::max()) {
    if (why) *why = "packed prefill tokens x row width exceed the int32 ragged offsets";
    return std::nullopt;
  }
  return k;
}

// The cached graph of key k, built (compiled) on first use; nullptr with *why when cuDNN refuses it.
Graph* graph_of(const Key& k, cudnnHandle_t* handle, std::string* why) {
  const Api& A = api();
  Cache& c = cache();
  std::lock_guard<std::mutex> l(c.mu);
  auto rf = c.refused.find(k);
  if (rf != c.refused.end()) {
    if (why) *why = rf->second;
    return nullptr;
  }
  cudnnHandle_t h = nullptr;
  auto hit = c.handles.find(k.dev);
  if (hit == c.handles.end()) {
    try {
      CK_DNN(A.Create(&h));
    } catch (const CudnnFailure& f) {
      c.refused[k] = f.what;
      if (why) *why = f.what;
      return nullptr;
    }
    c.handles[k.dev] = h;
  } else {
    h = hit->second;
  }
  *handle = h;
  auto it = c.graphs.find(k);
  if (it == c.graphs.end()) {
    auto ng = std::make_unique<Graph>();
    try {
      build(*ng, k, h);
    } catch (const CudnnFailure& f) {
      std::string msg = fmt::format("cuDNN {} refused prefill attention b={} s_q={} s_kv={} heads={}/{} d={}{}{}{}: {}",
                                    version_string(A.GetVersion()), k.b, k.s_q, k.s_kv, k.heads, k.kv, k.d,
                                    k.ragged ? " ragged" : "", k.kv_mode == kPaged ? " paged" : k.kv_mode == kRaggedKV ? " ragged-kv" : "",
                                    k.window ? fmt::format(" window={}", k.window) : "", f.what);
      c.refused[k] = msg;
      if (why) *why = msg;
      return nullptr;
    }
    // The softmax statistics are written and never read: one buffer per device, the largest any
    // graph needs, shared (outgrown ones stay allocated: work already enqueued may still write them).
    const size_t need = sizeof(float) * size_t(k.b) * size_t(k.heads) * size_t(k.s_q);
    auto& st = c.stats[k.dev];
    if (st.empty() || st.back().bytes() < need) st.emplace_back(k.dev, need);
    it = c.graphs.emplace(k, std::move(ng)).first;
  }
  return it->second.get();
}

}  // namespace

int cudnn_prefill_warmup(const CudnnPrefill& shape, int max_seqs, int max_q_len, std::string* why) {
  int built = 0;
  // Buckets whose b x s_q is over 4x the token budget's bucket need many sequences and a long one
  // in one iteration (rare): built on first use, so the warm-up stays ~50 graphs (~3 s) and the
  // shared statistics buffer a few MB.
  const int64_t rows = 4 * int64_t(bucket_q(max_q_len));
  for (int b = 1;; b *= 2) {
    for (int q = 64; int64_t(b) * q <= rows; q *= 2) {
      CudnnPrefill a = shape;
      a.num_seqs = b, a.max_q_len = q;
      const std::optional<Key> k = key_of(a, why);
      if (!k) return built;
      cudnnHandle_t h = nullptr;
      if (!graph_of(*k, &h, why)) return built;
      ++built;
      if (q >= max_q_len) break;
    }
    if (b >= max_seqs) break;
  }
  return built;
}

bool cudnn_prefill_attention(const CudnnPrefill& a, cudaStream_t stream, std::string* why) {
  const Api& A = api();
  if (!A.error.empty()) {
    if (why) *why = A.error;
    return false;
  }
  if (a.num_seqs <= 0 || a.max_q_len <= 0) return true;
  const std::optional<Key> key = key_of(a, why);
  if (!key) return false;
  const Key& k = *key;
  cudnnHandle_t h = nullptr;
  Graph* g = graph_of(k, &h, why);
  if (!g) return false;
  void* stats = nullptr;
  {
    Cache& c = cache();
    std::lock_guard<std::mutex> l(c.mu);
    stats = c.stats[k.dev].back().get();
  }
  int* prep = g->prep.as<int>();
  const int n = g->pitch;
  launch_cudnn_prep(a.q_start, a.seq_lens, a.slots, a.num_seqs, g->b, a.q_row_stride, int64_t(a.heads) * a.head_dim,
                    int64_t(a.kv_heads) * a.max_ctx * a.head_dim, prep, n, stream);
  float scale = k.scale, neg_inf = -std::numeric_limits<float>::infinity();
  int32_t window = a.window;
  std::vector<int64_t> uids{kQ, kK, kV, kO, kSeqQ, kSeqKV, kScale, kNegInf, kStats};
  std::vector<void*> ptrs{const_cast<void*>(a.q), const_cast<void*>(a.k_cache), const_cast<void*>(a.v_cache), a.out,
                          prep, prep + n, &scale, &neg_inf, stats};
  if (g->kv_mode == kPaged) {
    uids.insert(uids.end(), {kPageK, kPageV});
    ptrs.insert(ptrs.end(), {prep + 2 * n, prep + 2 * n});
  }
  if (g->kv_mode == kRaggedKV) {
    uids.insert(uids.end(), {kKOff, kVOff});
    ptrs.insert(ptrs.end(), {prep + 5 * n, prep + 5 * n});
  }
  if (g->ragged) {
    uids.insert(uids.end(), {kQOff, kOOff});
    ptrs.insert(ptrs.end(), {prep + 3 * n, prep + 4 * n});
  }
  if (k.window > 0) {
    uids.push_back(kWindow);
    ptrs.push_back(&window);
  }
  try {
    Desc vp(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    void* ws = g->workspace.get();
    vp.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, int64_t(uids.size()), uids.data())
        .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, int64_t(ptrs.size()), ptrs.data())
        .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    vp.finalize("variant pack");
    CK_DNN(A.SetStream(h, stream));
    CK_DNN(A.Execute(h, g->plan->get(), vp.get()));
  } catch (const CudnnFailure& f) {
    throw RuntimeError("cuDNN prefill attention: " + f.what);
  }
  return true;
}

}  // namespace peerplan::gpu
