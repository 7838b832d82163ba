/* Host versions of matvec_q_prims.cuh (backends/cuda-common/kernels), for
 * test_matvec_q_host.cc: the same loads, f16 conversion and dp4a of each
 * signedness, in plain C++. Every load checks the alignment the device
 * load needs (a misaligned device load faults), so the decoders' address
 * arithmetic is checked too. Included inside each width's namespace, after
 * act_quant.cuh.tmpl. Not a header of its own: no include guard. */
typedef unsigned char kiln_u8;

static inline void kiln_host_aligned(const void *p, unsigned a, const char *what) {
  if ((uintptr_t)p % a != 0) fail_msg("%s at %p is not %u-byte aligned", what, p, a);
}
static inline unsigned kiln_host_u32(const kiln_u8 *p) {
  return (unsigned)p[0] | (unsigned)p[1] << 8 | (unsigned)p[2] << 16 | (unsigned)p[3] << 24;
}
static inline float kiln_mq_half(unsigned h) { return kiln_f16_to_f32((uint16_t)h); }
static inline uint4 kiln_ldw16(const kiln_u8 *p) {
  kiln_host_aligned(p, 16, "a 16-byte weight load");
  return make_uint4(kiln_host_u32(p), kiln_host_u32(p + 4), kiln_host_u32(p + 8),
                    kiln_host_u32(p + 12));
}
static inline unsigned kiln_ldw_u16(const kiln_u8 *p) {
  kiln_host_aligned(p, 2, "a 2-byte weight load");
  return (unsigned)p[0] | (unsigned)p[1] << 8;
}
static inline unsigned kiln_ldw_u8(const kiln_u8 *p) { return p[0]; }
static inline unsigned kiln_ldw_b2(const kiln_u8 *p) {
  return kiln_ldw_u16(p) | (kiln_ldw_u16(p + 2) << 16);
}
/* Where weight loads may fall, when set (the staged test's weight):
 * a load outside is a failure, as compute-sanitizer would report it. */
static const kiln_u8 *kiln_host_lo, *kiln_host_hi;
static inline void kiln_host_inside(const kiln_u8 *p, int n, const char *what) {
  if (kiln_host_hi && (p < kiln_host_lo || p + n > kiln_host_hi))
    fail_msg("%s of %d bytes at offset %lld is outside the weight's %lld bytes", what, n,
             (long long)(p - kiln_host_lo), (long long)(kiln_host_hi - kiln_host_lo));
}
static inline uint4 kiln_ldw16_guarded(const kiln_u8 *p) {
  kiln_host_inside(p, 16, "a staged 16-byte weight load");
  return kiln_ldw16(p);
}
static inline uint4 kiln_ldw16_tail(const kiln_u8 *p, const kiln_u8 *end) {
  kiln_host_aligned(p, 16, "a staged tail word");
  unsigned v[4] = {0u, 0u, 0u, 0u};
  for (const kiln_u8 *q = p; q < end; q += 2) {
    kiln_host_inside(q, 2, "a staged tail load");
    const int o = (int)(q - p);
    v[o >> 2] |= kiln_ldw_u16(q) << (8 * (o & 3));
  }
  return make_uint4(v[0], v[1], v[2], v[3]);
}
struct kiln_mem_global {
  static uint4 w16(const kiln_u8 *p) { return kiln_ldw16(p); }
  static unsigned u16(const kiln_u8 *p) { return kiln_ldw_u16(p); }
  static unsigned b2(const kiln_u8 *p) { return kiln_ldw_b2(p); }
  static void b2x2(const kiln_u8 *p, unsigned &a, unsigned &b) {
    a = kiln_ldw_b2(p), b = kiln_ldw_b2(p + 4);
  }
};
/* Where shared-memory loads may fall, when set (the staged test's buffer). */
static const kiln_u8 *kiln_host_slo, *kiln_host_shi;
static inline void kiln_host_inside_shared(const kiln_u8 *p, int n) {
  if (kiln_host_shi && (p < kiln_host_slo || p + n > kiln_host_shi))
    fail_msg("a shared load of %d bytes at offset %lld is outside the %lld-byte buffer", n,
             (long long)(p - kiln_host_slo), (long long)(kiln_host_shi - kiln_host_slo));
}
/* Shared memory has the same alignment rules; its bytes are the test's. */
struct kiln_mem_shared {
  static uint4 w16(const kiln_u8 *p) {
    kiln_host_aligned(p, 16, "a 16-byte shared load");
    return make_uint4(kiln_host_u32(p), kiln_host_u32(p + 4), kiln_host_u32(p + 8),
                      kiln_host_u32(p + 12));
  }
  static unsigned u16(const kiln_u8 *p) {
    kiln_host_aligned(p, 2, "a 2-byte shared load");
    return (unsigned)p[0] | (unsigned)p[1] << 8;
  }
  static unsigned b2(const kiln_u8 *p) { return u16(p) | (u16(p + 2) << 16); }
  /* The device's aligned words and permutes; the words read must lie in
   * the test's buffer (kiln_host_lo .. kiln_host_hi when set). */
  static unsigned u32(const kiln_u8 *p) {
    kiln_host_aligned(p, 4, "a 4-byte shared load");
    kiln_host_inside_shared(p, 4);
    return kiln_host_u32(p);
  }
  static void b2x2(const kiln_u8 *p, unsigned &a, unsigned &b) {
    kiln_host_aligned(p, 2, "a 2-byte aligned pair of shared words");
    const uintptr_t u = (uintptr_t)p;
    const kiln_u8 *q = (const kiln_u8 *)(u & ~(uintptr_t)3);
    const unsigned w0 = u32(q), w1 = u32(q + 4);
    const unsigned w2 = u32((const kiln_u8 *)((u + 6) & ~(uintptr_t)3));
    const unsigned sel = (u & 2) ? 0x5432u : 0x3210u;
    a = __byte_perm(w0, w1, sel), b = __byte_perm(w1, w2, sel);
  }
};
static inline unsigned kiln_ldx4(const kiln_u8 *p) {
  kiln_host_aligned(p, 4, "a 4-byte activation load");
  return kiln_host_u32(p);
}
static inline uint2 kiln_ldx8(const kiln_u8 *p) {
  kiln_host_aligned(p, 8, "an 8-byte activation load");
  return make_uint2(kiln_host_u32(p), kiln_host_u32(p + 4));
}
static inline uint4 kiln_ldx16(const kiln_u8 *p) {
  kiln_host_aligned(p, 16, "a 16-byte activation load");
  return make_uint4(kiln_host_u32(p), kiln_host_u32(p + 4), kiln_host_u32(p + 8),
                    kiln_host_u32(p + 12));
}
static inline float2 kiln_ldxs(const kiln_u8 *p) {
  kiln_host_aligned(p, 8, "an activation scale load");
  float2 f;
  memcpy(&f.x, p, 4);
  memcpy(&f.y, p + 4, 4);
  return f;
}
static inline int kiln_ldxi(const kiln_u8 *p) {
  kiln_host_aligned(p, 4, "an activation sum load");
  return (int)kiln_host_u32(p);
}
/* dp4a: c + the sum of the four byte products, each byte signed (s) or
 * unsigned (u) as named. */
static inline int kiln_host_dp4a(unsigned a, unsigned b, int c, bool sa, bool sb) {
  for (int i = 0; i < 4; i++) {
    const int x = sa ? (int)(signed char)(a >> (8 * i)) : (int)((a >> (8 * i)) & 255u);
    const int y = sb ? (int)(signed char)(b >> (8 * i)) : (int)((b >> (8 * i)) & 255u);
    c += x * y;
  }
  return c;
}
static inline int kiln_dp4a_ss(unsigned a, unsigned b, int c) { return kiln_host_dp4a(a, b, c, true, true); }
static inline int kiln_dp4a_su(unsigned a, unsigned b, int c) { return kiln_host_dp4a(a, b, c, true, false); }
static inline int kiln_dp4a_us(unsigned a, unsigned b, int c) { return kiln_host_dp4a(a, b, c, false, true); }
static inline int kiln_dp4a_uu(unsigned a, unsigned b, int c) { return kiln_host_dp4a(a, b, c, false, false); }
