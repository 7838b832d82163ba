/* The gemm modes ([<plugin>] gemm): their names and operand forms, which
 * GEMM each batched MUL_MAT takes, and the line that says so
 * (describe_modes). Two steps lead from [<plugin>] gemm to a node's GEMM:
 * the device (open() runs kiln_cuda_gemm_on_device: fp8 needs compute
 * capability 9.0, the tf32, bf16 and int8 tensor-core modes 8.0), then the node
 * (prepare() runs kiln_cuda_gemm_of_node: under recurrent_guard = f32 a
 * GEMM whose output feeds a recurrent state takes f32; q16mma's mmq takes
 * only the weights it has a decoder for, with K in whole 128s; the rest
 * take bf16x3). prepare() keeps each node's answer in its state, the run path
 * (kiln_cuda_mul_mat_gemm) dispatches on that answer alone, and
 * describe_modes counts those, so the line says what runs, not what was
 * configured: a user who asks for q16mma sees that 2 of 198 GEMMs take
 * bf16x3. No CUDA call here: test_cuda_gemm_modes checks the
 * choices and the line for devices this machine need not have. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>

#include "cuda_backend.h"

const char *kiln_cuda_gemm_name(kiln_cuda_gemm_mode g) {
  switch (g) {
  case KILN_CUDA_GEMM_F32: return "f32";
  case KILN_CUDA_GEMM_TF32: return "tf32";
  case KILN_CUDA_GEMM_BF16: return "bf16";
  case KILN_CUDA_GEMM_BF16X3: return "bf16x3";
  case KILN_CUDA_GEMM_Q16MMA: return "q16mma";
  case KILN_CUDA_GEMM_FP8: return "fp8";
  case KILN_CUDA_GEMM_TF32X3: return "tf32x3";
  }
  return "?";
}

const char *kiln_cuda_gemm_operand(kiln_cuda_gemm_mode g) {
  return g == KILN_CUDA_GEMM_BF16                                      ? "bf16"
         : g == KILN_CUDA_GEMM_BF16X3 || g == KILN_CUDA_GEMM_Q16MMA ? "bf16x3"
         : g == KILN_CUDA_GEMM_TF32X3                               ? "tf32x3"
         : g == KILN_CUDA_GEMM_FP8                                  ? "fp8"
                                                                      : "f32";
}

unsigned kiln_cuda_gemm_terms(kiln_cuda_gemm_mode g) {
  return g == KILN_CUDA_GEMM_BF16 ? 1u
         : g == KILN_CUDA_GEMM_BF16X3 || g == KILN_CUDA_GEMM_Q16MMA || g == KILN_CUDA_GEMM_TF32X3
             ? 3u
             : 0u;
}

unsigned kiln_cuda_gemm_term_bytes(kiln_cuda_gemm_mode g) {
  return g == KILN_CUDA_GEMM_TF32X3 ? 4u : 2u;
}

int kiln_cuda_gemm_cc_needed(kiln_cuda_gemm_mode g) {
  switch (g) {
  case KILN_CUDA_GEMM_FP8: return 9;
  case KILN_CUDA_GEMM_BF16: case KILN_CUDA_GEMM_BF16X3: case KILN_CUDA_GEMM_Q16MMA:
  case KILN_CUDA_GEMM_TF32: case KILN_CUDA_GEMM_TF32X3: return 8;
  case KILN_CUDA_GEMM_F32: return 0;
  }
  return 0;
}

const char *kiln_cuda_gemm_cc_what(kiln_cuda_gemm_mode g) {
  switch (g) {
  case KILN_CUDA_GEMM_FP8: return "FP8 tensor cores with per-row scale vectors in cuBLASLt";
  case KILN_CUDA_GEMM_Q16MMA: return "int8 tensor cores";
  case KILN_CUDA_GEMM_BF16: case KILN_CUDA_GEMM_BF16X3: return "bf16 tensor cores";
  case KILN_CUDA_GEMM_TF32: case KILN_CUDA_GEMM_TF32X3: return "TF32 tensor cores";
  case KILN_CUDA_GEMM_F32: return "";
  }
  return "";
}

kiln_cuda_gemm_mode kiln_cuda_gemm_below(kiln_cuda_gemm_mode g) {
  /* Ada's cuBLASLt scales FP8 per tensor only: bf16x3 keeps fp8's place
   * at parity's accuracy where bf16 tensor cores exist */
  return g == KILN_CUDA_GEMM_FP8 ? KILN_CUDA_GEMM_BF16X3 : KILN_CUDA_GEMM_F32;
}

kiln_cuda_gemm_mode kiln_cuda_gemm_on_device(kiln_cuda_gemm_mode asked, int cc_major) {
  kiln_cuda_gemm_mode g = asked;
  while (cc_major < kiln_cuda_gemm_cc_needed(g)) g = kiln_cuda_gemm_below(g);
  return g;
}

kiln_cuda_gemm_mode kiln_cuda_gemm_of_node(kiln_cuda_gemm_mode g, bool recurrent_guard,
                                           const kiln_node *node, kiln_cuda_mmq_fit *out_why) {
  kiln_cuda_mmq_fit why = KILN_CUDA_MMQ_FITS;
  /* What the decode matvecs do under the guard (exact f32 columns), the
   * prefill GEMMs do too: on the Qwen3.5-9B shape bf16x3 alone put 8 of
   * 11016 rows past parity's 1e-3 (blk.22.ssm_gated, position 2: 1.01e-3;
   * H100, 2026-12-07), the f32 GEMM passed. */
  if (recurrent_guard && g != KILN_CUDA_GEMM_F32 && node->op == KILN_OP_MUL_MAT &&
      node->p.mul_mat.feeds_recurrent) {
    if (out_why) *out_why = KILN_CUDA_GEMM_GUARDED;
    return KILN_CUDA_GEMM_F32;
  }
  if (g == KILN_CUDA_GEMM_Q16MMA) why = kiln_cuda_mmq_fit_of(node);
  if (out_why) *out_why = why;
  return why == KILN_CUDA_MMQ_FITS ? g : KILN_CUDA_GEMM_BF16X3;
}

void kiln_cuda_gemm_tally_add(kiln_cuda_gemm_tally *t, kiln_cuda_gemm_mode g, kiln_cuda_mmq_fit why,
                              kiln_type w) {
  t->total++;
  if (why == KILN_CUDA_GEMM_GUARDED) t->guarded++;
  const bool known = (unsigned)w < KILN_TYPE_COUNT;
  if ((unsigned)g < KILN_CUDA_GEMM_MODES) {
    t->by_mode[g]++;
    if (known) t->by_type[g][w]++;
  }
  if (!known) return;
  if (why == KILN_CUDA_MMQ_K) t->mmq_k[w]++;
  else if (why == KILN_CUDA_MMQ_TYPE) t->mmq_type[w]++;
}

/* Appends to out[*used..cap) as snprintf does, *used stopping at the end. */
static void put(char *out, size_t cap, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *out, size_t cap, size_t *used, const char *fmt, ...) {
  if (*used + 1 >= cap) return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(out + *used, cap - *used, fmt, ap);
  va_end(ap);
  if (w > 0) *used = (size_t)w < cap - *used ? *used + (size_t)w : cap - 1;
}

/* " (Q4_K 168, Q6_K 28)": mode m's GEMMs by weight type. */
static void put_types(char *out, size_t cap, size_t *used, const kiln_cuda_gemm_tally *t, int m) {
  const char *sep = " (";
  for (int ty = 0; ty < KILN_TYPE_COUNT; ty++) {
    if (!t->by_type[m][ty]) continue;
    put(out, cap, used, "%s%s %u", sep, kiln_type_name((kiln_type)ty), t->by_type[m][ty]);
    sep = ", ";
  }
  if (sep[0] == ',') put(out, cap, used, ")");
}

/* " (F16 2: no mmq decoder, Q8_0 1: K % 128 != 0)": why mmq left the
 * GEMMs it left, by weight type. */
static void put_mmq_causes(char *out, size_t cap, size_t *used, const kiln_cuda_gemm_tally *t) {
  const char *sep = " (";
  for (int ty = 0; ty < KILN_TYPE_COUNT; ty++) {
    const char *name = kiln_type_name((kiln_type)ty);
    if (t->mmq_type[ty]) put(out, cap, used, "%s%s %u: no mmq decoder", sep, name, t->mmq_type[ty]);
    if (t->mmq_type[ty]) sep = ", ";
    if (t->mmq_k[ty]) put(out, cap, used, "%s%s %u: K %% 128 != 0", sep, name, t->mmq_k[ty]);
    if (t->mmq_k[ty]) sep = ", ";
  }
  if (sep[0] == ',') put(out, cap, used, ")");
}

void kiln_cuda_gemm_line(kiln_cuda_gemm_mode asked, kiln_cuda_gemm_mode on_device, int cc_major,
                         int cc_minor, const kiln_cuda_gemm_tally *t, char *out, size_t cap) {
  size_t used = 0;
  if (!cap) return;
  out[0] = '\0';
  put(out, cap, &used, "gemm %s", kiln_cuda_gemm_name(asked));
  if (on_device != asked)
    put(out, cap, &used, " -> %s (compute capability %d.%d < %d.0)", kiln_cuda_gemm_name(on_device),
        cc_major, cc_minor, kiln_cuda_gemm_cc_needed(asked));
  if (!t->total) {
    put(out, cap, &used, ": no batched GEMMs prepared");
    return;
  }
  put(out, cap, &used, ": %u batched GEMM%s: %u %s", t->total, t->total == 1 ? "" : "s",
      t->by_mode[on_device], kiln_cuda_gemm_name(on_device));
  put_types(out, cap, &used, t, on_device);
  /* q16mma's other GEMM is bf16x3, for the weights mmq leaves: said even
   * when none, since that is what a user of q16mma asks */
  const bool q16 = on_device == KILN_CUDA_GEMM_Q16MMA;
  if (q16) {
    put(out, cap, &used, ", %u bf16x3 fallback", t->by_mode[KILN_CUDA_GEMM_BF16X3]);
    put_mmq_causes(out, cap, &used, t);
  }
  /* the other modes that ran: f32 where recurrent_guard took a node
   * (said so), and any other would be counted rather than lost */
  for (int m = 0; m < KILN_CUDA_GEMM_MODES; m++) {
    if (m == (int)on_device || !t->by_mode[m] || (q16 && m == KILN_CUDA_GEMM_BF16X3)) continue;
    put(out, cap, &used, ", %u %s", t->by_mode[m], kiln_cuda_gemm_name((kiln_cuda_gemm_mode)m));
    put_types(out, cap, &used, t, m);
    if (m == KILN_CUDA_GEMM_F32 && t->guarded) put(out, cap, &used, " by recurrent_guard");
  }
}
