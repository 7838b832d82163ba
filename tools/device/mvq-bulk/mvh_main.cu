/* The matvec_q timing harness (tools/device/mvq-bulk/run.sh): every
 * configuration expand.py made, on random block weights (their f16 scales
 * made finite) several times the L2 in all, copies cycled so no launch
 * finds its weights in L2; x is random bytes in act_quant.cuh's q16 layout.
 * Per configuration: the output against the group's first configuration,
 * bit for bit; the mean time of MVH_REPS (default 200) launches plain and
 * with programmatic dependent launch; and, per group, a plain 16-byte read
 * of the same bytes as the ceiling. Persistent (stages > 0) grids take as
 * many blocks as the multiprocessors hold, as cuda_prepare.c does. */
#include "mvh.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <string>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)
extern void mvh_all(std::vector<mvh_cfg> &v);
static long long row_bytes(int t, int k) {
  switch (t) { case 1: return k / 32 * 18; case 2: return k / 32 * 22; case 3: return k / 32 * 34;
    case 4: return k / 256 * 144; case 5: return k / 256 * 210; } return 0; }
__device__ unsigned hsh(unsigned long long i) { unsigned long long x = i * 0x9E3779B97F4A7C15ull; x ^= x >> 29; x *= 0xBF58476D1CE4E5B9ull; x ^= x >> 32; return (unsigned)x; }
__global__ void fill_rand(unsigned char *p, long long n, unsigned seed) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) p[i] = (unsigned char)hsh(i * 7919 + seed);
}
// valid f16 scales at byte offset off of each block of bsz bytes
__global__ void fix_scales(unsigned char *p, long long nblk, int bsz, int off, int two) {
  for (long long b = blockIdx.x * (long long)blockDim.x + threadIdx.x; b < nblk; b += (long long)gridDim.x * blockDim.x) {
    for (int j = 0; j < two; j++) {
      unsigned h = 0x2000u | (hsh(b * 3 + j) & 0x83FFu);
      p[b * bsz + off + 2 * j] = h & 255; p[b * bsz + off + 2 * j + 1] = h >> 8;
    }
  }
}
__global__ void fill_xq_scales(float *s, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) { s[2 * i] = 1e-4f * (1 + (hsh(i) & 255) / 256.0f); s[2 * i + 1] = ((int)(hsh(i + 99) & 1023) - 512) * 1e-3f; } }
__global__ void fill_xq_isum(int *s, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) s[i] = (int)(hsh(i + 5) & 4095) - 2048; }
__global__ void read_bw(const uint4 *p, long long n, unsigned *out) {
  unsigned acc = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    uint4 v; asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p + i));
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) *out = acc;
}
int main(int argc, char **argv) {
  const char *only = argc > 1 ? argv[1] : nullptr;
  int reps = getenv("MVH_REPS") ? atoi(getenv("MVH_REPS")) : 200;
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  printf("device %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  const long long POOL = 1600ll << 20;
  unsigned char *pool; CK(cudaMalloc(&pool, POOL + 4096));
  cudaStream_t st; CK(cudaStreamCreate(&st));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  unsigned *dummy; CK(cudaMalloc(&dummy, 4));
  { // read ceiling
    long long n = POOL / 16;
    for (int bpsm : {4, 8, 16}) {
      int grid = prop.multiProcessorCount * bpsm;
      read_bw<<<grid, 256, 0, st>>>((const uint4 *)pool, n, dummy);
      CK(cudaEventRecord(e0, st));
      for (int r = 0; r < 10; r++) read_bw<<<grid, 256, 0, st>>>((const uint4 *)pool, n, dummy);
      CK(cudaEventRecord(e1, st)); CK(cudaEventSynchronize(e1));
      float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
      printf("read ceiling, %d blocks/SM x 256: %.3f TB/s\n", bpsm, POOL * 10.0 / (ms * 1e-3) / 1e12);
    }
  }
  std::vector<mvh_cfg> cf; mvh_all(cf);
  std::string cur; std::vector<float> ref; 
  unsigned char *xq = nullptr, *bias = nullptr; float *y = nullptr;
  long long wb[3] = {0, 0, 0}, total = 0, stride = 0; int ncopy = 0;
  for (auto &c : cf) {
    if (only) { bool hit = false; char buf[512]; snprintf(buf, sizeof buf, "%s", only);
      for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) if (!strcmp(t, c.name) || !strcmp(t, c.group)) hit = true;
      if (!hit) continue; }
    if (cur != c.group) { // new group: weights, x, bias
      cur = c.group; ref.clear();
      total = 0; for (int m = 0; m < 3; m++) { wb[m] = row_bytes(c.t[m], c.k) * c.rows[m]; total += (wb[m] + 255) / 256 * 256; }
      stride = total; ncopy = (int)((POOL) / stride); if (ncopy > 64) ncopy = 64; if (ncopy < 1) ncopy = 1;
      fill_rand<<<2048, 256, 0, st>>>(pool, stride * ncopy, 1);
      for (int cp = 0; cp < ncopy; cp++) { long long o = cp * stride; for (int m = 0; m < 3; m++) { if (!c.rows[m]) continue;
          int t = c.t[m]; int bsz = t == 4 ? 144 : t == 5 ? 210 : t == 3 ? 34 : t == 2 ? 22 : 18;
          long long nblk = wb[m] / bsz; fix_scales<<<1024, 256, 0, st>>>(pool + o, nblk, bsz, t == 5 ? 208 : 0, t == 4 ? 2 : 1);
          o += (wb[m] + 255) / 256 * 256; } }
      if (xq) { cudaFree(xq); cudaFree(bias); cudaFree(y); }
      long long xb = (long long)c.k * 2 + c.k / 32 * 8 + c.k / 8 * 4;
      CK(cudaMalloc(&xq, xb + 64)); fill_rand<<<64, 256, 0, st>>>(xq, 2ll * c.k, 7);
      fill_xq_scales<<<(c.k / 32 + 255) / 256, 256, 0, st>>>((float *)(xq + 2ll * c.k), c.k / 32);
      fill_xq_isum<<<(c.k / 8 + 255) / 256, 256, 0, st>>>((int *)(xq + 2ll * c.k + c.k / 32 * 8), c.k / 8);
      CK(cudaMalloc(&bias, 4 * 200000)); fill_rand<<<64, 256, 0, st>>>(bias, 4 * 200000, 3);
      { std::vector<float> hb(200000); for (int i = 0; i < 200000; i++) hb[i] = (i % 17) * 0.01f; CK(cudaMemcpy(bias, hb.data(), 800000, cudaMemcpyHostToDevice)); }
      CK(cudaMalloc(&y, 4ll * (c.rows[0] + c.rows[1] + c.rows[2])));
      CK(cudaStreamSynchronize(st));
      { // the same bytes read by a plain stream, copies cycled, PDL off: what this size can reach
        int grid = prop.multiProcessorCount * 8; long long n = total / 16;
        for (int r = 0; r < 2 * ncopy; r++) read_bw<<<grid, 256, 0, st>>>((const uint4 *)(pool + (r % ncopy) * stride), n, dummy);
        CK(cudaEventRecord(e0, st));
        for (int r = 0; r < reps; r++) read_bw<<<grid, 256, 0, st>>>((const uint4 *)(pool + (r % ncopy) * stride), n, dummy);
        CK(cudaEventRecord(e1, st)); CK(cudaEventSynchronize(e1));
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
        printf("   read of the group's bytes: %.2f us %.2f TB/s\n", ms * 1e3f / reps, total / (ms * 1e-3 / reps) / 1e12);
      }
      printf("== group %s: K=%d rows %d+%d+%d, %.1f MB of weights, %d copies\n", c.group, c.k, c.rows[0], c.rows[1], c.rows[2], total / 1e6, ncopy);
    }
    int grid = (int)c.units;
    if (c.bulk) {
      if (c.smem + 2048 > (long long)prop.sharedMemPerBlockOptin) { printf("%-12s does not fit (smem %lld)\n", c.name, c.smem); continue; }
      if (c.smem > 48 * 1024) CK(cudaFuncSetAttribute(c.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)c.smem));
      int occ = 0; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, c.fn, c.block, c.smem));
      if (occ < 1) { printf("%-12s does not fit (smem %lld)\n", c.name, c.smem); continue; }
      if ((long long)occ * prop.multiProcessorCount < grid) grid = occ * prop.multiProcessorCount;
    }
    auto launch = [&](int cp, int pdl) {
      unsigned char *w0 = pool + cp * stride, *w1 = w0 + (wb[0] + 255) / 256 * 256, *w2 = w1 + (wb[1] + 255) / 256 * 256;
      float *y0 = y, *y1 = y + c.rows[0], *y2 = y1 + c.rows[1];
      const unsigned char *b0 = bias, *b1 = bias + 4 * c.rows[0], *b2 = b1 + 4 * c.rows[1];
      int ncols = 1;
      void *none = nullptr; /* the norm prologue's arguments: norm = none here */
      void *args[] = {&w0, &w1, &w2, &b0, &b1, &b2, &y0, &y1, &y2, &xq, &ncols,
                      &none, &none, &none, &none, &none, &none};
      cudaLaunchConfig_t lc = {}; lc.gridDim = dim3(grid, 1, 1); lc.blockDim = dim3(c.block, 1, 1); lc.dynamicSmemBytes = c.smem; lc.stream = st;
      cudaLaunchAttribute at[1]; at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization; at[0].val.programmaticStreamSerializationAllowed = 1;
      lc.attrs = at; lc.numAttrs = pdl ? 1 : 0;
      CK(cudaLaunchKernelExC(&lc, c.fn, args));
    };
    CK(cudaMemset(y, 0xFF, 4ll * (c.rows[0] + c.rows[1] + c.rows[2])));
    launch(0, 0); CK(cudaStreamSynchronize(st)); CK(cudaGetLastError());
    int n = c.rows[0] + c.rows[1] + c.rows[2];
    std::vector<float> h(n); CK(cudaMemcpy(h.data(), y, 4ll * n, cudaMemcpyDeviceToHost));
    const char *chk = "ref";
    int bad = 0; double md = 0;
    if (ref.empty()) ref = h; else { for (int i = 0; i < n; i++) { if (memcmp(&h[i], &ref[i], 4)) { bad++; double d = fabs(h[i] - ref[i]) / (fabs(ref[i]) + 1e-30); if (d > md) md = d; } } chk = bad ? "DIFF" : "bit-equal"; }
    float us[2];
    for (int pdl = 0; pdl < 2; pdl++) {
      for (int r = 0; r < 2 * ncopy; r++) launch(r % ncopy, pdl);
      CK(cudaEventRecord(e0, st));
      for (int r = 0; r < reps; r++) launch(r % ncopy, pdl);
      CK(cudaEventRecord(e1, st)); CK(cudaEventSynchronize(e1));
      float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); us[pdl] = ms * 1e3f / reps;
    }
    printf("%-12s %6.2f us %5.2f TB/s | pdl %6.2f us %5.2f TB/s | grid %6d x %4d smem %6lld | %s", c.name, us[0], total / (us[0] * 1e-6) / 1e12, us[1], total / (us[1] * 1e-6) / 1e12, grid, c.block, c.smem, chk);
    if (bad) printf(" %d rows, max rel %.3g", bad, md);
    printf("  [%s]\n", c.desc);
  }
  return 0;
}
