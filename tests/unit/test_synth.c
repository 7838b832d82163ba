/* kiln synth writes only files kiln reads: a one-token vocabulary or a
 * one-wide FFN once came out as 1-D matrices that kiln then refused
 * ("token_embd.weight must be [64 x n_vocab]"). */
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
#include "kiln/kiln.h"
#include "kiln/synth.h"
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_row_matrices_stay_2d),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
