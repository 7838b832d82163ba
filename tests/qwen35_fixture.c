/* The tiny Qwen3.5 golden model, regenerated (qwen35_fixture.h). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln_proc.h"
#include "qwen35_fixture.h"
#include "testutil.h"

int kt_qwen35_tiny(const char *path) {
  const char *src = getenv("KILN_SRCDIR");
  if (!src) {
    fprintf(stderr, "kt_qwen35_tiny: KILN_SRCDIR must be set (make check sets it)\n");
    return -1;
  }
  char flags_path[4096];
  snprintf(flags_path, sizeof flags_path, "%s/tests/golden/qwen35-tiny.synth", src);
  FILE *f = fopen(flags_path, "r");
  if (!f) {
    fprintf(stderr, "%s: cannot open\n", flags_path);
    return -1;
  }
  static char words[64][64];
  char line[512];
  const char *args[72];
  int argc = 0, n = 0;
  args[argc++] = "synth";
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#') continue;
    for (char *w = strtok(line, " \t\n"); w && n < 64; w = strtok(NULL, " \t\n")) {
      snprintf(words[n], sizeof words[n], "%s", w);
      args[argc++] = words[n++];
    }
  }
  fclose(f);
  char *vocab = kt_model_path("ggml-vocab-qwen35.gguf");
  if (!vocab) {
    fprintf(stderr, "kt_qwen35_tiny: ggml-vocab-qwen35.gguf is not in the models folder\n");
    return -1;
  }
  args[argc++] = "--vocab-from";
  args[argc++] = vocab;
  args[argc++] = "-o";
  args[argc++] = path;
  args[argc] = NULL;
  kt_proc p;
  bool ran = kt_kiln(args, NULL, 0, false, &p);
  int rc = ran && p.status == 0 ? 0 : -1;
  if (ran && rc) fprintf(stderr, "kt_qwen35_tiny: kiln synth exited %d: %s\n", p.status, p.err);
  if (ran) kt_proc_free(&p);
  free(vocab);
  return rc;
}

void kt_qwen35_guard_options(kiln_synth_options *o) {
  kiln_synth_defaults(o, KILN_ARCH_QWEN35);
  o->n_layer = 4;
  o->layer_pattern = "RRRF";
  o->n_embd = 256;
  o->n_ff = 512;
  o->n_head = 4;
  o->n_head_kv = 2;
  o->head_dim = 32;
  o->n_rot = 8;
  o->rope_sections[0] = 2, o->rope_sections[1] = 1, o->rope_sections[2] = 1, o->rope_sections[3] = 0;
  o->ssm_groups = 4;
  o->ssm_heads = 8;
  o->ssm_state = 32;
  o->ssm_head_v = 32;
  o->matrix_type = KILN_TYPE_Q8_0;
  o->embd_type = KILN_TYPE_Q8_0;
  o->tied_output = false;
  o->n_vocab = 256;
  o->eps = 1e-6f;
  o->seed = 1;
}

void kt_qwen35_guard_ids(int32_t *ids, int n) {
  for (int i = 0; i < n; i++) ids[i] = 1 + (i * 389 + 1) % 255;
}
