/* Loading qwen35 files: the hyperparameters and layer pattern as the file
 * states them, the graph a hybrid builds (a KV cache per full-attention
 * block, a conv and a delta-rule state per Gated DeltaNet block, nothing
 * else), MTP blocks accepted and not run, and the errors of a file that
 * lacks what the model needs, each naming the key or tensor. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kiln/gguf.h"
#include "kiln/gguf_write.h"
#include "kiln/kiln.h"
#include "kiln/synth.h"
#include "testutil.h"

KT_TMPDIR_FIXTURE("model-qwen35")

static const char *synth(const char *name, const char *pattern, bool tied) {
  static char path[4096];
  snprintf(path, sizeof path, "%s/%s.gguf", dir, name);
  kiln_synth_options o;
  kiln_synth_defaults(&o, KILN_ARCH_QWEN35);
  o.layer_pattern = pattern;
  o.tied_output = tied;
  KT_ASSERT_OK(kiln_synth_write(&o, path));
  return path;
}

/* A copy of src without key `drop` (NULL: none) and with the extra
 * tensors of an MTP block when `mtp`; returns the copy's path. */
static const char *rewrite(const char *src, const char *name, const char *drop, bool mtp) {
  static char paths[4][4096];
  static int next;
  char *path = paths[next++ % 4]; /* distinct from a src made by the previous calls */
  snprintf(path, sizeof paths[0], "%s/%s.gguf", dir, name);
  kiln_gguf *g;
  KT_ASSERT_OK(kiln_gguf_open(src, &g));
  kiln_gguf_writer *w;
  KT_ASSERT_OK(kiln_gguf_writer_new(&w));
  KT_ASSERT_OK(kiln_gguf_writer_copy_kvs(w, g, "", NULL));
  if (drop) KT_ASSERT_OK(kiln_gguf_writer_remove(w, drop));
  for (uint64_t i = 0; i < kiln_gguf_n_tensors(g); i++) {
    const kiln_gguf_tensor *t = kiln_gguf_tensor_at(g, i);
    char tn[96];
    snprintf(tn, sizeof tn, "%.*s", (int)t->name.len, t->name.ptr);
    KT_ASSERT_OK(kiln_gguf_writer_add_tensor_raw(w, tn, t->type, t->n_dims, t->ne, t->data, t->nbytes));
  }
  if (mtp) {
    /* block_count grows by one MTP block, announced by nextn_predict_layers */
    uint32_t n;
    KT_ASSERT_OK(kiln_gguf_get_u32(g, "qwen35.block_count", &n));
    KT_ASSERT_OK(kiln_gguf_writer_set_u32(w, "qwen35.block_count", n + 1));
    KT_ASSERT_OK(kiln_gguf_writer_set_u32(w, "qwen35.nextn_predict_layers", 1));
    const kiln_gguf_kv *rl;
    KT_ASSERT_OK(kiln_gguf_get_arr(g, "qwen35.attention.recurrent_layers", KILN_GGUF_BOOL, &rl));
    bool rec[64] = {false};
    for (uint64_t i = 0; i < rl->n; i++) rec[i] = kiln_gguf_arr_bool(rl, i);
    KT_ASSERT_OK(kiln_gguf_writer_set_arr(w, "qwen35.attention.recurrent_layers", KILN_GGUF_BOOL, rec, rl->n + 1));
    float v[128] = {0};
    char tn[64];
    snprintf(tn, sizeof tn, "blk.%u.nextn.eh_proj.weight", n);
    KT_ASSERT_OK(kiln_gguf_writer_add_tensor_f32(w, tn, KILN_TYPE_F32, 2, (int64_t[]){64, 2}, v));
    snprintf(tn, sizeof tn, "blk.%u.attn_norm.weight", n);
    KT_ASSERT_OK(kiln_gguf_writer_add_tensor_f32(w, tn, KILN_TYPE_F32, 1, (int64_t[]){64}, v));
  }
  KT_ASSERT_OK(kiln_gguf_writer_write_file(w, path));
  kiln_gguf_writer_free(w);
  kiln_gguf_close(g);
  return path;
}

static int count_nodes(const kiln_graph *g, kiln_op op) {
  int n = 0;
  for (uint32_t i = 0; i < kiln_graph_n_nodes(g); i++) n += kiln_graph_node(g, i)->op == op;
  return n;
}

static int count_role(const kiln_graph *g, kiln_tensor_role role) {
  int n = 0;
  for (uint32_t i = 0; i < kiln_graph_n_tensors(g); i++) n += kiln_graph_tensor(g, i)->role == role;
  return n;
}

static void test_hybrid_graph(void **state) {
  (void)state;
  kiln_model *m;
  KT_ASSERT_OK(kiln_model_open(synth("rfrr", "RFRR", false), &m));
  const kiln_hparams *hp = kiln_model_hparams(m);
  assert_int_equal(hp->arch, KILN_ARCH_QWEN35);
  assert_int_equal(hp->n_layer, 4);
  assert_int_equal(hp->n_recurrent, 3);
  assert_true(hp->recurrent[0] && !hp->recurrent[1] && hp->recurrent[2] && hp->recurrent[3]);
  assert_true(hp->pattern_from_array);
  assert_int_equal(hp->rope_mode, KILN_ROPE_IMROPE);
  assert_int_equal(hp->rope_sections[0], 2);
  assert_false(hp->tied_output);
  kiln_graph *g;
  KT_ASSERT_OK(kiln_graph_build(m, &(kiln_graph_options){.batch = 8, .n_ctx = 32}, &g));
  assert_int_equal(count_nodes(g, KILN_OP_SSM_CONV), 3);
  assert_int_equal(count_nodes(g, KILN_OP_GATED_DELTA_NET), 3);
  assert_int_equal(count_nodes(g, KILN_OP_GDN_GATE), 3);
  assert_int_equal(count_nodes(g, KILN_OP_ATTENTION), 1);
  assert_int_equal(count_nodes(g, KILN_OP_SLICE), 2);
  assert_int_equal(count_nodes(g, KILN_OP_SIGMOID_MUL), 1);
  assert_int_equal(count_role(g, KILN_ROLE_STATE), 2);     /* K and V cache of block 1 */
  assert_int_equal(count_role(g, KILN_ROLE_RECURRENT), 6); /* conv + delta-rule state of 0, 2, 3 */
  for (uint32_t i = 0; i < kiln_graph_n_nodes(g); i++) {
    const kiln_node *n = kiln_graph_node(g, i);
    if (n->op == KILN_OP_GATED_DELTA_NET) {
      assert_int_equal(n->p.gdn.n_k_heads, 2);
      assert_int_equal(n->p.gdn.n_v_heads, 4);
      assert_int_equal(n->p.gdn.chunk, 64);
      assert_true(n->p.gdn.l2_eps == hp->eps);
      assert_int_equal(n->src[2]->ne[0], 16 * 16 * 4);
    }
    if (n->op == KILN_OP_ROPE) assert_int_equal(n->p.rope.sections[2], 1);
    if (n->op == KILN_OP_RMS_NORM) assert_true(n->p.rms_norm.eps == hp->eps);
  }
  kiln_graph_free(g);
  /* --test-eps reaches every norm, the L2 norms too */
  KT_ASSERT_OK(kiln_graph_build(m, &(kiln_graph_options){.batch = 8, .n_ctx = 32, .eps_override = 1e-5f}, &g));
  for (uint32_t i = 0; i < kiln_graph_n_nodes(g); i++) {
    const kiln_node *n = kiln_graph_node(g, i);
    if (n->op == KILN_OP_GATED_DELTA_NET) assert_true(n->p.gdn.l2_eps == 1e-5f);
    if (n->op == KILN_OP_RMS_NORM) assert_true(n->p.rms_norm.eps == 1e-5f);
  }
  kiln_graph_free(g);
  kiln_model_free(m);
}

/* Which matvecs feed a recurrent state (kiln/graph.h,
 * p.mul_mat.feeds_recurrent, what [cpu] / [cuda-*] recurrent_guard keeps
 * exact): every one whose output a later SSM_CONV or GATED_DELTA_NET reads
 * through the residual stream, full attention's too; in the last Gated
 * DeltaNet block only those before its delta rule (q/k/v, alpha, beta: not
 * z, which meets the rule's output after it, nor ssm_out); none after it,
 * nor the logits; none at all in a model without recurrent layers. */
static void test_feeds_recurrent(void **state) {
  (void)state;
  static const char *feeding[] = {
      "blk.0.attn_qkv",  "blk.0.attn_gate", "blk.0.ssm_alpha", "blk.0.ssm_beta",    "blk.0.ssm_out",
      "blk.0.ffn_gate",  "blk.0.ffn_up",    "blk.0.ffn_down",  "blk.1.attn_q",      "blk.1.attn_k",
      "blk.1.attn_v",    "blk.1.attn_output", "blk.1.ffn_gate", "blk.1.ffn_up",     "blk.1.ffn_down",
      "blk.2.attn_qkv",  "blk.2.ssm_alpha", "blk.2.ssm_beta",
  };
  const size_t n_feeding = sizeof feeding / sizeof feeding[0];
  kiln_model *m;
  KT_ASSERT_OK(kiln_model_open(synth("rfrf", "RFRF", false), &m));
  for (int32_t batch = 1; batch <= 8; batch += 7) {
    kiln_graph *g;
    KT_ASSERT_OK(kiln_graph_build(m, &(kiln_graph_options){.batch = batch, .n_ctx = 32}, &g));
    size_t n_mm = 0, n_feed = 0;
    for (uint32_t i = 0; i < kiln_graph_n_nodes(g); i++) {
      const kiln_node *n = kiln_graph_node(g, i);
      if (n->op != KILN_OP_MUL_MAT) continue;
      bool want = false;
      for (size_t k = 0; k < n_feeding; k++) want |= strcmp(n->name, feeding[k]) == 0;
      if (n->p.mul_mat.feeds_recurrent != want)
        fail_msg("%s: feeds_recurrent %d, expected %d", n->name, n->p.mul_mat.feeds_recurrent, want);
      n_mm++;
      n_feed += n->p.mul_mat.feeds_recurrent;
    }
    assert_int_equal(n_feed, n_feeding);
    assert_int_equal(n_mm, 8 + 7 + 8 + 7 + 1); /* R, F, R, F blocks and the logits */
    kiln_graph_free(g);
  }
  kiln_model_free(m);
  /* a dense model: no recurrent state, no matvec marked */
  char path[4096];
  snprintf(path, sizeof path, "%s/llama.gguf", dir);
  kiln_synth_options o;
  kiln_synth_defaults(&o, KILN_ARCH_LLAMA);
  KT_ASSERT_OK(kiln_synth_write(&o, path));
  KT_ASSERT_OK(kiln_model_open(path, &m));
  kiln_graph *g;
  KT_ASSERT_OK(kiln_graph_build(m, &(kiln_graph_options){.batch = 4, .n_ctx = 16}, &g));
  size_t n_mm = 0;
  for (uint32_t i = 0; i < kiln_graph_n_nodes(g); i++) {
    const kiln_node *n = kiln_graph_node(g, i);
    if (n->op != KILN_OP_MUL_MAT) continue;
    n_mm++;
    if (n->p.mul_mat.feeds_recurrent) fail_msg("%s of a llama graph feeds a recurrent state", n->name);
  }
  assert_true(n_mm > 0);
  kiln_graph_free(g);
  kiln_model_free(m);
}

/* Without recurrent_layers the interval decides; without both, an error. */
static void test_pattern_from_the_file(void **state) {
  (void)state;
  const char *src = synth("rrrf", NULL, true);
  kiln_model *m;
  KT_ASSERT_OK(kiln_model_open(rewrite(src, "interval", "qwen35.attention.recurrent_layers", false), &m));
  const kiln_hparams *hp = kiln_model_hparams(m);
  assert_false(hp->pattern_from_array);
  assert_true(hp->recurrent[0] && hp->recurrent[1] && hp->recurrent[2] && !hp->recurrent[3]);
  kiln_model_free(m);
  const char *noint = rewrite(src, "no-interval", "qwen35.full_attention_interval", false);
  KT_ASSERT_ERR(kiln_model_open(rewrite(noint, "no-pattern", "qwen35.attention.recurrent_layers", false), &m),
                KILN_STATUS_NOT_FOUND,
                "qwen35.attention.recurrent_layers and qwen35.full_attention_interval are both missing");
}

/* A copy of src with its keys edited by `edit` (tensors as they are). */
static const char *retouch(const char *src, const char *name, void (*edit)(kiln_gguf_writer *, const void *),
                           const void *arg) {
  static char path[4096];
  snprintf(path, sizeof path, "%s/%s.gguf", dir, name);
  kiln_gguf *g;
  KT_ASSERT_OK(kiln_gguf_open(src, &g));
  kiln_gguf_writer *w;
  KT_ASSERT_OK(kiln_gguf_writer_new(&w));
  KT_ASSERT_OK(kiln_gguf_writer_copy_kvs(w, g, "", NULL));
  edit(w, arg);
  for (uint64_t i = 0; i < kiln_gguf_n_tensors(g); i++) {
    const kiln_gguf_tensor *t = kiln_gguf_tensor_at(g, i);
    char tn[96];
    snprintf(tn, sizeof tn, "%.*s", (int)t->name.len, t->name.ptr);
    KT_ASSERT_OK(kiln_gguf_writer_add_tensor_raw(w, tn, t->type, t->n_dims, t->ne, t->data, t->nbytes));
  }
  KT_ASSERT_OK(kiln_gguf_writer_write_file(w, path));
  kiln_gguf_writer_free(w);
  kiln_gguf_close(g);
  return path;
}

static void set_interval(kiln_gguf_writer *w, const void *every) {
  KT_ASSERT_OK(kiln_gguf_writer_set_u32(w, "qwen35.full_attention_interval", *(const uint32_t *)every));
}

/* Both keys present: the array decides, and an interval that says
 * otherwise is an error naming both, never ignored. */
static void test_pattern_contradiction(void **state) {
  (void)state;
  const char *src = synth("rrrf-both", "RRRF", true);
  kiln_gguf *g;
  uint32_t every = 0;
  KT_ASSERT_OK(kiln_gguf_open(src, &g));
  KT_ASSERT_OK(kiln_gguf_get_u32(g, "qwen35.full_attention_interval", &every));
  kiln_gguf_close(g);
  assert_int_equal(every, 4); /* synth writes the interval the pattern follows */
  kiln_model *m;
  KT_ASSERT_OK(kiln_model_open(src, &m));
  assert_true(kiln_model_hparams(m)->pattern_from_array);
  kiln_model_free(m);

  every = 1;
  KT_ASSERT_ERR(kiln_model_open(retouch(src, "every-1", set_interval, &every), &m), KILN_STATUS_MALFORMED,
                "qwen35.full_attention_interval = 1 contradicts qwen35.attention.recurrent_layers: block 0 "
                "is full attention by the interval but recurrent by the array");
  every = 2;
  KT_ASSERT_ERR(kiln_model_open(retouch(src, "every-2", set_interval, &every), &m), KILN_STATUS_MALFORMED,
                "block 1 is full attention by the interval but recurrent by the array");
  every = 3;
  KT_ASSERT_ERR(kiln_model_open(retouch(src, "every-3", set_interval, &every), &m), KILN_STATUS_MALFORMED,
                "qwen35.full_attention_interval = 3 contradicts");

  /* a pattern no interval follows: synth writes none, and the array alone decides */
  src = synth("rfrr-alone", "RFRR", true);
  KT_ASSERT_OK(kiln_gguf_open(src, &g));
  assert_null(kiln_gguf_find_kv(g, "qwen35.full_attention_interval"));
  kiln_gguf_close(g);
  KT_ASSERT_OK(kiln_model_open(src, &m));
  kiln_model_free(m);
}

static void set_sections(kiln_gguf_writer *w, const void *sections) {
  KT_ASSERT_OK(kiln_gguf_writer_set_arr_i32(w, "qwen35.rope.dimension_sections", sections, 4));
}

/* rope.dimension_sections count rotated pairs: their sum is at most
 * n_rot / 2 (synth's n_rot is 8, so 4), not head_dim (32). */
static void test_rope_sections_in_pairs(void **state) {
  (void)state;
  const char *src = synth("sections", NULL, true);
  kiln_model *m;
  KT_ASSERT_OK(kiln_model_open(src, &m)); /* [2, 1, 1, 0]: 4 pairs */
  kiln_model_free(m);
  const int32_t over[] = {2, 1, 1, 5}, one_over[] = {2, 1, 1, 1}, fewer[] = {1, 1, 1, 0};
  KT_ASSERT_ERR(kiln_model_open(retouch(src, "sections-9", set_sections, over), &m), KILN_STATUS_MALFORMED,
                "qwen35.rope.dimension_sections sum to 9; want 1..4, the rotated pairs "
                "(qwen35.rope.dimension_count 8 / 2)");
  KT_ASSERT_ERR(kiln_model_open(retouch(src, "sections-5", set_sections, one_over), &m),
                KILN_STATUS_MALFORMED, "sum to 5; want 1..4");
  KT_ASSERT_OK(kiln_model_open(retouch(src, "sections-3", set_sections, fewer), &m));
  kiln_model_free(m);

  /* synth refuses to write such a file */
  kiln_synth_options o;
  kiln_synth_defaults(&o, KILN_ARCH_QWEN35);
  o.rope_sections[3] = 5;
  char path[4096];
  snprintf(path, sizeof path, "%s/sections-synth.gguf", dir);
  KT_ASSERT_ERR(kiln_synth_write(&o, path), KILN_STATUS_INVALID_ARGUMENT, "want 1..n_rot / 2 = 4");
}

/* Each required key, the common ones every architecture reads included:
 * the error names the file and the key. */
static void test_missing_keys(void **state) {
  (void)state;
  const char *src = synth("keys", NULL, true);
  static const char *keys[] = {"qwen35.ssm.conv_kernel", "qwen35.ssm.inner_size", "qwen35.ssm.state_size",
                               "qwen35.ssm.time_step_rank", "qwen35.ssm.group_count",
                               "qwen35.rope.dimension_sections", "qwen35.rope.freq_base",
                               "qwen35.attention.layer_norm_rms_epsilon", "qwen35.context_length",
                               "qwen35.embedding_length", "qwen35.block_count", "qwen35.feed_forward_length",
                               "qwen35.attention.head_count"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
    kiln_model *m;
    const char *path = rewrite(src, "missing", keys[i], false);
    kiln_status st = kiln_model_open(path, &m);
    assert_non_null(st);
    assert_int_equal(kiln_status_code_of(st), KILN_STATUS_NOT_FOUND);
    if (!strstr(kiln_status_message(st), path) || !strstr(kiln_status_message(st), keys[i]))
      fail_msg("\"%s\" names not both the file %s and the key %s", kiln_status_message(st), path, keys[i]);
    kiln_status_free(st);
  }
}

/* A tensor the hyperparameters do not expect is named with both shapes;
 * a block whose kind disagrees with the pattern names the block. */
static void test_wrong_tensors(void **state) {
  (void)state;
  kiln_synth_options o;
  kiln_synth_defaults(&o, KILN_ARCH_QWEN35);
  o.ssm_heads = 2; /* the file's tensors for 2 value heads */
  char path[4096];
  snprintf(path, sizeof path, "%s/heads.gguf", dir);
  KT_ASSERT_OK(kiln_synth_write(&o, path));
  kiln_gguf *g;
  KT_ASSERT_OK(kiln_gguf_open(path, &g));
  kiln_gguf_writer *w;
  KT_ASSERT_OK(kiln_gguf_writer_new(&w));
  KT_ASSERT_OK(kiln_gguf_writer_copy_kvs(w, g, "", NULL));
  KT_ASSERT_OK(kiln_gguf_writer_set_u32(w, "qwen35.ssm.time_step_rank", 4)); /* ... but keys for 4 */
  KT_ASSERT_OK(kiln_gguf_writer_set_u32(w, "qwen35.ssm.inner_size", 64));
  for (uint64_t i = 0; i < kiln_gguf_n_tensors(g); i++) {
    const kiln_gguf_tensor *t = kiln_gguf_tensor_at(g, i);
    char tn[96];
    snprintf(tn, sizeof tn, "%.*s", (int)t->name.len, t->name.ptr);
    KT_ASSERT_OK(kiln_gguf_writer_add_tensor_raw(w, tn, t->type, t->n_dims, t->ne, t->data, t->nbytes));
  }
  snprintf(path, sizeof path, "%s/heads-bad.gguf", dir);
  KT_ASSERT_OK(kiln_gguf_writer_write_file(w, path));
  kiln_gguf_writer_free(w);
  kiln_gguf_close(g);
  kiln_model *m;
  KT_ASSERT_ERR(kiln_model_open(path, &m), KILN_STATUS_MALFORMED,
                "block 0 is recurrent (Gated DeltaNet): tensor blk.0.attn_qkv.weight has shape [64x96], "
                "the hyperparameters say [64x128]");
  /* full attention where the file has a recurrent block */
  const char *src = synth("kinds", NULL, true);
  KT_ASSERT_OK(kiln_gguf_open(src, &g));
  KT_ASSERT_OK(kiln_gguf_writer_new(&w));
  KT_ASSERT_OK(kiln_gguf_writer_copy_kvs(w, g, "", NULL));
  bool all_full[4] = {false, false, false, false};
  KT_ASSERT_OK(kiln_gguf_writer_set_arr(w, "qwen35.attention.recurrent_layers", KILN_GGUF_BOOL, all_full, 4));
  /* the interval (4) would contradict the array: the tensor check is the one under test */
  KT_ASSERT_OK(kiln_gguf_writer_remove(w, "qwen35.full_attention_interval"));
  for (uint64_t i = 0; i < kiln_gguf_n_tensors(g); i++) {
    const kiln_gguf_tensor *t = kiln_gguf_tensor_at(g, i);
    char tn[96];
    snprintf(tn, sizeof tn, "%.*s", (int)t->name.len, t->name.ptr);
    KT_ASSERT_OK(kiln_gguf_writer_add_tensor_raw(w, tn, t->type, t->n_dims, t->ne, t->data, t->nbytes));
  }
  snprintf(path, sizeof path, "%s/kinds-bad.gguf", dir);
  KT_ASSERT_OK(kiln_gguf_writer_write_file(w, path));
  kiln_gguf_writer_free(w);
  kiln_gguf_close(g);
  KT_ASSERT_ERR(kiln_model_open(path, &m), KILN_STATUS_NOT_FOUND,
                "block 0 is full attention: tensor blk.0.attn_q.weight is missing");
}

/* An MTP block (nextn) is accepted and not part of the graph; its
 * tensors under another block number would not be. */
static void test_mtp_block(void **state) {
  (void)state;
  kiln_model *m;
  KT_ASSERT_OK(kiln_model_open(rewrite(synth("mtp-src", NULL, true), "mtp", NULL, true), &m));
  const kiln_hparams *hp = kiln_model_hparams(m);
  assert_int_equal(hp->n_layer, 4);
  assert_int_equal(hp->n_nextn, 1);
  kiln_graph *g;
  KT_ASSERT_OK(kiln_graph_build(m, &(kiln_graph_options){.batch = 4, .n_ctx = 16}, &g));
  for (uint32_t i = 0; i < kiln_graph_n_tensors(g); i++) assert_null(strstr(kiln_graph_tensor(g, i)->name, "blk.4."));
  kiln_graph_free(g);
  kiln_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hybrid_graph),
      cmocka_unit_test(test_feeds_recurrent),  cmocka_unit_test(test_pattern_from_the_file),
      cmocka_unit_test(test_missing_keys),  cmocka_unit_test(test_wrong_tensors),
      cmocka_unit_test(test_mtp_block),
      cmocka_unit_test(test_pattern_contradiction),  cmocka_unit_test(test_rope_sections_in_pairs),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
