#pragma once
// PEERPLAN_HD marks plain C++ functions that the executor's kernels call too (the routing model, the
// decode split, the MXFP4 decode): __host__ __device__ under nvcc, nothing elsewhere, so planner/ stays
// free of CUDA (DESIGN.md) while both sides share one definition of each.
#if defined(__CUDACC__)
#define PEERPLAN_HD __host__ __device__
#else
#define PEERPLAN_HD
#endif
