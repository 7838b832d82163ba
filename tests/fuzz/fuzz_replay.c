/* `make check`'s run of a fuzz target: every file of its seed corpus
 * (tests/fuzz/corpus/<target>/, or the folders given as arguments) goes
 * through LLVMFuzzerTestOneInput from a heap buffer of exactly its size,
 * under ASan and UBSan where configure found them, and each input's peak
 * heap is measured (tests/heap_count.h) and must stay within 64 MiB. The
 * libFuzzer builds (`make fuzz`) link the same target without this file.
 * Exit status: 0, 77 (SKIP) when the target's data is missing, or the
 * sanitizer's or the target's abort. */
#include "config.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heap_count.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

#define HEAP_LIMIT (64ull << 20)

static int cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static unsigned replay_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) {
    fprintf(stderr, "fuzz replay: cannot open %s\n", dir);
    exit(1);
  }
  char *names[4096];
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(d)) && n < 4096)
    if (e->d_name[0] != '.' && strcmp(e->d_name, "README.md") != 0) names[n++] = strdup(e->d_name);
  closedir(d);
  qsort(names, n, sizeof *names, cmp);
  for (size_t i = 0; i < n; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    FILE *f = fopen(path, "rb");
    if (!f) {
      fprintf(stderr, "fuzz replay: cannot open %s\n", path);
      exit(1);
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    rewind(f);
    uint8_t *buf = malloc(size > 0 ? (size_t)size : 1);
    if (!buf || fread(buf, 1, (size_t)size, f) != (size_t)size) {
      fprintf(stderr, "fuzz replay: cannot read %s\n", path);
      exit(1);
    }
    fclose(f);
    heap_count_mark();
    LLVMFuzzerTestOneInput(buf, (size_t)size);
    uint64_t peak = heap_count_peak_since_mark();
    if (peak > HEAP_LIMIT) {
      fprintf(stderr, "fuzz replay: %s: %" PRIu64 " bytes of heap at the peak (limit 64 MiB)\n",
              path, peak);
      exit(1);
    }
    free(buf);
    free(names[i]);
  }
  return (unsigned)n;
}

int main(int argc, char **argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  unsigned n = 0;
  if (argc > 1) {
    for (int i = 1; i < argc; i++) n += replay_dir(argv[i]);
  } else {
    const char *src = getenv("KILN_SRCDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus/%s", src ? src : ".", FUZZ_TARGET);
    n = replay_dir(dir);
  }
  printf("fuzz replay (%s): %u inputs, no finding\n", FUZZ_TARGET, n);
  return 0;
}
