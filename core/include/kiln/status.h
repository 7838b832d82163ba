/*
 * kiln/status.h — how every kiln function that can fail reports it.
 *
 * Follows IREE's iree_status_t: a function returns a kiln_status; NULL means
 * success (one compare on the happy path), anything else is a heap object
 * holding a code and a message. As the status propagates, callers prepend
 * context with kiln_status_annotate() ("loading blk.3.attn_q.weight: ...").
 *
 * Ownership (followed everywhere in kiln): a non-NULL kiln_status returned to
 * you is yours; hand it on (return it) or release it with kiln_status_free().
 * Plugins never link this code: they create and annotate statuses through the
 * host table (kiln/plugin.h), and the host frees what they return.
 */
#ifndef KILN_STATUS_H
#define KILN_STATUS_H

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Codes: the class of failure, for callers that branch on it. The message
 * carries the detail (file, field, node, CUDA error string). */
typedef enum kiln_status_code {
  KILN_STATUS_OK = 0,
  KILN_STATUS_INVALID_ARGUMENT = 1, /* a caller passed something malformed   */
  KILN_STATUS_NOT_FOUND = 2,        /* a file, key, tensor or plugin is absent */
  KILN_STATUS_MALFORMED = 3,        /* a file's bytes break its format (GGUF, INI, cache entry) */
  KILN_STATUS_UNSUPPORTED = 4,      /* valid, but kiln or a backend cannot do it */
  KILN_STATUS_IO = 5,               /* read/write/mmap failed (errno in the message) */
  KILN_STATUS_NO_MEMORY = 6,        /* host or device allocation failed */
  KILN_STATUS_UNAVAILABLE = 7,      /* the hardware or driver a backend needs is absent */
  KILN_STATUS_ABI = 8,              /* a plugin's ABI does not match the host's */
  KILN_STATUS_COMPILE = 9,          /* a kernel failed to compile (NVRTC log in the message) */
  KILN_STATUS_DEVICE = 10,          /* a device call failed at run time */
  KILN_STATUS_OUT_OF_RANGE = 11,    /* a value outside its declared range (config, context length) */
  KILN_STATUS_INTERNAL = 12,        /* kiln's own bug: report it */
  KILN_STATUS_CHECK_FAILED = 13     /* a numerical check (parity, golden) failed */
} kiln_status_code;

typedef struct kiln_status_s *kiln_status;

/* A new status with `code` (not KILN_STATUS_OK) and a printf-style message.
 * Never returns NULL: if the allocation itself fails, a static
 * out-of-memory status is returned, which kiln_status_free() ignores. */
kiln_status kiln_status_new(kiln_status_code code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
kiln_status kiln_status_newv(kiln_status_code code, const char *fmt, va_list ap);

/* Prepends "<context>: " to st's message and returns st. NULL in, NULL out,
 * so `return kiln_status_annotate(f(), "while X")` is safe on success. */
kiln_status kiln_status_annotate(kiln_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
kiln_status kiln_status_annotatev(kiln_status st, const char *fmt, va_list ap);

/* KILN_STATUS_OK for NULL. */
kiln_status_code kiln_status_code_of(kiln_status st);

/* The full message, context first; "" for NULL. Valid until st is freed. */
const char *kiln_status_message(kiln_status st);

/* The code's name, e.g. "MALFORMED". */
const char *kiln_status_code_name(kiln_status_code code);

/* Releases st; NULL is fine. */
void kiln_status_free(kiln_status st);

/* Returns from the enclosing function if `expr` failed. */
#define KILN_RETURN_IF_ERROR(expr)                                            \
  do {                                                                        \
    kiln_status kiln_status_tmp_ = (expr);                                    \
    if (kiln_status_tmp_) return kiln_status_tmp_;                            \
  } while (0)

#ifdef __cplusplus
}
#endif
#endif /* KILN_STATUS_H */
