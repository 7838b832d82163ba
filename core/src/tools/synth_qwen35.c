/* qwen35 synthetic models (kiln/synth.h): the keys and block tensors that
 * llama.cpp's converter writes for a Qwen3.5 checkpoint (conversion/qwen.py,
 * Qwen3_5TextModel; names from gguf-py's tensor map), with the stored
 * forms it produces: offset RMSNorm weights already 1 + w, ssm_a =
 * -exp(A_log), the conv kernel [K, channels] in F32, every 1-D tensor F32.
 * The value heads' order is whatever the file says (tiled, for llama.cpp):
 * the weights are random, so only a reader of the file can tell. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synth_internal.h"

/* Norm weights stay in [0.5, 2], where w - 1 + 1 is exact in f32 (a
 * converter's round trip through transformers' offset form). */
#define NORM_LO 0.5
#define NORM_HI 2.0
/* ssm_a = -exp(u) with |u| <= 0.9: there exp is finer than f32's grid, so
 * some f32 A_log gives each a exactly (make_golden_qwen35.py finds it). */
#define A_LOG_MAX 0.9

static bool is_recurrent(const kiln_synth_options *o, uint32_t l) {
  if (o->layer_pattern) return o->layer_pattern[l] == 'R';
  return (l + 1) % o->full_attn_interval != 0;
}

/* The full_attention_interval to write beside the layers: the options'
 * without a pattern; with one, the interval the pattern follows (every
 * Nth block full attention), or 0 (none written) when it follows none, as
 * the loader refuses an interval that contradicts the array. */
static uint32_t interval_of(const kiln_synth_options *o) {
  if (!o->layer_pattern) return o->full_attn_interval;
  for (uint32_t every = 1; every <= o->n_layer + 1; every++) {
    bool agrees = true;
    for (uint32_t l = 0; l < o->n_layer && agrees; l++)
      agrees = is_recurrent(o, l) == ((l + 1) % every != 0);
    if (agrees) return every;
  }
  return 0;
}

kiln_status kiln__synth_qwen35_check(const kiln_synth_options *o) {
  if (!o->ssm_conv || !o->ssm_groups || !o->ssm_heads || !o->ssm_state || !o->ssm_head_v)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "synth: qwen35 needs ssm conv, groups, heads, state and "
                                                         "head_v > 0");
  if (o->ssm_conv < 2)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "synth: ssm conv width %u must be >= 2", o->ssm_conv);
  if (o->ssm_heads % o->ssm_groups)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "synth: ssm heads %u is not a multiple of groups %u",
                           o->ssm_heads, o->ssm_groups);
  if (o->layer_pattern) {
    if (strlen(o->layer_pattern) != o->n_layer || strspn(o->layer_pattern, "RF") != o->n_layer)
      return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                             "synth: layer pattern \"%s\" must be %u letters R or F", o->layer_pattern, o->n_layer);
  } else if (!o->full_attn_interval) {
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "synth: qwen35 needs a layer pattern or an interval");
  }
  int64_t sum = 0;
  for (int i = 0; i < 4; i++) {
    if (o->rope_sections[i] < 0)
      return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "synth: rope section %d is negative", i);
    sum += o->rope_sections[i];
  }
  /* in rotated pairs, as the loader checks (qwen35_hparams.c) */
  uint32_t head_dim = o->head_dim ? o->head_dim : o->n_embd / o->n_head;
  uint32_t n_rot = o->n_rot ? o->n_rot : head_dim;
  if (sum < 1 || sum > n_rot / 2)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "synth: rope sections sum to %lld; want 1..n_rot / 2 = %u (they count rotated pairs)",
                           (long long)sum, n_rot / 2);
  return NULL;
}

kiln_status kiln__synth_qwen35_keys(kiln__synth *s) {
  const kiln_synth_options *o = s->o;
  char key[128];
  snprintf(key, sizeof key, "%s.rope.dimension_sections", s->arch);
  KILN_RETURN_IF_ERROR(kiln_gguf_writer_set_arr_i32(s->w, key, o->rope_sections, 4));
  KILN_RETURN_IF_ERROR(kiln__synth_set_u32(s, "ssm.conv_kernel", o->ssm_conv));
  KILN_RETURN_IF_ERROR(kiln__synth_set_u32(s, "ssm.state_size", o->ssm_state));
  KILN_RETURN_IF_ERROR(kiln__synth_set_u32(s, "ssm.group_count", o->ssm_groups));
  KILN_RETURN_IF_ERROR(kiln__synth_set_u32(s, "ssm.time_step_rank", o->ssm_heads));
  KILN_RETURN_IF_ERROR(kiln__synth_set_u32(s, "ssm.inner_size", o->ssm_heads * o->ssm_head_v));
  bool *rec = malloc(o->n_layer * sizeof *rec);
  if (!rec) return kiln_status_new(KILN_STATUS_NO_MEMORY, "synth: layer pattern");
  for (uint32_t l = 0; l < o->n_layer; l++) rec[l] = is_recurrent(o, l);
  snprintf(key, sizeof key, "%s.attention.recurrent_layers", s->arch);
  kiln_status st = kiln_gguf_writer_set_arr(s->w, key, KILN_GGUF_BOOL, rec, o->n_layer);
  free(rec);
  KILN_RETURN_IF_ERROR(st);
  /* The converter writes the interval even when layer_types decide (and
   * the two agree). */
  const uint32_t every = interval_of(o);
  return every ? kiln__synth_set_u32(s, "full_attention_interval", every) : NULL;
}

typedef enum kind { MATRIX, NORM, CONV, DT_BIAS, A } kind;

typedef struct tspec {
  const char *suffix;
  int64_t ne0, ne1;
  kind k;
} tspec;

/* ssm_a: -exp(u), u ~ N(0, 0.5²) clamped to ±A_LOG_MAX. */
static kiln_status add_a(kiln__synth *s, const char *name, int64_t n) {
  float *v = malloc((size_t)n * sizeof *v);
  if (!v) return kiln_status_new(KILN_STATUS_NO_MEMORY, "synth: %s", name);
  for (int64_t i = 0; i < n; i++) {
    double u = 0.5 * kiln__synth_normal(&s->r);
    u = u < -A_LOG_MAX ? -A_LOG_MAX : u > A_LOG_MAX ? A_LOG_MAX : u;
    v[i] = (float)-exp(u);
  }
  int64_t ne[1] = {n};
  kiln_status st = kiln_gguf_writer_add_tensor_raw(s->w, name, KILN_TYPE_F32, 1, ne, v, (uint64_t)n * sizeof *v);
  free(v);
  return st;
}

static kiln_status add(kiln__synth *s, uint32_t l, const tspec *t) {
  char name[96];
  snprintf(name, sizeof name, "blk.%u.%s", l, t->suffix);
  switch (t->k) {
  case MATRIX:
    return kiln__synth_add(s, name, s->o->matrix_type, true, t->ne0, t->ne1, 1.0 / sqrt((double)t->ne0), 0.0, 0.0,
                           0.0, NULL, 0);
  case NORM:
    return kiln__synth_add(s, name, KILN_TYPE_F32, false, t->ne0, 1, 0.1, 1.0, NORM_LO, NORM_HI, NULL, 0);
  case CONV:
    return kiln__synth_add(s, name, KILN_TYPE_F32, true, t->ne0, t->ne1, 1.0 / sqrt((double)t->ne0), 0.0, 0.0, 0.0,
                           NULL, 0);
  case DT_BIAS:
    return kiln__synth_add(s, name, KILN_TYPE_F32, false, t->ne0, 1, 1.0, 0.0, 0.0, 0.0, NULL, 0);
  case A: return add_a(s, name, t->ne0);
  }
  return NULL;
}

kiln_status kiln__synth_qwen35_blocks(kiln__synth *s) {
  const kiln_synth_options *o = s->o;
  const int64_t E = o->n_embd, F = o->n_ff, hd = o->head_dim ? o->head_dim : o->n_embd / o->n_head;
  const int64_t qw = hd * o->n_head, kvw = hd * o->n_head_kv;
  const int64_t Hv = o->ssm_heads, kd = (int64_t)o->ssm_groups * o->ssm_state, vd = Hv * o->ssm_head_v;
  const int64_t conv = 2 * kd + vd, K = o->ssm_conv;
  for (uint32_t l = 0; l < o->n_layer; l++) {
    const tspec recurrent[] = {
        {"attn_qkv.weight", E, conv, MATRIX}, {"attn_gate.weight", E, vd, MATRIX},
        {"ssm_conv1d.weight", K, conv, CONV}, {"ssm_dt.bias", Hv, 1, DT_BIAS},
        {"ssm_a", Hv, 1, A},                  {"ssm_alpha.weight", E, Hv, MATRIX},
        {"ssm_beta.weight", E, Hv, MATRIX},   {"ssm_norm.weight", o->ssm_head_v, 1, NORM},
        {"ssm_out.weight", vd, E, MATRIX},
    };
    const tspec full[] = {
        {"attn_q.weight", E, 2 * qw, MATRIX}, {"attn_k.weight", E, kvw, MATRIX},
        {"attn_v.weight", E, kvw, MATRIX},    {"attn_output.weight", qw, E, MATRIX},
        {"attn_q_norm.weight", hd, 1, NORM},  {"attn_k_norm.weight", hd, 1, NORM},
    };
    const tspec ffn[] = {
        {"post_attention_norm.weight", E, 1, NORM}, {"ffn_gate.weight", E, F, MATRIX},
        {"ffn_up.weight", E, F, MATRIX},            {"ffn_down.weight", F, E, MATRIX},
    };
    const tspec norm = {"attn_norm.weight", E, 1, NORM};
    KILN_RETURN_IF_ERROR(add(s, l, &norm));
    const bool rec = is_recurrent(o, l);
    const tspec *mix = rec ? recurrent : full;
    size_t n_mix = rec ? sizeof recurrent / sizeof recurrent[0] : sizeof full / sizeof full[0];
    for (size_t i = 0; i < n_mix; i++) KILN_RETURN_IF_ERROR(add(s, l, &mix[i]));
    for (size_t i = 0; i < sizeof ffn / sizeof ffn[0]; i++) KILN_RETURN_IF_ERROR(add(s, l, &ffn[i]));
  }
  return NULL;
}
