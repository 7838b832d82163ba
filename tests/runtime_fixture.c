#include "config.h"

#include "runtime_fixture.h"

#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"

int kt_runtime_setup(const char *tag, char **out_dir, kiln_runtime **out_rt) {
  *out_dir = kt_mkdtemp(tag);
  kiln_status st = kiln_runtime_open(&(kiln_runtime_options){.use_environment = true}, out_rt);
  if (st) {
    fprintf(stderr, "%s\n", kiln_status_message(st));
    kiln_status_free(st);
    return -1;
  }
  return *out_dir ? 0 : -1;
}

int kt_synth_open(const kiln_synth_options *o, const char *path, kiln_model **out) {
  kiln_status st = kiln_synth_write(o, path);
  if (!st) st = kiln_model_open(path, out);
  if (st) {
    fprintf(stderr, "%s\n", kiln_status_message(st));
    kiln_status_free(st);
    return -1;
  }
  return 0;
}

int kt_runtime_teardown(char *dir, kiln_runtime *rt) {
  kiln_runtime_free(rt);
  kt_rm_rf(dir);
  free(dir);
  return 0;
}
