// Symmetry classes of GPUs: the orbits of the automorphism group of the GPU-level graph, where
// each GPU is labelled by its spec and each ordered pair by what a transfer between them sees
// (path type, NVLink count, peer and host-staged bottlenecks, peer access). Two GPUs are in one
// class when some relabelling of all GPUs that preserves every label maps one onto the other, so
// an 8-GPU NVSwitch box is one class, and so is a 2-socket box whose sockets mirror each other.
// Search: colour refinement to prune, then backtracking for an automorphism with pi(a) = b.
#include <algorithm>
#include <cmath>
#include <map>
#include <functional>
#include <numeric>
#include <set>
#include <sstream>
#include <tuple>

#include "planner/topology/topology.hpp"

namespace peerplan {

namespace {

struct Labels {
  std::vector<int> vertex;              // per GPU
  std::vector<std::vector<int>> pair;   // [a][b], a != b
};

Labels gpu_labels(const Topology& t) {
  const int n = t.gpu_count();
  std::map<std::string, int> ids;
  auto id_of = [&](const std::string& s) { return ids.emplace(s, int(ids.size())).first->second; };
  auto round_bw = [](double bps) { return std::isinf(bps) ? std::string("inf") : std::to_string(std::llround(bps / 1e6)); };
  Labels L;
  L.vertex.resize(size_t(n));
  L.pair.assign(size_t(n), std::vector<int>(size_t(n), -1));
  for (int a = 0; a < n; ++a) {
    const GpuSpec& g = t.machine().gpus[size_t(a)];
    std::ostringstream s;
    s << "v|" << g.name << '|' << g.memory_bytes << '|' << g.sm_count << '|' << g.compute_capability << '|'
      << g.peak_bf16_tflops << '|' << g.hbm_gbps;
    L.vertex[size_t(a)] = id_of(s.str());
  }
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      Route peer = t.route(a, b, TransferMode::PeerCopyEngine);
      Route staged = t.route(a, b, TransferMode::HostStaged);
      std::ostringstream s;
      s << "p|" << to_string(t.path_type(a, b), t.nvlinks_between(a, b)) << '|' << peer.valid << '|'
        << round_bw(peer.bottleneck_Bps) << '|' << round_bw(staged.bottleneck_Bps) << '|'
        << std::llround(staged.latency_s * 1e9) << '|' << (t.socket_numa(a) == t.socket_numa(b));
      L.pair[size_t(a)][size_t(b)] = id_of(s.str());
    }
  return L;
}

// 1-dimensional Weisfeiler-Leman colour refinement on the complete labelled digraph.
std::vector<int> refine(const Labels& L) {
  const size_t n = L.vertex.size();
  std::vector<int> colour = L.vertex;
  for (size_t iter = 0; iter < n + 1; ++iter) {
    std::map<std::vector<int>, int> ids;
    std::vector<int> next(n);
    for (size_t a = 0; a < n; ++a) {
      std::vector<std::tuple<int, int, int>> nb;
      for (size_t b = 0; b < n; ++b)
        if (a != b) nb.emplace_back(L.pair[a][b], L.pair[b][a], colour[b]);
      std::sort(nb.begin(), nb.end());
      std::vector<int> sig{colour[a]};
      for (auto [x, y, z] : nb) sig.insert(sig.end(), {x, y, z});
      next[a] = ids.emplace(sig, int(ids.size())).first->second;
    }
    size_t before = std::set<int>(colour.begin(), colour.end()).size();
    size_t after = std::set<int>(next.begin(), next.end()).size();
    colour = next;
    if (after == before) break;
  }
  return colour;
}

// Is there a label-preserving permutation pi with pi(a) = b? Depth-first, checking every new
// assignment against all earlier ones; a step budget bounds pathological inputs (then: "no").
bool automorphism_maps(const Labels& L, const std::vector<int>& colour, int a, int b) {
  const int n = int(L.vertex.size());
  std::vector<int> order{a};
  for (int v = 0; v < n; ++v)
    if (v != a) order.push_back(v);
  std::vector<int> image(size_t(n), -1);
  std::vector<char> used(size_t(n), 0);
  long budget = 200000;
  std::function<bool(size_t)> extend = [&](size_t depth) -> bool {
    if (depth == order.size()) return true;
    if (--budget < 0) return false;
    int v = order[depth];
    for (int w = 0; w < n; ++w) {
      if (used[size_t(w)] || colour[size_t(w)] != colour[size_t(v)]) continue;
      if (depth == 0 && w != b) continue;
      bool ok = true;
      for (size_t d = 0; d < depth && ok; ++d) {
        int u = order[d], x = image[size_t(u)];
        ok = L.pair[size_t(u)][size_t(v)] == L.pair[size_t(x)][size_t(w)] &&
             L.pair[size_t(v)][size_t(u)] == L.pair[size_t(w)][size_t(x)];
      }
      if (!ok) continue;
      image[size_t(v)] = w;
      used[size_t(w)] = 1;
      if (extend(depth + 1)) return true;
      image[size_t(v)] = -1;
      used[size_t(w)] = 0;
    }
    return false;
  };
  return extend(0);
}

}  // namespace

// Above this many GPUs the classes are colour refinement's alone: the automorphism search checks
// every pair of GPUs per candidate mapping (cubic), minutes at 1024 GPUs. Refinement's classes
// can only be coarser than the orbits, and on machines built of identical hosts they are equal.
constexpr int kExactSymmetryGpus = 64;

std::vector<int> Topology::symmetry_classes() const {
  const int n = gpu_count();
  Labels L = gpu_labels(*this);
  std::vector<int> colour = refine(L);
  if (n > kExactSymmetryGpus) {
    std::map<int, int> id;  // colours renumbered in order of their lowest GPU, as below
    std::vector<int> cls(static_cast<size_t>(n));
    for (int a = 0; a < n; ++a) cls[size_t(a)] = id.emplace(colour[size_t(a)], int(id.size())).first->second;
    return cls;
  }
  std::vector<int> cls(size_t(n), -1);
  int next = 0;
  for (int a = 0; a < n; ++a) {
    if (cls[size_t(a)] >= 0) continue;
    cls[size_t(a)] = next;
    for (int b = a + 1; b < n; ++b)
      if (cls[size_t(b)] < 0 && colour[size_t(b)] == colour[size_t(a)] && automorphism_maps(L, colour, a, b))
        cls[size_t(b)] = next;
    ++next;
  }
  return cls;
}

}  // namespace peerplan
