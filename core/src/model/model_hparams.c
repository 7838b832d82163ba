/* Hyperparameters from the `<arch>.*` GGUF keys (llama.cpp's converter
 * writes them; names per the GGUF spec, "LLM" section). */
#include "config.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kiln/half.h"
#include "model_internal.h"

static kiln_status get_u32(const kiln_gguf *g, const char *arch, const char *suffix, uint32_t *out) {
  char key[128];
  snprintf(key, sizeof key, "%s.%s", arch, suffix);
  return kiln_gguf_get_u32(g, key, out);
}

/* An optional key: *out_absent is set when the key is missing; any other
 * problem (wrong type) is an error. */
static kiln_status get_u32_opt(const kiln_gguf *g, const char *arch, const char *suffix, uint32_t *out,
                               bool *out_absent) {
  char key[128];
  snprintf(key, sizeof key, "%s.%s", arch, suffix);
  *out_absent = kiln_gguf_find_kv(g, key) == NULL;
  return *out_absent ? NULL : kiln_gguf_get_u32(g, key, out);
}

static kiln_status get_f32_opt(const kiln_gguf *g, const char *arch, const char *suffix, float *out,
                               bool *out_absent) {
  char key[128];
  snprintf(key, sizeof key, "%s.%s", arch, suffix);
  *out_absent = kiln_gguf_find_kv(g, key) == NULL;
  return *out_absent ? NULL : kiln_gguf_get_f32(g, key, out);
}

kiln_status kiln__hparams_read(const kiln_gguf *g, const kiln__arch *arch, kiln_hparams *hp) {
  memset(hp, 0, sizeof *hp);
  hp->arch = arch->id;
  snprintf(hp->arch_name, sizeof hp->arch_name, "%s", arch->name);
  const char *a = hp->arch_name;
  arch->configure(hp);

  KILN_RETURN_IF_ERROR(get_u32(g, a, "context_length", &hp->n_ctx_train));
  KILN_RETURN_IF_ERROR(get_u32(g, a, "embedding_length", &hp->n_embd));
  KILN_RETURN_IF_ERROR(get_u32(g, a, "block_count", &hp->n_layer));
  KILN_RETURN_IF_ERROR(get_u32(g, a, "feed_forward_length", &hp->n_ff));
  KILN_RETURN_IF_ERROR(get_u32(g, a, "attention.head_count", &hp->n_head));
  char key[128];
  snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", a);
  KILN_RETURN_IF_ERROR(kiln_gguf_get_f32(g, key, &hp->eps));

  /* Defaults the GGUF spec gives: head_count_kv = head_count. */
  KILN_RETURN_IF_ERROR(get_u32_opt(g, a, "attention.head_count_kv", &hp->n_head_kv, &hp->n_head_kv_default));
  if (hp->n_head_kv_default) hp->n_head_kv = hp->n_head;

  if (hp->n_head == 0 || hp->n_embd == 0 || hp->n_layer == 0 || hp->n_ff == 0 || hp->n_head_kv == 0)
    return kiln_status_new(KILN_STATUS_MALFORMED,
                           "%s: a zero size among embedding_length %u, block_count %u, "
                           "feed_forward_length %u, head_count %u, head_count_kv %u",
                           a, hp->n_embd, hp->n_layer, hp->n_ff, hp->n_head, hp->n_head_kv);
  if (hp->n_head % hp->n_head_kv != 0)
    return kiln_status_new(KILN_STATUS_MALFORMED,
                           "%s.attention.head_count %u is not a multiple of head_count_kv %u", a,
                           hp->n_head, hp->n_head_kv);

  /* llama.cpp: key_length defaults to n_embd / n_head. */
  KILN_RETURN_IF_ERROR(get_u32_opt(g, a, "attention.key_length", &hp->head_dim, &hp->head_dim_default));
  if (hp->head_dim_default) {
    if (hp->n_embd % hp->n_head != 0)
      return kiln_status_new(KILN_STATUS_MALFORMED,
                             "%s.embedding_length %u is not a multiple of head_count %u and "
                             "attention.key_length is absent",
                             a, hp->n_embd, hp->n_head);
    hp->head_dim = hp->n_embd / hp->n_head;
  }
  uint32_t vlen;
  bool vlen_absent;
  KILN_RETURN_IF_ERROR(get_u32_opt(g, a, "attention.value_length", &vlen, &vlen_absent));
  if (!vlen_absent && vlen != hp->head_dim)
    return kiln_status_new(KILN_STATUS_UNSUPPORTED,
                           "%s.attention.value_length %u differs from key_length %u", a, vlen,
                           hp->head_dim);

  /* llama.cpp: rope.dimension_count defaults to the head dimension. */
  KILN_RETURN_IF_ERROR(get_u32_opt(g, a, "rope.dimension_count", &hp->n_rot, &hp->n_rot_default));
  if (hp->n_rot_default) hp->n_rot = hp->head_dim;
  if (hp->n_rot == 0 || hp->n_rot % 2 || hp->n_rot > hp->head_dim)
    return kiln_status_new(KILN_STATUS_MALFORMED,
                           "%s.rope.dimension_count %u must be even and in 2..head_dim (%u)", a,
                           hp->n_rot, hp->head_dim);

  /* θ: llama's reference code uses 10000 when the key is absent (the GGUF
   * spec's default). Qwen models were trained with other θ (1e6), so a qwen
   * file without the key is refused rather than run with the wrong θ. */
  KILN_RETURN_IF_ERROR(get_f32_opt(g, a, "rope.freq_base", &hp->rope_theta, &hp->theta_default));
  if (hp->theta_default) {
    if (!arch->theta_may_default)
      return kiln_status_new(KILN_STATUS_NOT_FOUND,
                             "%s.rope.freq_base is missing: a %s model's RoPE θ must be in the file", a, a);
    hp->rope_theta = 10000.0f;
  }
  if (!(hp->rope_theta > 0.0f) || !isfinite(hp->rope_theta))
    return kiln_status_new(KILN_STATUS_MALFORMED, "%s.rope.freq_base = %g: must be finite and > 0", a,
                           (double)hp->rope_theta);
  if (!(hp->eps > 0.0f) || !isfinite(hp->eps))
    return kiln_status_new(KILN_STATUS_MALFORMED, "%s.attention.layer_norm_rms_epsilon = %g: must be finite and > 0",
                           a, (double)hp->eps);
  if (hp->n_ctx_train == 0)
    return kiln_status_new(KILN_STATUS_MALFORMED, "%s.context_length is 0", a);
  return arch->read_hparams ? arch->read_hparams(g, hp) : NULL;
}

static const char *dflt(bool d) { return d ? " (default)" : ""; }

/* qwen35: the linear-attention shape, the layer pattern, the rotary
 * sections, and the ε of every norm kind (one key in the file, each kind
 * listed with its bits so a reader sees what every kernel bakes). */
static void print_hybrid(const kiln_hparams *hp, FILE *out) {
  fprintf(out, "rope_sections  = [%d, %d, %d, %d] (interleaved MRoPE, in rotated pairs)\n",
          (int)hp->rope_sections[0], (int)hp->rope_sections[1], (int)hp->rope_sections[2],
          (int)hp->rope_sections[3]);
  fprintf(out, "ssm_d_conv     = %" PRIu32 " (conv width)\n", hp->ssm_d_conv);
  fprintf(out, "ssm_n_group    = %" PRIu32 " (q/k heads)\n", hp->ssm_n_group);
  fprintf(out, "ssm_dt_rank    = %" PRIu32 " (value heads)\n", hp->ssm_dt_rank);
  fprintf(out, "ssm_d_state    = %" PRIu32 " (key head dim)\n", hp->ssm_d_state);
  fprintf(out, "ssm_d_inner    = %" PRIu32 " (value head dim %" PRIu32 ")\n", hp->ssm_d_inner,
          hp->ssm_dt_rank ? hp->ssm_d_inner / hp->ssm_dt_rank : 0);
  if (hp->full_attn_interval)
    fprintf(out, "full_attn_every= %" PRIu32 "%s\n", hp->full_attn_interval,
            hp->pattern_from_array ? " (the recurrent_layers array agrees)" : "");
  fprintf(out, "layers         = %" PRIu32 " recurrent, %" PRIu32 " full attention: ", hp->n_recurrent,
          hp->n_layer - hp->n_recurrent);
  for (uint32_t l = 0; l < hp->n_layer; l++) fputc(hp->recurrent[l] ? 'R' : 'F', out);
  fprintf(out, " (%s)\n", hp->pattern_from_array ? "attention.recurrent_layers" : "full_attention_interval");
  if (hp->n_nextn) fprintf(out, "nextn_layers   = %" PRIu32 " (MTP draft blocks: accepted, not run)\n", hp->n_nextn);
  static const char *kinds[] = {"attn_norm", "post_attention_norm", "output_norm", "attn_q_norm",
                                "attn_k_norm", "ssm_norm (gated)", "q/k l2 (linear attn)"};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    fprintf(out, "eps %-21s= %.9g (f32 0x%08x)\n", kinds[i], (double)hp->eps, kiln_f32_to_bits(hp->eps));
}

void kiln_hparams_print(const kiln_hparams *hp, FILE *out) {
  fprintf(out, "arch           = %s\n", hp->arch_name);
  fprintf(out, "n_vocab        = %" PRIu32 "\n", hp->n_vocab);
  fprintf(out, "n_ctx_train    = %" PRIu32 "\n", hp->n_ctx_train);
  fprintf(out, "n_embd         = %" PRIu32 "\n", hp->n_embd);
  fprintf(out, "n_layer        = %" PRIu32 "\n", hp->n_layer);
  fprintf(out, "n_ff           = %" PRIu32 "\n", hp->n_ff);
  fprintf(out, "n_head         = %" PRIu32 "\n", hp->n_head);
  fprintf(out, "n_head_kv      = %" PRIu32 "%s (GQA %u:1)\n", hp->n_head_kv, dflt(hp->n_head_kv_default),
          hp->n_head / hp->n_head_kv);
  fprintf(out, "head_dim       = %" PRIu32 "%s\n", hp->head_dim, dflt(hp->head_dim_default));
  fprintf(out, "eps            = %.9g (f32 0x%08x)\n", (double)hp->eps, kiln_f32_to_bits(hp->eps));
  fprintf(out, "rope_theta     = %.9g (f32 0x%08x)%s\n", (double)hp->rope_theta,
          kiln_f32_to_bits(hp->rope_theta), dflt(hp->theta_default));
  fprintf(out, "rope_mode      = %s\n", hp->rope_mode == KILN_ROPE_NEOX     ? "neox"
                                         : hp->rope_mode == KILN_ROPE_IMROPE ? "imrope (neox pairs, sectioned)"
                                                                             : "norm");
  fprintf(out, "n_rot          = %" PRIu32 "%s\n", hp->n_rot, dflt(hp->n_rot_default));
  fprintf(out, "qkv_bias       = %s\n", hp->qkv_bias ? "yes" : "no");
  fprintf(out, "qk_norm        = %s\n", hp->qk_norm ? "yes" : "no");
  fprintf(out, "tied_output    = %s\n", hp->tied_output ? "yes (output = token_embd.weight)" : "no");
  if (hp->hybrid) print_hybrid(hp, out);
}
