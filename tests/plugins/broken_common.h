/* The ops a deliberately broken test plugin needs to look real. The loader
 * must refuse the plugin before calling any of them: init fails with its
 * own message, so a test that sees the ABI message knows init never ran. */
#ifndef KILN_BROKEN_COMMON_H
#define KILN_BROKEN_COMMON_H

#include <stdlib.h>

#include "kiln/plugin.h"

static kiln_status b_init(const kiln_host_api *h, void **out) {
  *out = NULL;
  return h->status_new(KILN_STATUS_INTERNAL, "a broken plugin's init ran");
}
static void b_fini(void *p) { (void)p; }
static kiln_status b_probe(void *p, kiln_probe_info *i) { (void)p; (void)i; return NULL; }
static kiln_status b_open(void *p, const kiln_config_section *c, void **o) { (void)p; (void)c; *o = NULL; return NULL; }
static void b_close(void *b) { (void)b; }
static kiln_status b_supports(void *b, const kiln_node *n) { (void)b; (void)n; return NULL; }
static kiln_status b_alloc(void *b, const kiln_tensor *t, void **o) { (void)b; (void)t; *o = NULL; return NULL; }
static void b_free(void *b, void *buf) { (void)b; (void)buf; }
static kiln_status b_copy_in(void *b, void *buf, uint64_t o, const void *s, uint64_t n) { (void)b; (void)buf; (void)o; (void)s; (void)n; return NULL; }
static kiln_status b_copy_out(void *b, void *buf, uint64_t o, void *d, uint64_t n) { (void)b; (void)buf; (void)o; (void)d; (void)n; return NULL; }
static kiln_status b_prepare(void *b, const kiln_node *n) { (void)b; (void)n; return NULL; }
static kiln_status b_run(void *b, const kiln_step *s) { (void)b; (void)s; return NULL; }
static kiln_status b_sync(void *b) { (void)b; return NULL; }

#define BROKEN_OPS(NAME, MAJOR, MINOR, SIZE)                                           \
  const kiln_backend_ops kiln_backend_entry = {                                        \
      MAJOR, MINOR, SIZE, NAME, "deliberately broken test plugin", NULL, 0,            \
      b_init, b_fini, b_probe, b_open, b_close, b_supports, b_alloc, NULL, b_free,     \
      b_copy_in, b_copy_out, b_prepare, b_run, b_sync}

#endif
