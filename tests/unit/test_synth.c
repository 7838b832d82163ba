/* kiln synth writes only files kiln reads: a one-token vocabulary or a
 * one-wide FFN once came out as 1-D matrices that kiln then refused
 * ("token_embd.weight must be [64 x n_vocab]"). And its values do not
 * depend on how many threads drew them: the golden files
 * (tests/golden/qwen35-tiny.*) name a seed, not the bytes. */
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
#include "kiln/tokenizer.h"
#include "testutil.h"

static void test_one_row_matrices_stay_2d(void **state) {
  (void)state;
  char *dir = kt_mkdtemp("synth");
  static const kiln_arch archs[] = {KILN_ARCH_LLAMA, KILN_ARCH_QWEN2, KILN_ARCH_QWEN3};
  for (size_t a = 0; a < 3; a++) {
    char path[4200];
    snprintf(path, sizeof path, "%s/one-%zu.gguf", dir, a);
    kiln_synth_options o;
    kiln_synth_defaults(&o, archs[a]);
    o.n_vocab = 1;
    o.n_ff = 1;
    o.tied_output = a != 0;
    KT_ASSERT_OK(kiln_synth_write(&o, path));
    kiln_gguf *g;
    KT_ASSERT_OK(kiln_gguf_open(path, &g));
    static const char *const two_d[] = {"token_embd.weight", "blk.0.ffn_gate.weight",
                                        "blk.0.ffn_up.weight", "blk.1.ffn_down.weight"};
    for (size_t i = 0; i < 4; i++) {
      const kiln_gguf_tensor *t = kiln_gguf_find_tensor(g, two_d[i]);
      assert_non_null(t);
      assert_int_equal(t->n_dims, 2);
    }
    assert_int_equal(kiln_gguf_find_tensor(g, "output_norm.weight")->n_dims, 1);
    kiln_gguf_close(g);
    kiln_model *m;
    KT_ASSERT_OK(kiln_model_open(path, &m)); /* kiln reads what it wrote */
    assert_int_equal(kiln_model_hparams(m)->n_vocab, 1);
    kiln_model_free(m);
  }
  kt_rm_rf(dir);
  free(dir);
}

static const kiln_gguf_tensor *embd_of(const char *dir, const char *name, uint32_t n_vocab, kiln_gguf **out_g) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s.gguf", dir, name);
  kiln_synth_options o;
  kiln_synth_defaults(&o, KILN_ARCH_LLAMA);
  o.n_vocab = n_vocab;
  o.n_embd = 512;
  o.n_head = 8;
  o.n_head_kv = 8;
  o.n_layer = 1;
  o.seed = 1234;
  KT_ASSERT_OK(kiln_synth_write(&o, path));
  KT_ASSERT_OK(kiln_gguf_open(path, out_g));
  const kiln_gguf_tensor *t = kiln_gguf_find_tensor(*out_g, "token_embd.weight");
  assert_non_null(t);
  return t;
}

/* The embedding is the first tensor drawn, so its rows are the stream's
 * first values whatever the vocabulary's size: 2500 rows x 512 (1.28M
 * values: every online CPU draws a share of the rows) and 2047 rows (just
 * under the 2^20 values below which one thread draws them all) must agree
 * on every row they share, including rows past the first thread's share. */
static void test_threaded_rows_are_the_sequential_stream(void **state) {
  (void)state;
  char *dir = kt_mkdtemp("synth-threads");
  kiln_gguf *big, *small;
  const kiln_gguf_tensor *a = embd_of(dir, "big", 2500, &big), *b = embd_of(dir, "small", 2047, &small);
  assert_int_equal(a->type, KILN_TYPE_F32);
  assert_memory_equal(a->data, b->data, (size_t)b->nbytes);
  /* and the stream goes on from the same place: the first layer's
   * tensors follow one embedding of each size, so they differ */
  const kiln_gguf_tensor *qa = kiln_gguf_find_tensor(big, "blk.0.attn_q.weight"),
                         *qb = kiln_gguf_find_tensor(small, "blk.0.attn_q.weight");
  assert_true(memcmp(qa->data, qb->data, (size_t)qa->nbytes) != 0);
  kiln_gguf_close(big);
  kiln_gguf_close(small);
  kt_rm_rf(dir);
  free(dir);
}

/* --vocab-rows past the tokenizer pads the token list too, as llama.cpp's
 * converter pads a checkpoint's (llama.cpp sizes token_embd by the token
 * count and refused the padded 9B synthetic, 2026-12-07): "[PAD<id>]" of
 * type UNUSED, every real token and type kept. A SentencePiece vocabulary
 * (scores) is refused rather than padded wrong. */
static void test_vocab_rows_pad_the_tokens(void **state) {
  (void)state;
  char *dir = kt_mkdtemp("synth-pad");
  char *vocab = kt_model_path("ggml-vocab-qwen35.gguf");
  kiln_gguf *v;
  KT_ASSERT_OK(kiln_gguf_open(vocab, &v));
  const kiln_gguf_kv *vt, *vty;
  KT_ASSERT_OK(kiln_gguf_get_arr(v, "tokenizer.ggml.tokens", KILN_GGUF_STRING, &vt));
  KT_ASSERT_OK(kiln_gguf_get_arr(v, "tokenizer.ggml.token_type", KILN_GGUF_INT32, &vty));
  const uint32_t n = (uint32_t)vt->n, rows = n + 37;
  char path[4200];
  snprintf(path, sizeof path, "%s/pad.gguf", dir);
  kiln_synth_options o;
  kiln_synth_defaults(&o, KILN_ARCH_QWEN2);
  o.n_layer = 1;
  o.n_embd = 64;
  o.n_ff = 64;
  o.vocab_from = vocab;
  o.vocab_rows = rows;
  KT_ASSERT_OK(kiln_synth_write(&o, path));
  kiln_gguf *g;
  KT_ASSERT_OK(kiln_gguf_open(path, &g));
  const kiln_gguf_kv *t, *ty;
  KT_ASSERT_OK(kiln_gguf_get_arr(g, "tokenizer.ggml.tokens", KILN_GGUF_STRING, &t));
  KT_ASSERT_OK(kiln_gguf_get_arr(g, "tokenizer.ggml.token_type", KILN_GGUF_INT32, &ty));
  assert_int_equal(t->n, rows);
  assert_int_equal(ty->n, rows);
  for (uint32_t i = 0; i < rows; i++) {
    const kiln_gguf_str got = kiln_gguf_arr_str(g, t, i);
    if (i < n) {
      const kiln_gguf_str want = kiln_gguf_arr_str(v, vt, i);
      if (got.len != want.len || memcmp(got.ptr, want.ptr, want.len) != 0 ||
          kiln_gguf_arr_i32(ty, i) != kiln_gguf_arr_i32(vty, i))
        fail_msg("token %u changed", i);
      continue;
    }
    char want[32];
    snprintf(want, sizeof want, "[PAD%u]", i);
    if (got.len != strlen(want) || memcmp(got.ptr, want, got.len) != 0)
      fail_msg("token %u is \"%.*s\", want \"%s\"", i, (int)got.len, got.ptr, want);
    assert_int_equal(kiln_gguf_arr_i32(ty, i), KILN_TOKEN_UNUSED);
  }
  assert_int_equal(kiln_gguf_find_tensor(g, "token_embd.weight")->ne[1], rows);
  kiln_gguf_close(g);
  kiln_model *m;
  KT_ASSERT_OK(kiln_model_open(path, &m));
  assert_int_equal(kiln_model_hparams(m)->n_vocab, rows);
  kiln_model_free(m);
  kiln_gguf_close(v);
  free(vocab);

  /* a vocabulary without token types: refused rather than padded with
   * made-up ones (its CONTROL tokens would turn NORMAL) */
  kiln_gguf_writer *vw;
  KT_ASSERT_OK(kiln_gguf_writer_new(&vw));
  static const char *const toks[] = {"a", "b", "<|im_start|>"};
  KT_ASSERT_OK(kiln_gguf_writer_set_str(vw, "tokenizer.ggml.model", "gpt2"));
  KT_ASSERT_OK(kiln_gguf_writer_set_arr_str(vw, "tokenizer.ggml.tokens", toks, 3));
  char notype[4200];
  snprintf(notype, sizeof notype, "%s/notype.gguf", dir);
  KT_ASSERT_OK(kiln_gguf_writer_write_file(vw, notype));
  kiln_gguf_writer_free(vw);
  kiln_synth_defaults(&o, KILN_ARCH_QWEN2);
  o.vocab_from = notype;
  o.vocab_rows = 8;
  KT_ASSERT_ERR(kiln_synth_write(&o, path), KILN_STATUS_MALFORMED, "tokenizer.ggml.token_type");

  /* stories260K's SentencePiece vocabulary has scores: refused, named */
  vocab = kt_model_path("stories260K.gguf");
  kiln_synth_defaults(&o, KILN_ARCH_LLAMA);
  o.vocab_from = vocab;
  o.vocab_rows = 600;
  KT_ASSERT_ERR(kiln_synth_write(&o, path), KILN_STATUS_UNSUPPORTED, "tokenizer.ggml.scores");
  free(vocab);
  kt_rm_rf(dir);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_row_matrices_stay_2d),
      cmocka_unit_test(test_threaded_rows_are_the_sequential_stream),
      cmocka_unit_test(test_vocab_rows_pad_the_tokens),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
