/* kiln_status: heap statuses with a code and a message that grows context
 * at the front as it propagates (IREE's iree_status_t, simplified). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/status.h"

struct kiln_status_s {
  kiln_status_code code;
  char *message;
};

/* Returned when allocating a status fails; never freed. */
static struct kiln_status_s oom_status = {KILN_STATUS_NO_MEMORY,
                                          (char *)"out of memory while reporting an error"};

static char *vformat(const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) return NULL;
  char *s = malloc((size_t)n + 1);
  if (s) vsnprintf(s, (size_t)n + 1, fmt, ap);
  return s;
}

kiln_status kiln_status_newv(kiln_status_code code, const char *fmt, va_list ap) {
  struct kiln_status_s *st = malloc(sizeof *st);
  if (!st) return &oom_status;
  st->code = code == KILN_STATUS_OK ? KILN_STATUS_INTERNAL : code;
  st->message = vformat(fmt, ap);
  if (!st->message) {
    free(st);
    return &oom_status;
  }
  return st;
}

kiln_status kiln_status_new(kiln_status_code code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kiln_status st = kiln_status_newv(code, fmt, ap);
  va_end(ap);
  return st;
}

kiln_status kiln_status_annotatev(kiln_status st, const char *fmt, va_list ap) {
  if (!st || st == &oom_status) return st;
  char *ctx = vformat(fmt, ap);
  if (!ctx) return st;
  size_t a = strlen(ctx), b = strlen(st->message);
  char *m = malloc(a + 2 + b + 1);
  if (m) {
    memcpy(m, ctx, a);
    memcpy(m + a, ": ", 2);
    memcpy(m + a + 2, st->message, b + 1);
    free(st->message);
    st->message = m;
  }
  free(ctx);
  return st;
}

kiln_status kiln_status_annotate(kiln_status st, const char *fmt, ...) {
  if (!st) return NULL;
  va_list ap;
  va_start(ap, fmt);
  st = kiln_status_annotatev(st, fmt, ap);
  va_end(ap);
  return st;
}

kiln_status_code kiln_status_code_of(kiln_status st) { return st ? st->code : KILN_STATUS_OK; }

const char *kiln_status_message(kiln_status st) { return st ? st->message : ""; }

const char *kiln_status_code_name(kiln_status_code code) {
  switch (code) {
  case KILN_STATUS_OK: return "OK";
  case KILN_STATUS_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
  case KILN_STATUS_NOT_FOUND: return "NOT_FOUND";
  case KILN_STATUS_MALFORMED: return "MALFORMED";
  case KILN_STATUS_UNSUPPORTED: return "UNSUPPORTED";
  case KILN_STATUS_IO: return "IO";
  case KILN_STATUS_NO_MEMORY: return "NO_MEMORY";
  case KILN_STATUS_UNAVAILABLE: return "UNAVAILABLE";
  case KILN_STATUS_ABI: return "ABI";
  case KILN_STATUS_COMPILE: return "COMPILE";
  case KILN_STATUS_DEVICE: return "DEVICE";
  case KILN_STATUS_OUT_OF_RANGE: return "OUT_OF_RANGE";
  case KILN_STATUS_INTERNAL: return "INTERNAL";
  case KILN_STATUS_CHECK_FAILED: return "CHECK_FAILED";
  }
  return "?";
}

void kiln_status_free(kiln_status st) {
  if (!st || st == &oom_status) return;
  free(st->message);
  free(st);
}
