#include "planner/cost/cross_host_collective.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "planner/core/error.hpp"
#include "planner/cost/curve.hpp"

namespace peerplan {

std::vector<std::vector<int>> members_by_host(const Topology& topo, const std::vector<int>& gpus) {
  std::vector<int> host_ids;
  std::vector<std::vector<int>> out;
  for (int g : gpus) {
    const int h = topo.host_of(g);
    auto it = std::find(host_ids.begin(), host_ids.end(), h);
    if (it == host_ids.end()) {
      host_ids.push_back(h);
      out.push_back({g});
    } else {
      out[size_t(it - host_ids.begin())].push_back(g);
    }
  }
  return out;
}

double hierarchical_allreduce_s(double local_rs_s, double net_step_s, int hosts, double local_ag_s) {
  if (hosts < 1) throw std::invalid_argument("hierarchical_allreduce_s: " + std::to_string(hosts) + " hosts");
  return local_rs_s + 2.0 * double(hosts - 1) * net_step_s + local_ag_s;
}

double hierarchical_step_bytes(double bytes, int local, int hosts, double sharing) {
  if (local < 1 || hosts < 1) throw std::invalid_argument("hierarchical_step_bytes: empty group");
  return sharing * bytes / (double(local) * double(hosts));
}

double cross_host_alltoall_s(double local_s, double cross_s) { return std::max(local_s, cross_s); }

namespace {

// Per flow: alone-bottleneck / max-min rate with all flows running (>= 1).
std::vector<double> slowdowns(const Topology& topo, const std::vector<Route>& routes) {
  std::vector<std::vector<int>> flows;
  for (const Route& r : routes) flows.push_back(r.edges);
  std::vector<double> cap(size_t(topo.edge_count()));
  for (int e = 0; e < topo.edge_count(); ++e) cap[size_t(e)] = topo.edge_props(e).capacity_Bps;
  const std::vector<double> rates = max_min_rates(flows, cap);
  std::vector<double> k(routes.size(), 1.0);
  for (size_t i = 0; i < routes.size(); ++i)
    if (rates[i] > 0 && std::isfinite(rates[i]) && routes[i].bottleneck_Bps > 0)
      k[i] = std::max(1.0, routes[i].bottleneck_Bps / rates[i]);
  return k;
}

std::string group_text(const std::vector<int>& g) { return fmt::format("{{{}}}", fmt::join(g, ",")); }

const std::vector<CurvePoint>* curve_of(const Measurements* meas, OpKind op, const std::vector<int>& g, bool p2p) {
  if (!meas) return nullptr;
  const CollectiveCurve* c = meas->find_collective(coll_op_name(coll_op(op)), g, p2p);
  return c && !c->points.empty() ? &c->points : nullptr;
}

struct Part {
  double seconds = 0;
  CostSource source = CostSource::Measured;
  std::string from;
  std::vector<std::pair<int, double>> edge_bytes;
};

// One host's share of the collective, on that host's members only.
Part local_phase(OpKind op, const std::vector<int>& local, double bytes, bool p2p, const Topology& topo,
                 const Measurements* meas, const CostOptions& opt, bool nominal_graph) {
  Part ph;
  if (local.size() <= 1 || bytes <= 0) {
    ph.from = "one GPU on this host: nothing to do";
    return ph;
  }
  const auto* pts = curve_of(meas, op, local, p2p);
  if (!pts && (op == OpKind::ReduceScatter || op == OpKind::AllGather)) {
    // A ring all-reduce is a reduce-scatter then an all-gather moving the same bytes: half of it.
    if (const auto* ar = curve_of(meas, OpKind::AllReduce, local, p2p)) {
      CurveTime t = curve_time(*ar, bytes);
      ph.seconds = 0.5 * t.seconds;
      ph.source = weaker(t.source, CostSource::Derived);
      ph.from = "half the measured all_reduce curve of " + group_text(local);
      ph.edge_bytes = price_collective(op, local, bytes, p2p, topo, nullptr, opt, nominal_graph).edge_bytes;
      return ph;
    }
  }
  CollectivePrice p = price_collective(op, local, bytes, p2p, topo, pts, opt, nominal_graph);
  ph.seconds = p.seconds;
  ph.source = p.source;
  ph.edge_bytes = std::move(p.edge_bytes);
  ph.from = pts ? std::string("measured ") + coll_op_name(coll_op(op)) + " curve of " + group_text(local)
                : p.algo + " estimate over the graph for " + group_text(local);
  return ph;
}

Route network_route_or_throw(const Topology& topo, int a, int b) {
  Route r = topo.route(a, b, TransferMode::HostStaged);  // across hosts: the network route
  if (!r.valid)
    throw RuntimeError(fmt::format("no network route gpu{} -> gpu{} for a collective across hosts: {}", a, b, r.why_invalid));
  return r;
}

// One network transfer of `bytes` from a to b alone on its route (r, the network route), priced
// as every transfer is (price_pair_transfer: the pair's or its hosts' net_nccl curve, else nominal).
Part net_transfer(const Topology& topo, const Route& r, int a, int b, double bytes, const CostOptions& opt) {
  PairTransfer t = price_pair_transfer(topo, a, b, r.mode, bytes, opt);
  Part p;
  p.seconds = t.price.seconds;
  p.source = t.price.source;
  p.from = t.curve ? fmt::format("net_nccl curve gpu{}->gpu{}", t.curve->src, t.curve->dst)
                   : fmt::format("nominal network route gpu{}->gpu{} ({:.1f} GB/s)", a, b, r.bottleneck_Bps * 1e-9);
  return p;
}

}  // namespace

double sharing_factor(const Topology& topo, const std::vector<Route>& routes) {
  double k = 1.0;
  for (double x : slowdowns(topo, routes)) k = std::max(k, x);
  return k;
}

std::optional<CollectivePrice> price_cross_host_collective(OpKind op, const std::vector<int>& gpus, double bytes,
                                                           bool p2p, const Topology& topo, const Measurements* meas,
                                                           const CostOptions& opt, bool nominal_graph) {
  if (op != OpKind::AllReduce && op != OpKind::AllToAll) return std::nullopt;
  const auto hosts = members_by_host(topo, gpus);
  if (hosts.size() < 2) return std::nullopt;
  const int H = int(hosts.size()), n = int(gpus.size());
  size_t mmin = hosts[0].size(), mmax = hosts[0].size();
  for (const auto& L : hosts) {
    mmin = std::min(mmin, L.size());
    mmax = std::max(mmax, L.size());
  }
  CollectivePrice p;
  if (bytes <= 0) {  // as price_collective: nothing to move
    p.source = CostSource::Measured;
    p.algo = "none";
    return p;
  }
  p.algo = "hierarchical";
  CostSource src = CostSource::Derived;  // a model over measured parts: never better than derived
  nlohmann::json parts = nlohmann::json::array();
  std::vector<int> per_host;
  for (const auto& L : hosts) per_host.push_back(int(L.size()));
  auto take = [&](const Part& x, const char* phase, const std::vector<int>& who) {
    src = weaker(src, x.source);
    parts.push_back({{"phase", phase}, {"gpus", who}, {"from", x.from}, {"source", to_string(x.source)}});
    p.edge_bytes.insert(p.edge_bytes.end(), x.edge_bytes.begin(), x.edge_bytes.end());
  };
  std::string rule;
  double k = 1.0;
  if (op == OpKind::AllReduce) {
    double rs = 0, ag = 0;
    for (const auto& L : hosts) {
      Part a = local_phase(OpKind::ReduceScatter, L, bytes, p2p, topo, meas, opt, nominal_graph);
      Part b = local_phase(OpKind::AllGather, L, bytes, p2p, topo, meas, opt, nominal_graph);
      rs = std::max(rs, a.seconds);
      ag = std::max(ag, b.seconds);
      if (L.size() > 1) {
        take(a, "intra-host reduce-scatter", L);
        take(b, "intra-host all-gather", L);
      }
    }
    // Rails: rail r joins GPU r of every host in a ring over the hosts (a host with fewer GPUs
    // lends one GPU to several rails, which the sharing factor then sees). Every hop of every rail
    // runs at once in each step.
    std::vector<Route> routes;
    std::vector<std::pair<int, int>> ends;
    for (size_t r = 0; r < mmax; ++r)
      for (int h = 0; h < H; ++h) {
        const auto& A = hosts[size_t(h)];
        const auto& B = hosts[size_t((h + 1) % H)];
        const int a = A[r % A.size()], b = B[r % B.size()];
        routes.push_back(network_route_or_throw(topo, a, b));
        ends.push_back({a, b});
      }
    k = sharing_factor(topo, routes);
    const double step_bytes = hierarchical_step_bytes(bytes, int(mmin), H, k);
    double step = 0;
    for (int h = 0; h < H; ++h) {  // rail 0's hop out of each host: the slowest host pair decides
      const size_t i = size_t(h);
      Part t = net_transfer(topo, routes[i], ends[i].first, ends[i].second, step_bytes, opt);
      step = std::max(step, t.seconds);
      if (h == 0 || t.from != parts.back().value("from", std::string()))
        take(t, "inter-host all-reduce step", {ends[i].first, ends[i].second});
    }
    const double shard = bytes / double(mmin);
    for (const Route& r : routes)
      for (int e : r.edges) p.edge_bytes.push_back({e, 2.0 * double(H - 1) / double(H) * shard});
    p.seconds = hierarchical_allreduce_s(rs, step, H, ag);
    rule = fmt::format("no measured curve for this group: NCCL's hierarchical all-reduce across {} hosts = intra-host "
                       "reduce-scatter + 2({}-1) inter-host ring steps of S/(m H) per rail ({} rail(s), {:.3g} sharing "
                       "the busiest edge) + intra-host all-gather",
                       H, H, mmax, k);
  } else {  // all-to-all: one grouped send/recv; local and cross-host parts at once
    double local = 0;
    for (const auto& L : hosts) {
      Part a = local_phase(OpKind::AllToAll, L, bytes * double(L.size()) / double(n), p2p, topo, meas, opt, nominal_graph);
      local = std::max(local, a.seconds);
      if (L.size() > 1) take(a, "intra-host all-to-all", L);
    }
    std::vector<Route> routes;
    std::vector<std::pair<int, int>> ends;
    for (int a : gpus)
      for (int b : gpus)
        if (topo.host_of(a) != topo.host_of(b)) {
          routes.push_back(network_route_or_throw(topo, a, b));
          ends.push_back({a, b});
        }
    const std::vector<double> slow = slowdowns(topo, routes);
    const double flow_bytes = bytes / double(n);
    double cross = 0;
    size_t worst = 0;
    for (size_t i = 0; i < routes.size(); ++i) {
      Part t = net_transfer(topo, routes[i], ends[i].first, ends[i].second, slow[i] * flow_bytes, opt);
      if (t.seconds > cross) {
        cross = t.seconds;
        worst = i;
      }
      k = std::max(k, slow[i]);
      for (int e : routes[i].edges) p.edge_bytes.push_back({e, flow_bytes});
    }
    take(net_transfer(topo, routes[worst], ends[worst].first, ends[worst].second, slow[worst] * flow_bytes, opt),
         "cross-host sends (slowest flow)", {ends[worst].first, ends[worst].second});
    p.seconds = cross_host_alltoall_s(local, cross);
    rule = fmt::format("no measured curve for this group: all-to-all across {} hosts = max(intra-host all-to-all, "
                       "slowest cross-host send of S/n with {} flows sharing the network, up to {:.3g} per edge)",
                       H, routes.size(), k);
  }
  p.source = src;
  p.bus_Bps = p.seconds > 0 ? bus_bytes(coll_op(op), n, bytes) / p.seconds : 0;
  p.inferred = {{"op", coll_op_name(coll_op(op))}, {"gpus", gpus},   {"hosts", H},       {"gpus_per_host", per_host},
                {"rule", rule},           {"sharing", k},   {"parts", parts}};
  return p;
}

}  // namespace peerplan
