/* The canonical form of a descriptor and its key (format documented in
 * kiln/kcache.h), and the rendering of a template's source from a
 * descriptor. This is the only code that forms either.
 *
 * KILN_KCACHE_TEST_DROP_PARAM (a string, e.g. "eps") exists only for the
 * test that proves the guard can go red (tests/unit/kcache.mk builds this
 * file a second time with it): the named parameter is then left out of the
 * canonical text AND of the source hash the key covers, i.e. it simulates a
 * service whose key is incomplete, the defect at the top of DESIGN.md. The
 * library users get is never built with it. */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "kcache_internal.h"

void kiln__kcache_hash_key(const void *data, size_t size, kiln_kkey *out) {
  XXH128_hash_t h = XXH3_128bits(data, size);
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, h);
  memcpy(out->opaque, c.digest, sizeof out->opaque);
}

void kiln__kcache_hash_hex(const void *data, size_t size, char out[KILN_KKEY_HEX_SIZE]) {
  kiln_kkey k;
  kiln__kcache_hash_key(data, size, &k);
  kiln_kkey_format(&k, out);
}

void kiln_kkey_format(const kiln_kkey *k, char out[KILN_KKEY_HEX_SIZE]) {
  static const char hex[] = "0123456789abcdef";
  for (int i = 0; i < 16; i++) {
    out[2 * i] = hex[k->opaque[i] >> 4];
    out[2 * i + 1] = hex[k->opaque[i] & 15];
  }
  out[32] = '\0';
}

bool kiln_kkey_equal(const kiln_kkey *a, const kiln_kkey *b) {
  return memcmp(a->opaque, b->opaque, sizeof a->opaque) == 0;
}

/* A growing NUL-terminated string; `failed` sticks after an allocation
 * failure so callers check once at the end. */
typedef struct strbuf {
  char *s;
  size_t len, cap;
  bool failed;
} strbuf;

static void sb_append(strbuf *b, const char *s, size_t n) {
  if (b->failed) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (b->len + n + 1 > cap) cap *= 2;
    char *g = realloc(b->s, cap);
    if (!g) {
      b->failed = true;
      return;
    }
    b->s = g;
    b->cap = cap;
  }
  memcpy(b->s + b->len, s, n);
  b->len += n;
  b->s[b->len] = '\0';
}

static void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(strbuf *b, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->failed = true;
  } else if ((size_t)n < sizeof tmp) {
    sb_append(b, tmp, (size_t)n);
  } else {
    char *big = malloc((size_t)n + 1);
    if (!big) {
      b->failed = true;
      return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb_append(b, big, (size_t)n);
    free(big);
  }
}

static kiln_status sb_finish(strbuf *b, const char *what, char **out) {
  if (b->failed || !b->s) {
    free(b->s);
    return kiln_status_new(KILN_STATUS_NO_MEMORY, "%s: out of memory", what);
  }
  *out = b->s;
  return NULL;
}

void kiln__kcache_render_value(kiln_kparam_type type, const kcache_value *v, char out[64]) {
  switch (type) {
  case KILN_KPARAM_F32: {
    float f;
    memcpy(&f, &v->u.f32_bits, sizeof f);
    /* %a of the float widened to double is exact; the f suffix makes the
     * literal a float again, with the same 32 bits. */
    snprintf(out, 64, f < 0 || (f == 0 && (v->u.f32_bits >> 31)) ? "(%af)" : "%af", (double)f);
    break;
  }
  case KILN_KPARAM_F64: {
    double x;
    memcpy(&x, &v->u.f64_bits, sizeof x);
    snprintf(out, 64, x < 0 || (x == 0 && (v->u.f64_bits >> 63)) ? "(%a)" : "%a", x);
    break;
  }
  case KILN_KPARAM_I64:
    if (v->u.i64 == INT64_MIN)
      snprintf(out, 64, "(-9223372036854775807LL - 1)");
    else
      snprintf(out, 64, v->u.i64 < 0 ? "(%" PRId64 "%s)" : "%" PRId64 "%s", v->u.i64,
               v->u.i64 < INT32_MIN || v->u.i64 > INT32_MAX ? "LL" : "");
    break;
  case KILN_KPARAM_STR: snprintf(out, 64, "%s", v->str); break;
  case KILN_KPARAM_DTYPE: snprintf(out, 64, "%s", kiln_type_name(v->u.dtype)); break;
  default: snprintf(out, 64, "?"); break;
  }
}

static const char *first_unset(const kiln_kdesc *d) {
  const kcache_tmpl *t = d->tmpl;
  for (uint32_t k = 0; k < t->pub.n_params; k++) {
    uint32_t i = t->by_name[k];
    if (t->params[i].kind == KILN_KPARAM_BAKED && !d->values[i].set) return t->params[i].name;
  }
  return NULL;
}

static kiln_status check_complete(const kiln_kdesc *d) {
  if (!d) return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "kernel descriptor is NULL");
  const char *missing = first_unset(d);
  if (missing)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "template %s: baked parameter %s was never set in the descriptor",
                           d->tmpl->pub.name, missing);
  return NULL;
}

/* Renders the source; a parameter named `hide` (test builds only) keeps
 * its placeholder text instead of its value. */
static kiln_status render(const kiln_kdesc *d, const char *hide, char **out_source) {
  const kcache_tmpl *t = d->tmpl;
  strbuf b = {0};
  for (uint32_t i = 0; i < t->n_segs; i++) {
    const kcache_seg *s = &t->segs[i];
    sb_append(&b, t->pub.source + s->off, s->len);
    if (s->param < 0) continue;
    const kiln_kparam_decl *p = &t->params[s->param];
    if (hide && strcmp(p->name, hide) == 0) {
      sb_printf(&b, "{{%s}}", p->name);
      continue;
    }
    char val[64];
    kiln__kcache_render_value(p->type, &d->values[s->param], val);
    sb_append(&b, val, strlen(val));
  }
  return sb_finish(&b, "rendering a kernel source", out_source);
}

kiln_status kiln__kdesc_render(const kiln_kdesc *d, char **out_source) {
  KILN_RETURN_IF_ERROR(check_complete(d));
  return render(d, NULL, out_source);
}

static void canon_value(strbuf *b, const kiln_kparam_decl *p, const kcache_value *v) {
  switch (p->type) {
  case KILN_KPARAM_F32: sb_printf(b, "param %s f32 0x%08" PRIx32 "\n", p->name, v->u.f32_bits); break;
  case KILN_KPARAM_F64: sb_printf(b, "param %s f64 0x%016" PRIx64 "\n", p->name, v->u.f64_bits); break;
  case KILN_KPARAM_I64: sb_printf(b, "param %s i64 %" PRId64 "\n", p->name, v->u.i64); break;
  case KILN_KPARAM_STR: sb_printf(b, "param %s str %s\n", p->name, v->str); break;
  case KILN_KPARAM_DTYPE:
    sb_printf(b, "param %s dtype %s\n", p->name, kiln_type_name(v->u.dtype));
    break;
  default: b->failed = true; break; /* unreachable: registration checks baked types */
  }
}

kiln_status kiln_kdesc_canonical(const kiln_kdesc *d, char **out_text) {
  if (!out_text) return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "kdesc_canonical: NULL");
  KILN_RETURN_IF_ERROR(check_complete(d));
#ifdef KILN_KCACHE_TEST_DROP_PARAM
  const char *drop = KILN_KCACHE_TEST_DROP_PARAM;
#else
  const char *drop = NULL;
#endif
  const kcache_tmpl *t = d->tmpl;
  const kiln_kcompiler *c = d->compiler;
  strbuf b = {0};
  sb_printf(&b, "kiln-kdesc %d\n", KILN_KCACHE_CANON_VERSION);
  sb_printf(&b, "template %s\n", t->pub.name);
  sb_printf(&b, "template-version %" PRIu32 "\n", t->pub.version);
  sb_printf(&b, "template-source xxh3-128:%s\n", t->source_hash);
  sb_printf(&b, "entry %s\n", t->pub.entry);
  for (uint32_t k = 0; k < t->pub.n_params; k++) {
    uint32_t i = t->by_name[k];
    const kiln_kparam_decl *p = &t->params[i];
    if (p->kind != KILN_KPARAM_BAKED) continue;
    if (drop && strcmp(p->name, drop) == 0) continue;
    canon_value(&b, p, &d->values[i]);
  }
  sb_printf(&b, "compiler %s\n", c->name);
  sb_printf(&b, "compiler-version %s\n", c->version);
  sb_printf(&b, "arch %s\n", c->arch);
  for (uint32_t i = 0; i < c->n_options; i++) sb_printf(&b, "option %s\n", c->options[i]);
  sb_printf(&b, "kernel-abi %d\n", KILN_KERNEL_ABI);
  char *src = NULL;
  kiln_status st = render(d, drop, &src);
  if (st) {
    free(b.s);
    return st;
  }
  char hex[KILN_KKEY_HEX_SIZE];
  kiln__kcache_hash_hex(src, strlen(src), hex);
  free(src);
  sb_printf(&b, "source xxh3-128:%s\n", hex);
  return sb_finish(&b, "canonical descriptor", out_text);
}

kiln_status kiln_kdesc_key(const kiln_kdesc *d, kiln_kkey *out_key) {
  if (!out_key) return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "kdesc_key: NULL");
  char *text = NULL;
  KILN_RETURN_IF_ERROR(kiln_kdesc_canonical(d, &text));
  kiln__kcache_hash_key(text, strlen(text), out_key);
  free(text);
  return NULL;
}
