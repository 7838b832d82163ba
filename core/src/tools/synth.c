/* Synthetic models with seeded random weights (kiln/synth.h): the keys and
 * tensors every architecture has, and the llama-family blocks; qwen35's
 * blocks are synth_qwen35.c. */
#include "config.h"

#include "kiln/synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/gguf.h"
#include "kiln/gguf_write.h"
#include "synth_internal.h"

void kiln_synth_defaults(kiln_synth_options *o, kiln_arch arch) {
  memset(o, 0, sizeof *o);
  o->arch = arch;
  o->n_layer = 2;
  o->n_embd = 64;
  o->n_ff = 128;
  o->n_head = 4;
  o->n_head_kv = 2;
  o->n_ctx = 512;
  o->n_vocab = 256;
  o->eps = arch == KILN_ARCH_LLAMA ? 1e-5f : 1e-6f;
  o->rope_theta = arch == KILN_ARCH_LLAMA ? 10000.0f : 1000000.0f;
  o->matrix_type = KILN_TYPE_F32;
  o->embd_type = KILN_TYPE_F32;
  o->tied_output = arch != KILN_ARCH_LLAMA;
  o->seed = 1;
  if (arch == KILN_ARCH_QWEN35) {
    /* A small hybrid: 3 Gated DeltaNet blocks and 1 full attention, head
     * dims and the 25% partial rotation as Qwen3.5's (rotary sections in
     * pairs, summing to n_rot / 2), θ as Qwen3.5 trains with. */
    o->n_layer = 4;
    o->head_dim = 32;
    o->n_rot = 8;
    o->rope_theta = 10000000.0f;
    o->full_attn_interval = 4;
    o->ssm_conv = 4;
    o->ssm_groups = 2;
    o->ssm_heads = 4;
    o->ssm_state = 16;
    o->ssm_head_v = 16;
    o->rope_sections[0] = 2;
    o->rope_sections[1] = 1;
    o->rope_sections[2] = 1;
  }
}

static const char *arch_name(kiln_arch a) {
  switch (a) {
  case KILN_ARCH_LLAMA: return "llama";
  case KILN_ARCH_QWEN2: return "qwen2";
  case KILN_ARCH_QWEN3: return "qwen3";
  case KILN_ARCH_QWEN35: return "qwen35";
  }
  return NULL;
}

static kiln_status check(const kiln_synth_options *o, uint32_t head_dim) {
  if (!arch_name(o->arch)) return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "synth: unknown architecture");
  if (!o->n_layer || !o->n_embd || !o->n_ff || !o->n_head || !o->n_head_kv || !o->n_ctx)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "synth: layers, widths, heads and n_ctx must be > 0");
  if (o->n_head % o->n_head_kv)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "synth: n_head %u is not a multiple of n_head_kv %u",
                           o->n_head, o->n_head_kv);
  if (!o->head_dim && o->n_embd % o->n_head)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "synth: n_embd %u is not a multiple of n_head %u",
                           o->n_embd, o->n_head);
  uint32_t n_rot = o->n_rot ? o->n_rot : head_dim;
  if (!o->n_rot && head_dim % 2)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "synth: head_dim %u is odd; RoPE rotates pairs (give an even head_dim, or --rot)", head_dim);
  if (n_rot % 2 || n_rot > head_dim)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "synth: n_rot %u must be even and <= head_dim %u", n_rot,
                           head_dim);
  if (!(o->eps > 0.0f)) return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "synth: eps must be > 0");
  if (o->arch != KILN_ARCH_LLAMA && !(o->rope_theta > 0.0f))
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "synth: a %s model needs rope_theta", arch_name(o->arch));
  return o->arch == KILN_ARCH_QWEN35 ? kiln__synth_qwen35_check(o) : NULL;
}

static kiln_status build(kiln__synth *s) {
  const kiln_synth_options *o = s->o;
  uint32_t head_dim = o->head_dim ? o->head_dim : o->n_embd / o->n_head;
  KILN_RETURN_IF_ERROR(check(o, head_dim));
  uint32_t n_rot = o->n_rot ? o->n_rot : head_dim;
  kiln_gguf_writer *w = s->w;
  KILN_RETURN_IF_ERROR(kiln_gguf_writer_set_str(w, "general.architecture", s->arch));
  KILN_RETURN_IF_ERROR(kiln_gguf_writer_set_str(w, "general.name", o->name ? o->name : "kiln-synth"));
  KILN_RETURN_IF_ERROR(kiln__synth_set_u32(s, "context_length", o->n_ctx));
  KILN_RETURN_IF_ERROR(kiln__synth_set_u32(s, "embedding_length", o->n_embd));
  KILN_RETURN_IF_ERROR(kiln__synth_set_u32(s, "feed_forward_length", o->n_ff));
  KILN_RETURN_IF_ERROR(kiln__synth_set_u32(s, "block_count", o->n_layer));
  KILN_RETURN_IF_ERROR(kiln__synth_set_u32(s, "attention.head_count", o->n_head));
  KILN_RETURN_IF_ERROR(kiln__synth_set_u32(s, "attention.head_count_kv", o->n_head_kv));
  KILN_RETURN_IF_ERROR(kiln__synth_set_u32(s, "attention.key_length", head_dim));
  KILN_RETURN_IF_ERROR(kiln__synth_set_u32(s, "attention.value_length", head_dim));
  KILN_RETURN_IF_ERROR(kiln__synth_set_u32(s, "rope.dimension_count", n_rot));
  KILN_RETURN_IF_ERROR(kiln__synth_set_f32(s, "attention.layer_norm_rms_epsilon", o->eps));
  if (o->rope_theta > 0.0f) KILN_RETURN_IF_ERROR(kiln__synth_set_f32(s, "rope.freq_base", o->rope_theta));
  if (o->arch == KILN_ARCH_QWEN35) KILN_RETURN_IF_ERROR(kiln__synth_qwen35_keys(s));

  uint32_t n_vocab = o->n_vocab;
  bool *special = NULL;
  if (o->vocab_from) KILN_RETURN_IF_ERROR(kiln__synth_copy_vocab(s, &n_vocab, &special));
  if (!n_vocab) {
    free(special);
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "synth: n_vocab must be > 0");
  }
  if (o->vocab_from && o->vocab_rows) {
    if (o->vocab_rows < n_vocab) {
      free(special);
      return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "synth: vocab_rows (--vocab-rows) %u is below the vocabulary's %u tokens",
                             o->vocab_rows, n_vocab);
    }
    bool *more = realloc(special, o->vocab_rows * sizeof *more);
    if (!more) {
      free(special);
      return kiln_status_new(KILN_STATUS_NO_MEMORY, "synth: vocabulary");
    }
    for (uint32_t i = n_vocab; i < o->vocab_rows; i++) more[i] = false;
    special = more;
    n_vocab = o->vocab_rows; /* padding rows, as real checkpoints pad */
  }
  double embd_std = sqrt(o->embd_ms > 0.0 ? o->embd_ms : 3e-4);
  kiln_status st = kiln__synth_add(s, "token_embd.weight", o->embd_type, true, o->n_embd, n_vocab, embd_std, 0.0,
                                   0.0, 0.0, special, o->special_ms);
  free(special);
  KILN_RETURN_IF_ERROR(st);
  KILN_RETURN_IF_ERROR(kiln__synth_add(s, "output_norm.weight", KILN_TYPE_F32, false, o->n_embd, 1, 0.1, 1.0,
                                       o->arch == KILN_ARCH_QWEN35 ? 0.5 : 0.0, o->arch == KILN_ARCH_QWEN35 ? 2.0 : 0.0,
                                       NULL, 0));
  if (!o->tied_output)
    KILN_RETURN_IF_ERROR(kiln__synth_add(s, "output.weight", o->embd_type, true, o->n_embd, n_vocab,
                                         1.0 / sqrt((double)o->n_embd), 0.0, 0.0, 0.0, NULL, 0));
  if (o->arch == KILN_ARCH_QWEN35) return kiln__synth_qwen35_blocks(s);

  int64_t qw = (int64_t)head_dim * o->n_head, kvw = (int64_t)head_dim * o->n_head_kv;
  for (uint32_t l = 0; l < o->n_layer; l++) {
    struct {
      const char *suffix;
      int64_t ne0, ne1;
      int kind; /* 0 matrix, 1 norm, 2 bias */
      bool want;
    } t[] = {
        {"attn_norm.weight", o->n_embd, 1, 1, true},
        {"attn_q.weight", o->n_embd, qw, 0, true},
        {"attn_k.weight", o->n_embd, kvw, 0, true},
        {"attn_v.weight", o->n_embd, kvw, 0, true},
        {"attn_q.bias", qw, 1, 2, o->arch == KILN_ARCH_QWEN2},
        {"attn_k.bias", kvw, 1, 2, o->arch == KILN_ARCH_QWEN2},
        {"attn_v.bias", kvw, 1, 2, o->arch == KILN_ARCH_QWEN2},
        {"attn_q_norm.weight", head_dim, 1, 1, o->arch == KILN_ARCH_QWEN3},
        {"attn_k_norm.weight", head_dim, 1, 1, o->arch == KILN_ARCH_QWEN3},
        {"attn_output.weight", qw, o->n_embd, 0, true},
        {"ffn_norm.weight", o->n_embd, 1, 1, true},
        {"ffn_gate.weight", o->n_embd, o->n_ff, 0, true},
        {"ffn_up.weight", o->n_embd, o->n_ff, 0, true},
        {"ffn_down.weight", o->n_ff, o->n_embd, 0, true},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
      if (!t[i].want) continue;
      char name[96];
      snprintf(name, sizeof name, "blk.%u.%s", l, t[i].suffix);
      kiln_type type = t[i].kind == 0 ? o->matrix_type : KILN_TYPE_F32;
      double std = t[i].kind == 0 ? 1.0 / sqrt((double)t[i].ne0) : t[i].kind == 1 ? 0.1 : 0.02;
      KILN_RETURN_IF_ERROR(kiln__synth_add(s, name, type, t[i].kind == 0, t[i].ne0, t[i].ne1, std,
                                           t[i].kind == 1 ? 1.0 : 0.0, 0.0, 0.0, NULL, 0));
    }
  }
  return NULL;
}

kiln_status kiln_synth_write(const kiln_synth_options *o, const char *path) {
  kiln__synth s = {o, NULL, {o->seed, false, 0.0}, arch_name(o->arch)};
  KILN_RETURN_IF_ERROR(kiln_gguf_writer_new(&s.w));
  kiln_status st = build(&s);
  if (!st) st = kiln_gguf_writer_write_file(s.w, path);
  kiln_gguf_writer_free(s.w);
  return st ? kiln_status_annotate(st, "synthesizing %s", path) : NULL;
}
