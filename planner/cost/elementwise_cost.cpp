#include "planner/cost/elementwise_cost.hpp"

#include <algorithm>

namespace peerplan {

std::string ew_kind_name(EwKind k) {
  switch (k) {
    case EwKind::None: return "";
    case EwKind::RmsNorm: return "rms_norm";
    case EwKind::QkNorm: return "qk_norm";
    case EwKind::Rotary: return "rotary";
    case EwKind::MlaRotary: return "mla_rotary";
    case EwKind::Residual: return "residual";
    case EwKind::Act: return "act";
    case EwKind::MoeRoute: return "moe_route";
    case EwKind::MoeCombine: return "moe_combine";
    case EwKind::AddRmsNorm: return "add_rms_norm";
  }
  return "";
}

namespace {

// The curve of (kind, cols): the op's own GPU first, else any GPU's points (the profiler times GPU 0
// only; the GPUs of one host are the same part), as the GEMM and grouped-GEMM tables are looked up.
std::optional<CurveTime> curve_of(const std::vector<ElementwiseTime>& table, int gpu, const std::string& kind,
                                  int64_t cols, int64_t rows) {
  std::vector<CurvePoint> pts;
  for (int pass = 0; pass < 2 && pts.empty(); ++pass)
    for (const ElementwiseTime& e : table)
      if ((pass == 1 || e.gpu == gpu) && e.kind == kind && e.cols == cols && e.time.median > 0) {
        CurvePoint p;
        p.bytes = e.rows;  // the curve's size axis is rows here
        p.time = e.time;
        pts.push_back(p);
      }
  if (pts.empty()) return std::nullopt;
  std::sort(pts.begin(), pts.end(), [](const CurvePoint& a, const CurvePoint& b) { return a.bytes < b.bytes; });
  // Repeated rows (a profile merged with a validate extension): keep the first of each.
  pts.erase(std::unique(pts.begin(), pts.end(), [](const CurvePoint& a, const CurvePoint& b) { return a.bytes == b.bytes; }),
            pts.end());
  return curve_time(pts, double(rows));
}

}  // namespace

std::optional<CurveTime> elementwise_from_table(const std::vector<ElementwiseTime>& table, int gpu, const Op& op) {
  if (op.kind != OpKind::Elementwise || op.ew == EwKind::None || op.ew_rows <= 0 || table.empty()) return std::nullopt;
  if (auto t = curve_of(table, gpu, ew_kind_name(op.ew), op.ew_cols, op.ew_rows)) return t;
  // A fused norm at a width the profile timed only as its two parts (an older profile extended by
  // `profile --add-model` with this executor, whose add_rms_norm rows make it compile fused): the two
  // kernels' sum, at most Interpolated, rather than the bytes' price.
  if (op.ew == EwKind::AddRmsNorm) {
    auto n = curve_of(table, gpu, "rms_norm", op.ew_cols, op.ew_rows);
    auto r = curve_of(table, gpu, "residual", op.ew_cols, op.ew_rows);
    if (n && r) return CurveTime{n->seconds + r->seconds, weaker(weaker(n->source, r->source), CostSource::Interpolated)};
  }
  return std::nullopt;
}

}  // namespace peerplan
