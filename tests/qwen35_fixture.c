/* The tiny Qwen3.5 golden model, regenerated (qwen35_fixture.h). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qwen35_fixture.h"
#include "testutil.h"

int kt_qwen35_tiny(const char *path) {
  const char *src = getenv("KILN_SRCDIR"), *build = getenv("KILN_BUILDDIR");
  if (!src || !build) {
    fprintf(stderr, "kt_qwen35_tiny: KILN_SRCDIR and KILN_BUILDDIR must be set (make check sets them)\n");
    return -1;
  }
  char flags_path[4096], kiln[4096];
  snprintf(flags_path, sizeof flags_path, "%s/tests/golden/qwen35-tiny.synth", src);
  snprintf(kiln, sizeof kiln, "%s/cli/kiln", build);
  FILE *f = fopen(flags_path, "r");
  if (!f) {
    fprintf(stderr, "%s: cannot open\n", flags_path);
    return -1;
  }
  static char words[64][64];
  char line[512], *argv[72];
  int argc = 0, n = 0;
  argv[argc++] = kiln;
  argv[argc++] = "synth";
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#') continue;
    for (char *w = strtok(line, " \t\n"); w && n < 64; w = strtok(NULL, " \t\n")) {
      snprintf(words[n], sizeof words[n], "%s", w);
      argv[argc++] = words[n++];
    }
  }
  fclose(f);
  char *vocab = kt_model_path("ggml-vocab-qwen35.gguf");
  if (!vocab) {
    fprintf(stderr, "kt_qwen35_tiny: ggml-vocab-qwen35.gguf is not in the models folder\n");
    return -1;
  }
  argv[argc++] = "--vocab-from";
  argv[argc++] = vocab;
  argv[argc++] = "-o";
  argv[argc++] = (char *)path;
  argv[argc] = NULL;
  pid_t pid = fork();
  if (pid == 0) {
    execv(kiln, argv);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  free(vocab);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "kt_qwen35_tiny: %s synth failed (status %d)\n", kiln, status);
    return -1;
  }
  return 0;
}
