/* Helpers shared by kiln's cmocka suites. Include after <cmocka.h>'s
 * prerequisites (stdarg.h, stddef.h, setjmp.h, stdint.h). */
#ifndef KILN_TESTUTIL_H
#define KILN_TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>

#include "kiln/status.h"

/* $KILN_MODELS_DIR (set by `make check`), or NULL. */
const char *kt_models_dir(void);

/* Path of model `name` in the models folder, malloc'd; NULL (and a line on
 * stderr saying why) when the folder or file is missing, so the caller can
 * skip(). */
char *kt_model_path(const char *name);

/* Whether model `name` is there; when not, says so on stderr. A test
 * program whose every case needs it returns 77 (automake's SKIP) from main
 * when this is false, so a missing model shows as SKIP, not PASS. */
bool kt_have_model(const char *name);

/* $KILN_TOKENIZERS_DIR/<name>, malloc'd, or NULL as above. */
char *kt_tokenizer_path(const char *name);

/* True when KILN_REQUIRE_GPU=1: GPU tests then fail instead of skipping. */
bool kt_require_gpu(void);

/* A fresh empty folder under $TMPDIR (or /tmp), malloc'd path. */
char *kt_mkdtemp(const char *tag);

/* Removes a folder tree made by kt_mkdtemp (best effort). */
void kt_rm_rf(const char *path);

/* A suite's group fixture around one temporary folder: defines `static
 * char *dir` and the static functions setup (makes it with kt_mkdtemp(tag),
 * -1 when it cannot) and teardown (removes it), for
 * cmocka_run_group_tests(tests, setup, teardown). */
#define KT_TMPDIR_FIXTURE(tag)                                                \
  static char *dir;                                                           \
  static int setup(void **state) {                                            \
    (void)state;                                                              \
    dir = kt_mkdtemp(tag);                                                    \
    return dir ? 0 : -1;                                                      \
  }                                                                           \
  static int teardown(void **state) {                                         \
    (void)state;                                                              \
    kt_rm_rf(dir);                                                            \
    free(dir);                                                                \
    dir = NULL;                                                               \
    return 0;                                                                 \
  }

/* Writes size bytes to path (truncating); false on error. */
bool kt_write_file(const char *path, const void *data, size_t size);

/* stderr (fd 2, where kiln and its plugins log) into a temporary file from
 * kt_stderr_begin to kt_stderr_end. */
typedef struct kt_stderr {
  void *file; /* FILE * */
  int saved;  /* the real stderr, dup()ed */
} kt_stderr;

/* Starts a capture; false (nothing redirected) if it cannot. */
bool kt_stderr_begin(kt_stderr *c);

/* Ends it and returns the text caught, malloc'd and NUL-terminated; NULL
 * if it could not be read back. */
char *kt_stderr_end(kt_stderr *c);

/* Fails the current cmocka test with st's message if st is not NULL. */
#define KT_ASSERT_OK(expr)                                                    \
  do {                                                                        \
    kiln_status kt_st_ = (expr);                                              \
    if (kt_st_) {                                                             \
      fail_msg("%s: %s", #expr, kiln_status_message(kt_st_));                 \
    }                                                                         \
  } while (0)

/* Asserts `expr` fails with `code` and a message containing `needle` (or
 * any message when needle is NULL); frees the status. */
#define KT_ASSERT_ERR(expr, code, needle)                                     \
  do {                                                                        \
    kiln_status kt_st_ = (expr);                                              \
    const char *kt_needle_ = (needle);                                        \
    if (!kt_st_) fail_msg("%s: succeeded, expected %s", #expr, #code);        \
    if (kiln_status_code_of(kt_st_) != (code))                                \
      fail_msg("%s: code %s, expected %s (%s)", #expr,                        \
               kiln_status_code_name(kiln_status_code_of(kt_st_)), #code,     \
               kiln_status_message(kt_st_));                                  \
    if (kt_needle_ && !strstr(kiln_status_message(kt_st_), kt_needle_))       \
      fail_msg("%s: message \"%s\" lacks \"%s\"", #expr,                     \
               kiln_status_message(kt_st_), kt_needle_);                      \
    kiln_status_free(kt_st_);                                                 \
  } while (0)

#endif
