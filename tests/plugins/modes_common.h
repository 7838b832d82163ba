/* A test plugin that opens and says a describe_modes line (ABI 2.3), built
 * as three entry tables: one of ABI 2.3, one of 2.2 (whose table ends
 * before describe_modes, so the host must not read the pointer the object
 * still holds), and one that claims 2.3 with 2.2's size (refused). It runs
 * nothing: the tests only load it, open it and ask. */
#ifndef KILN_MODES_COMMON_H
#define KILN_MODES_COMMON_H

#include <stddef.h>
#include <stdio.h>

#include "kiln/plugin.h"

static int m_instance; /* open()'s backend: any non-NULL pointer */

static kiln_status m_init(const kiln_host_api *h, void **out) {
  (void)h;
  *out = &m_instance;
  return NULL;
}
static void m_fini(void *p) { (void)p; }
static kiln_status m_probe(void *p, kiln_probe_info *i) {
  (void)p;
  i->available = true;
  return NULL;
}
static kiln_status m_open(void *p, const kiln_config_section *c, void **o) {
  (void)c;
  *o = p;
  return NULL;
}
static void m_close(void *b) { (void)b; }
static kiln_status m_supports(void *b, const kiln_node *n) { (void)b; (void)n; return NULL; }
static kiln_status m_alloc(void *b, const kiln_tensor *t, void **o) { (void)b; (void)t; *o = NULL; return NULL; }
static void m_free(void *b, void *buf) { (void)b; (void)buf; }
static kiln_status m_copy_in(void *b, void *buf, uint64_t o, const void *s, uint64_t n) { (void)b; (void)buf; (void)o; (void)s; (void)n; return NULL; }
static kiln_status m_copy_out(void *b, void *buf, uint64_t o, void *d, uint64_t n) { (void)b; (void)buf; (void)o; (void)d; (void)n; return NULL; }
static kiln_status m_prepare(void *b, const kiln_node *n) { (void)b; (void)n; return NULL; }
static kiln_status m_run(void *b, const kiln_step *s) { (void)b; (void)s; return NULL; }
static kiln_status m_sync(void *b) { (void)b; return NULL; }
/* Writes more than any small cap holds, so a test sees the host cut it. */
static kiln_status m_describe(void *b, char *out, size_t cap) {
  (void)b;
  snprintf(out, cap, "widgets exact: 3 of 4 nodes (1 approximate: too wide)");
  return NULL;
}

#define MODES_OPS(NAME, MINOR, SIZE)                                                   \
  const kiln_backend_ops kiln_backend_entry = {                                        \
      KILN_PLUGIN_ABI_MAJOR, MINOR, SIZE, NAME, "describe_modes test plugin", NULL, 0, \
      m_init, m_fini, m_probe, m_open, m_close, m_supports, m_alloc, NULL, m_free,     \
      m_copy_in, m_copy_out, m_prepare, m_run, m_sync, NULL, m_describe}

/* The table as ABI 2.2 ended it. */
#define MODES_SIZE_2_2 offsetof(kiln_backend_ops, describe_modes)

#endif
