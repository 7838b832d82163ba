/* The tiny Qwen3.5 of tests/golden/qwen35-tiny.golden, regenerated for a
 * test: `kiln synth` (the build's cli/kiln) with the flags committed in
 * tests/golden/qwen35-tiny.synth, the Qwen3.5 vocabulary from the models
 * folder, into `path`. The same file make_golden_qwen35.py checked to be
 * llama.cpp's conversion of the transformers model it ran. */
#ifndef KILN_TEST_QWEN35_FIXTURE_H
#define KILN_TEST_QWEN35_FIXTURE_H

/* 0 on success; -1 (after printing why) when the flags file, the
 * vocabulary or kiln synth fails. Needs KILN_SRCDIR and KILN_BUILDDIR. */
int kt_qwen35_tiny(const char *path);

#endif
