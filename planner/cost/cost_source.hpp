#pragma once
// Where a priced figure came from, so every number in an output can be traced back.
#include <string>

namespace peerplan {

enum class CostSource {
  Measured,      // a measured point of this very shape/size on this machine
  Interpolated,  // between measured points (log-size for transfers, m for GEMMs, work for attention)
  Extrapolated,  // beyond the measured range: alpha-beta fit (transfers) or scaled from the nearest point
  Fitted,        // no point of this shape: a model fitted to this machine's own measured shapes
                 // (GEMM / attention efficiency of the nearest measured shapes, fitted_compute.hpp)
  Derived,       // from measured peaks or the graph: a roofline on measured HBM bandwidth, a ring
                 // estimate over measured-or-nominal links
  Nominal,       // from nominal specs only (datasheet peaks, link rates): a hypothetical machine
};
inline constexpr int kCostSourceCount = 6;

const char* to_string(CostSource s);
// The less trustworthy of two sources (an op priced from two parts inherits the weaker).
CostSource weaker(CostSource a, CostSource b);

}  // namespace peerplan
