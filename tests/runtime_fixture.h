/* The fixture of a cmocka group that synthesizes models into a temporary
 * folder and runs them through one runtime configured from the
 * environment (KILN_PLUGIN_PATH, KILN_CONFIG, ...). Its own object in
 * libkilntest, so tests that do not link libkiln never pull it in. */
#ifndef KILN_TESTS_RUNTIME_FIXTURE_H
#define KILN_TESTS_RUNTIME_FIXTURE_H

#include "kiln/kiln.h"
#include "kiln/synth.h"

/* A fresh folder (kt_mkdtemp(tag)) and a runtime: 0, or -1 with the
 * runtime's error on stderr, as a cmocka group setup returns. */
int kt_runtime_setup(const char *tag, char **out_dir, kiln_runtime **out_rt);

/* Writes the synthetic model o describes to path (kiln/synth.h) and opens
 * it into *out: 0, or -1 with the error on stderr, as a cmocka group
 * setup returns. */
int kt_synth_open(const kiln_synth_options *o, const char *path, kiln_model **out);

/* Frees the runtime, removes the folder and frees its path; 0. */
int kt_runtime_teardown(char *dir, kiln_runtime *rt);

#endif
