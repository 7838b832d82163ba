/* The tiny Qwen3.5 of tests/golden/qwen35-tiny.golden, regenerated for a
 * test: `kiln synth` (the build's cli/kiln) with the flags committed in
 * tests/golden/qwen35-tiny.synth, the Qwen3.5 vocabulary from the models
 * folder, into `path`. The same file make_golden_qwen35.py checked to be
 * llama.cpp's conversion of the transformers model it ran. */
#ifndef KILN_TEST_QWEN35_FIXTURE_H
#define KILN_TEST_QWEN35_FIXTURE_H

#include <stdint.h>

#include "kiln/synth.h"

/* 0 on success; -1 (after printing why) when the flags file, the
 * vocabulary or kiln synth fails. Needs KILN_SRCDIR and KILN_BUILDDIR. */
int kt_qwen35_tiny(const char *path);

/* The small Qwen3.5 of the recurrent_guard tests
 * (tests/integration/test_parity_recurrent_guard.c, tests/gpu/test_gpu_qwen35.c):
 * Q8_0 matrices and embedding, 4 blocks R R R F, hidden 256, ff 512, 8
 * value heads of 32 over 4 q/k heads of 32, full attention 4/2 heads of
 * 32, 256 embedding rows and no vocabulary (run it on ids), seed 1. */
void kt_qwen35_guard_options(kiln_synth_options *o);

/* The ids those tests run, one per step: n of them into ids. */
void kt_qwen35_guard_ids(int32_t *ids, int n);

#endif
