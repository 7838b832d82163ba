/* qwen35's own keys (llama.cpp's llama_model_qwen35::load_arch_hparams;
 * the converter's Qwen3NextModel / Qwen3_5TextModel set_gguf_parameters):
 * the linear-attention shape (ssm.*), the interleaved rotary sections, the
 * MTP block count and the layer pattern. Every key llama.cpp requires is
 * required here; a missing one is an error naming it. */
#include "config.h"

#include <stdio.h>

#include "model_internal.h"

static kiln_status key_u32(const kiln_gguf *g, const char *suffix, uint32_t *out) {
  char key[128];
  snprintf(key, sizeof key, "qwen35.%s", suffix);
  KILN_RETURN_IF_ERROR(kiln_gguf_get_u32(g, key, out));
  if (*out == 0) return kiln_status_new(KILN_STATUS_MALFORMED, "%s is 0", key);
  return NULL;
}

/* rope.dimension_sections: up to 4 integers (the converter writes 4), in
 * rotated pairs, not dimensions: ggml's IMROPE gives pair i (of n_rot / 2)
 * the section of i % sum (ggml_mrope_cache_init; transformers'
 * apply_interleaved_mrope splits the n_rot / 2 frequencies by them, so a
 * checkpoint's sections sum to n_rot / 2). A sum past n_rot / 2 names
 * sections no pair reaches: the file is not the model it says. */
static kiln_status read_sections(const kiln_gguf *g, kiln_hparams *hp) {
  const char *key = "qwen35.rope.dimension_sections";
  const kiln_gguf_kv *kv;
  KILN_RETURN_IF_ERROR(kiln_gguf_get_arr(g, key, KILN_GGUF_INT32, &kv));
  if (kv->n < 1 || kv->n > 4)
    return kiln_status_new(KILN_STATUS_MALFORMED, "%s has %llu entries; want 1..4", key,
                           (unsigned long long)kv->n);
  int64_t sum = 0;
  for (uint64_t i = 0; i < kv->n; i++) {
    hp->rope_sections[i] = kiln_gguf_arr_i32(kv, i);
    if (hp->rope_sections[i] < 0)
      return kiln_status_new(KILN_STATUS_MALFORMED, "%s[%llu] = %d is negative", key,
                             (unsigned long long)i, (int)hp->rope_sections[i]);
    sum += hp->rope_sections[i];
  }
  if (sum < 1 || sum > hp->n_rot / 2)
    return kiln_status_new(KILN_STATUS_MALFORMED,
                           "%s sum to %lld; want 1..%u, the rotated pairs (qwen35.rope.dimension_count "
                           "%u / 2): the sections count pairs, not dimensions",
                           key, (long long)sum, hp->n_rot / 2, hp->n_rot);
  return NULL;
}

/* The layer pattern: attention.recurrent_layers when present (one bool per
 * block, MTP blocks included), else every full_attention_interval-th block
 * is full attention, as llama.cpp's loader reads them. Neither: an error
 * (kiln takes no pattern the file does not state). Both: the array decides,
 * and an interval that says otherwise for any trunk block is an error, not
 * ignored: the converter writes both from one config, so a file where they
 * disagree was edited or mis-converted, and kiln cannot tell which is the
 * model it was trained as. */
static kiln_status read_pattern(const kiln_gguf *g, kiln_hparams *hp, uint32_t n_blocks) {
  const char *akey = "qwen35.attention.recurrent_layers", *ikey = "qwen35.full_attention_interval";
  if (kiln_gguf_find_kv(g, ikey)) KILN_RETURN_IF_ERROR(key_u32(g, "full_attention_interval", &hp->full_attn_interval));
  if (kiln_gguf_find_kv(g, akey)) {
    const kiln_gguf_kv *kv;
    KILN_RETURN_IF_ERROR(kiln_gguf_get_arr(g, akey, KILN_GGUF_BOOL, &kv));
    if (kv->n != n_blocks)
      return kiln_status_new(KILN_STATUS_MALFORMED, "%s has %llu entries; block_count is %u", akey,
                             (unsigned long long)kv->n, n_blocks);
    for (uint32_t l = 0; l < hp->n_layer; l++) hp->recurrent[l] = kiln_gguf_arr_bool(kv, l);
    for (uint32_t l = hp->n_layer; l < n_blocks; l++)
      if (kiln_gguf_arr_bool(kv, l))
        return kiln_status_new(KILN_STATUS_MALFORMED, "%s[%u] marks an MTP block recurrent", akey, l);
    hp->pattern_from_array = true;
    for (uint32_t l = 0; hp->full_attn_interval && l < hp->n_layer; l++) {
      const bool by_interval = (l + 1) % hp->full_attn_interval != 0;
      if (by_interval != hp->recurrent[l])
        return kiln_status_new(KILN_STATUS_MALFORMED,
                               "%s = %u contradicts %s: block %u is %s by the interval but %s by the "
                               "array; a file states one layer pattern",
                               ikey, hp->full_attn_interval, akey, l,
                               by_interval ? "recurrent" : "full attention",
                               hp->recurrent[l] ? "recurrent" : "full attention");
    }
  } else if (hp->full_attn_interval) {
    for (uint32_t l = 0; l < hp->n_layer; l++) hp->recurrent[l] = (l + 1) % hp->full_attn_interval != 0;
  } else {
    return kiln_status_new(KILN_STATUS_NOT_FOUND,
                           "%s and %s are both missing: the layer pattern must come from the file",
                           akey, ikey);
  }
  hp->n_recurrent = 0;
  for (uint32_t l = 0; l < hp->n_layer; l++) hp->n_recurrent += hp->recurrent[l];
  return NULL;
}

kiln_status kiln__qwen35_read_hparams(const kiln_gguf *g, kiln_hparams *hp) {
  KILN_RETURN_IF_ERROR(key_u32(g, "ssm.conv_kernel", &hp->ssm_d_conv));
  KILN_RETURN_IF_ERROR(key_u32(g, "ssm.inner_size", &hp->ssm_d_inner));
  KILN_RETURN_IF_ERROR(key_u32(g, "ssm.state_size", &hp->ssm_d_state));
  KILN_RETURN_IF_ERROR(key_u32(g, "ssm.time_step_rank", &hp->ssm_dt_rank));
  KILN_RETURN_IF_ERROR(key_u32(g, "ssm.group_count", &hp->ssm_n_group));
  if (hp->ssm_d_conv < 2)
    return kiln_status_new(KILN_STATUS_MALFORMED, "qwen35.ssm.conv_kernel = %u; want >= 2", hp->ssm_d_conv);
  if (hp->ssm_dt_rank % hp->ssm_n_group || hp->ssm_d_inner % hp->ssm_dt_rank)
    return kiln_status_new(KILN_STATUS_MALFORMED,
                           "qwen35.ssm: time_step_rank %u (value heads) must be a multiple of "
                           "group_count %u (q/k heads) and divide inner_size %u",
                           hp->ssm_dt_rank, hp->ssm_n_group, hp->ssm_d_inner);
  KILN_RETURN_IF_ERROR(read_sections(g, hp));
  uint32_t n_blocks = hp->n_layer;
  if (kiln_gguf_find_kv(g, "qwen35.nextn_predict_layers")) {
    KILN_RETURN_IF_ERROR(kiln_gguf_get_u32(g, "qwen35.nextn_predict_layers", &hp->n_nextn));
    if (hp->n_nextn >= n_blocks)
      return kiln_status_new(KILN_STATUS_MALFORMED, "qwen35.nextn_predict_layers %u leaves no block of %u",
                             hp->n_nextn, n_blocks);
    hp->n_layer = n_blocks - hp->n_nextn; /* the trunk; MTP blocks follow it */
  }
  if (n_blocks > KILN_MAX_LAYERS)
    return kiln_status_new(KILN_STATUS_UNSUPPORTED, "qwen35.block_count %u is above kiln's %d", n_blocks,
                           KILN_MAX_LAYERS);
  return read_pattern(g, hp, n_blocks);
}
