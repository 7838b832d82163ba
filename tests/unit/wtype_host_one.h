/* One weight type's decoders of wtype_common.cuh (backends/cuda-common/
 * kernels) for the host, for test_wtype_host.cc: included inside a
 * namespace of their own after `#define KILN_WT_<TYPE> 1`, as
 * wtype_select.cuh bakes it on the device. Not a header of its own: no
 * include guard. */
#include "wtype_common.cuh.tmpl"

/* Value i of a row (kiln_wt_get). */
static float get(const kiln_u8 *row, long long i) { return kiln_wt_get(row, i); }

/* Values i0 .. i0 + 7 of a row (kiln_wt_get8, block types only): false
 * for a plain type, which has none. */
static bool get8(const kiln_u8 *row, long long i0, float y[8]) {
#if KILN_WT_QUANT
  kiln_wt_get8(row, i0, y);
  return true;
#else
  (void)row, (void)i0, (void)y;
  return false;
#endif
}

static const long long row_bytes_256 = KILN_WT_ROW_BYTES(256);

#undef KILN_WT_BLOCK
#undef KILN_WT_BYTES
#undef KILN_WT_QUANT
#undef KILN_WT_ROW_BYTES
