#include "config.h"

#include "testutil.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *kt_models_dir(void) {
  const char *d = getenv("KILN_MODELS_DIR");
  return d && *d ? d : NULL;
}

static char *join_existing(const char *dir, const char *name, const char *what) {
  if (!dir) {
    fprintf(stderr, "skip: %s is not set\n", what);
    return NULL;
  }
  size_t n = strlen(dir) + 1 + strlen(name) + 1;
  char *p = malloc(n);
  snprintf(p, n, "%s/%s", dir, name);
  if (access(p, R_OK) != 0) {
    fprintf(stderr, "skip: %s not found (%s)\n", p, what);
    free(p);
    return NULL;
  }
  return p;
}

char *kt_model_path(const char *name) {
  return join_existing(kt_models_dir(), name, "KILN_MODELS_DIR");
}

bool kt_have_model(const char *name) {
  char *p = kt_model_path(name);
  free(p);
  return p != NULL;
}

char *kt_tokenizer_path(const char *name) {
  const char *d = getenv("KILN_TOKENIZERS_DIR");
  return join_existing(d && *d ? d : NULL, name, "KILN_TOKENIZERS_DIR");
}

bool kt_require_gpu(void) {
  const char *v = getenv("KILN_REQUIRE_GPU");
  return v && strcmp(v, "1") == 0;
}

char *kt_mkdtemp(const char *tag) {
  const char *tmp = getenv("TMPDIR");
  if (!tmp || !*tmp) tmp = "/tmp";
  size_t n = strlen(tmp) + strlen(tag) + 32;
  char *p = malloc(n);
  snprintf(p, n, "%s/kiln-%s-XXXXXX", tmp, tag);
  if (!mkdtemp(p)) {
    free(p);
    return NULL;
  }
  return p;
}

void kt_rm_rf(const char *path) {
  DIR *d = opendir(path);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      size_t n = strlen(path) + strlen(e->d_name) + 2;
      char *c = malloc(n);
      snprintf(c, n, "%s/%s", path, e->d_name);
      struct stat sb;
      if (lstat(c, &sb) == 0 && S_ISDIR(sb.st_mode)) kt_rm_rf(c);
      else unlink(c);
      free(c);
    }
    closedir(d);
  }
  rmdir(path);
}

bool kt_write_file(const char *path, const void *data, size_t size) {
  FILE *f = fopen(path, "wb");
  if (!f) return false;
  bool ok = fwrite(data, 1, size, f) == size;
  return fclose(f) == 0 && ok;
}

bool kt_stderr_begin(kt_stderr *c) {
  fflush(stderr);
  FILE *f = tmpfile();
  c->file = f;
  c->saved = f ? dup(2) : -1;
  if (c->saved >= 0 && dup2(fileno(f), 2) >= 0) return true;
  if (c->saved >= 0) close(c->saved);
  if (f) fclose(f);
  c->file = NULL;
  c->saved = -1;
  return false;
}

char *kt_stderr_end(kt_stderr *c) {
  FILE *f = c->file;
  if (!f) return NULL;
  fflush(stderr);
  dup2(c->saved, 2);
  close(c->saved);
  long n = ftell(f);
  char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;
  rewind(f);
  if (text && fread(text, 1, (size_t)n, f) != (size_t)n) {
    free(text);
    text = NULL;
  }
  if (text) text[n] = '\0';
  fclose(f);
  c->file = NULL;
  return text;
}
