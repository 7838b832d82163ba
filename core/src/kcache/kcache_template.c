/* Template registry of the kernel-cache service: validates a template's
 * schema against its source (every placeholder declared, every declared
 * parameter used) and keeps a parsed copy. See kiln/kcache.h. */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcache_internal.h"

bool kiln__kcache_name_ok(const char *s) {
  if (!s || !*s || strlen(s) >= KILN_KCACHE_NAME_MAX) return false;
  if (!(islower((unsigned char)s[0]) || s[0] == '_')) return false;
  for (const char *p = s; *p; p++)
    if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '_')) return false;
  return true;
}

bool kiln__kcache_ident_ok(const char *s) {
  if (!s || !*s || strlen(s) >= KILN_KCACHE_NAME_MAX) return false;
  if (!(isalpha((unsigned char)s[0]) || s[0] == '_')) return false;
  for (const char *p = s; *p; p++)
    if (!(isalnum((unsigned char)*p) || *p == '_')) return false;
  return true;
}

static bool template_name_ok(const char *s) {
  if (!s || !*s || strlen(s) >= KILN_KCACHE_NAME_MAX) return false;
  for (const char *p = s; *p; p++)
    if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '_')) return false;
  return true;
}

static bool text_ok(const char *s) {
  for (const char *p = s; p && *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f) return false;
  return true;
}

const kcache_tmpl *kiln__kcache_find_template(const kiln_kcache *kc, const char *name) {
  for (uint32_t i = 0; i < kc->n_tmpls; i++)
    if (strcmp(kc->tmpls[i]->pub.name, name) == 0) return kc->tmpls[i];
  return NULL;
}

void kiln__kcache_template_free(kcache_tmpl *t) {
  if (!t) return;
  for (uint32_t i = 0; i < t->pub.n_params; i++) {
    free((char *)t->params[i].name);
    free((char *)t->params[i].help);
  }
  free(t->params);
  free(t->by_name);
  free(t->segs);
  free((char *)t->pub.name);
  free((char *)t->pub.entry);
  free((char *)t->pub.source);
  free((char *)t->pub.help);
  free(t);
}

static int line_of(const char *src, size_t off) {
  int line = 1;
  for (size_t i = 0; i < off; i++)
    if (src[i] == '\n') line++;
  return line;
}

static int find_param(const kiln_ktemplate *t, const char *name, size_t len) {
  for (uint32_t i = 0; i < t->n_params; i++)
    if (strlen(t->params[i].name) == len && memcmp(t->params[i].name, name, len) == 0)
      return (int)i;
  return -1;
}

/* Does `name` occur in src as a whole identifier (outside placeholders)? */
static bool source_names(const char *src, const char *name) {
  size_t n = strlen(name);
  for (const char *p = strstr(src, name); p; p = strstr(p + 1, name)) {
    bool left = p == src || !(isalnum((unsigned char)p[-1]) || p[-1] == '_' || p[-1] == '{');
    bool right = !(isalnum((unsigned char)p[n]) || p[n] == '_' || p[n] == '}');
    if (left && right) return true;
  }
  return false;
}

static void declared_list(const kiln_ktemplate *t, kiln_kparam_kind kind, char *out, size_t cap) {
  out[0] = '\0';
  size_t used = 0;
  for (uint32_t i = 0; i < t->n_params && used + 1 < cap; i++) {
    if (t->params[i].kind != kind) continue;
    int w = snprintf(out + used, cap - used, "%s%s", used ? ", " : "", t->params[i].name);
    if (w < 0) break;
    used += (size_t)w;
  }
  if (!out[0]) snprintf(out, cap, "none");
}

/* Splits the source into literal runs and placeholders, checking each
 * placeholder against the schema. */
static kiln_status parse_source(const kiln_ktemplate *t, kcache_tmpl *c) {
  const char *src = t->source;
  size_t cap = 8, n = 0;
  kcache_seg *segs = malloc(cap * sizeof *segs);
  bool used[KILN_KTEMPLATE_MAX_PARAMS] = {false};
  if (!segs) return kiln_status_new(KILN_STATUS_NO_MEMORY, "template %s: out of memory", t->name);
  size_t lit = 0, i = 0;
  char decl[512];
  for (;;) {
    const char *open = strstr(src + i, "{{");
    if (n + 1 >= cap) {
      kcache_seg *g = realloc(segs, 2 * cap * sizeof *segs);
      if (!g) {
        free(segs);
        return kiln_status_new(KILN_STATUS_NO_MEMORY, "template %s: out of memory", t->name);
      }
      segs = g;
      cap *= 2;
    }
    if (!open) {
      segs[n++] = (kcache_seg){lit, strlen(src) - lit, -1};
      break;
    }
    size_t at = (size_t)(open - src);
    size_t nb = at + 2, ne = nb;
    while (src[ne] && (islower((unsigned char)src[ne]) || isdigit((unsigned char)src[ne]) ||
                       src[ne] == '_'))
      ne++;
    if (ne == nb || src[ne] != '}' || src[ne + 1] != '}' || isdigit((unsigned char)src[nb])) {
      free(segs);
      return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                             "template %s: source line %d: \"{{\" does not open a placeholder "
                             "{{name}} (name [a-z_][a-z0-9_]*, no spaces; write \"{ {\" for "
                             "nested braces)",
                             t->name, line_of(src, at));
    }
    int p = find_param(t, src + nb, ne - nb);
    if (p < 0 || t->params[p].kind != KILN_KPARAM_BAKED) {
      declared_list(t, KILN_KPARAM_BAKED, decl, sizeof decl);
      kiln_status st = kiln_status_new(
          KILN_STATUS_INVALID_ARGUMENT,
          "template %s: source line %d uses placeholder {{%.*s}}, but parameter %.*s is %s "
          "(declared baked parameters: %s)",
          t->name, line_of(src, at), (int)(ne - nb), src + nb, (int)(ne - nb), src + nb,
          p < 0 ? "not declared in the schema" : "declared runtime (a kernel argument)", decl);
      free(segs);
      return st;
    }
    used[p] = true;
    segs[n++] = (kcache_seg){lit, at - lit, p};
    i = lit = ne + 2;
  }
  for (uint32_t k = 0; k < t->n_params; k++) {
    const kiln_kparam_decl *pd = &t->params[k];
    bool ok = pd->kind == KILN_KPARAM_BAKED ? used[k] : source_names(src, pd->name);
    if (!ok) {
      free(segs);
      if (pd->kind == KILN_KPARAM_BAKED)
        return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                               "template %s: declares baked parameter %s, which the source "
                               "never uses (no {{%s}} placeholder)",
                               t->name, pd->name, pd->name);
      return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                             "template %s: declares runtime parameter %s, which the source "
                             "never uses (no kernel argument named %s)",
                             t->name, pd->name, pd->name);
    }
  }
  c->segs = segs;
  c->n_segs = (uint32_t)n;
  return NULL;
}

static kiln_status check_schema(const kiln_ktemplate *t) {
  if (!template_name_ok(t->name))
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "template name \"%s\": use [a-z0-9_]+, under %d characters",
                           t->name ? t->name : "(null)", KILN_KCACHE_NAME_MAX);
  if (t->version < 1)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "template %s: version must be >= 1",
                           t->name);
  if (!kiln__kcache_ident_ok(t->entry))
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "template %s: entry \"%s\" is not a C identifier", t->name,
                           t->entry ? t->entry : "(null)");
  if (!t->source || !*t->source)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "template %s: empty source", t->name);
  if (!source_names(t->source, t->entry))
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "template %s: the source never names its entry %s", t->name,
                           t->entry);
  if (!text_ok(t->help))
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "template %s: help has control characters", t->name);
  if (t->n_params > KILN_KTEMPLATE_MAX_PARAMS || (t->n_params && !t->params))
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "template %s: %u parameters (at most %d)", t->name, t->n_params,
                           KILN_KTEMPLATE_MAX_PARAMS);
  for (uint32_t i = 0; i < t->n_params; i++) {
    const kiln_kparam_decl *p = &t->params[i];
    if (!kiln__kcache_name_ok(p->name))
      return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                             "template %s: parameter %u name \"%s\": use [a-z_][a-z0-9_]*",
                             t->name, i, p->name ? p->name : "(null)");
    if (p->kind != KILN_KPARAM_BAKED && p->kind != KILN_KPARAM_RUNTIME)
      return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                             "template %s: parameter %s: kind %d is neither baked nor runtime",
                             t->name, p->name, (int)p->kind);
    bool baked_type = p->type == KILN_KPARAM_F32 || p->type == KILN_KPARAM_F64 ||
                      p->type == KILN_KPARAM_I64 || p->type == KILN_KPARAM_STR ||
                      p->type == KILN_KPARAM_DTYPE;
    bool runtime_type = p->type == KILN_KPARAM_F32 || p->type == KILN_KPARAM_F64 ||
                        p->type == KILN_KPARAM_I64 || p->type == KILN_KPARAM_I32 ||
                        p->type == KILN_KPARAM_PTR;
    if (p->kind == KILN_KPARAM_BAKED ? !baked_type : !runtime_type)
      return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                             "template %s: parameter %s: type %s cannot be %s", t->name,
                             p->name, kiln_kparam_type_name(p->type),
                             p->kind == KILN_KPARAM_BAKED ? "baked" : "runtime");
    if (!text_ok(p->help))
      return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                             "template %s: parameter %s: help has control characters", t->name,
                             p->name);
    for (uint32_t j = 0; j < i; j++)
      if (strcmp(t->params[j].name, p->name) == 0)
        return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                               "template %s: parameter %s declared twice", t->name, p->name);
  }
  return NULL;
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

/* Insertion sort of parameter indices by name (at most
 * KILN_KTEMPLATE_MAX_PARAMS; qsort has no context argument in C11). */
static void sort_by_name(kcache_tmpl *c) {
  for (uint32_t i = 1; i < c->pub.n_params; i++) {
    uint32_t v = c->by_name[i], j = i;
    while (j > 0 && strcmp(c->params[c->by_name[j - 1]].name, c->params[v].name) > 0) {
      c->by_name[j] = c->by_name[j - 1];
      j--;
    }
    c->by_name[j] = v;
  }
}

static bool same_text(const char *a, const char *b) {
  return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool same_template(const kcache_tmpl *c, const kiln_ktemplate *t) {
  if (c->pub.version != t->version || strcmp(c->pub.entry, t->entry) != 0 ||
      strcmp(c->pub.source, t->source) != 0 || c->pub.n_params != t->n_params ||
      !same_text(c->pub.help, t->help))
    return false;
  for (uint32_t i = 0; i < t->n_params; i++) {
    const kiln_kparam_decl *a = &c->params[i], *b = &t->params[i];
    if (strcmp(a->name, b->name) != 0 || a->type != b->type || a->kind != b->kind ||
        !same_text(a->help, b->help))
      return false;
  }
  return true;
}

kiln_status kiln_kcache_register_template(kiln_kcache *kc, const kiln_ktemplate *t) {
  if (!kc || !t)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "register_template: NULL argument");
  KILN_RETURN_IF_ERROR(check_schema(t));

  kcache_tmpl *c = calloc(1, sizeof *c);
  if (!c) return kiln_status_new(KILN_STATUS_NO_MEMORY, "template %s: out of memory", t->name);
  kiln_status st = parse_source(t, c);
  if (st) {
    free(c);
    return st;
  }
  c->params = calloc(t->n_params ? t->n_params : 1, sizeof *c->params);
  c->by_name = calloc(t->n_params ? t->n_params : 1, sizeof *c->by_name);
  c->pub.name = strdup(t->name);
  c->pub.entry = strdup(t->entry);
  c->pub.source = strdup(t->source);
  c->pub.help = dup_or_null(t->help);
  c->pub.version = t->version;
  c->pub.n_params = t->n_params;
  c->pub.params = c->params;
  bool oom = !c->params || !c->by_name || !c->pub.name || !c->pub.entry || !c->pub.source ||
             (t->help && !c->pub.help);
  for (uint32_t i = 0; !oom && i < t->n_params; i++) {
    c->params[i] = t->params[i];
    c->params[i].name = strdup(t->params[i].name);
    c->params[i].help = dup_or_null(t->params[i].help);
    oom = !c->params[i].name || (t->params[i].help && !c->params[i].help);
    c->by_name[i] = i;
  }
  if (oom) {
    kiln__kcache_template_free(c);
    return kiln_status_new(KILN_STATUS_NO_MEMORY, "template %s: out of memory", t->name);
  }
  kiln__kcache_hash_hex(c->pub.source, strlen(c->pub.source), c->source_hash);

  sort_by_name(c);

  pthread_mutex_lock(&kc->mu);
  const kcache_tmpl *old = kiln__kcache_find_template(kc, t->name);
  if (old) {
    bool same = same_template(old, t);
    pthread_mutex_unlock(&kc->mu);
    kiln__kcache_template_free(c);
    return same ? NULL
                : kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                                  "template %s: already registered with another version, "
                                  "entry, source or schema",
                                  t->name);
  }
  if (kc->n_tmpls == kc->cap_tmpls) {
    uint32_t cap = kc->cap_tmpls ? 2 * kc->cap_tmpls : 8;
    kcache_tmpl **g = realloc(kc->tmpls, cap * sizeof *g);
    if (!g) {
      pthread_mutex_unlock(&kc->mu);
      kiln__kcache_template_free(c);
      return kiln_status_new(KILN_STATUS_NO_MEMORY, "template %s: out of memory", t->name);
    }
    kc->tmpls = g;
    kc->cap_tmpls = cap;
  }
  kc->tmpls[kc->n_tmpls++] = c;
  pthread_mutex_unlock(&kc->mu);
  return NULL;
}

uint32_t kiln_kcache_template_count(const kiln_kcache *kc) { return kc ? kc->n_tmpls : 0; }

const kiln_ktemplate *kiln_kcache_template_at(const kiln_kcache *kc, uint32_t i) {
  return kc && i < kc->n_tmpls ? &kc->tmpls[i]->pub : NULL;
}

const char *kiln_kparam_type_name(kiln_kparam_type t) {
  switch (t) {
  case KILN_KPARAM_F32: return "f32";
  case KILN_KPARAM_F64: return "f64";
  case KILN_KPARAM_I64: return "i64";
  case KILN_KPARAM_STR: return "str";
  case KILN_KPARAM_DTYPE: return "dtype";
  case KILN_KPARAM_I32: return "i32";
  case KILN_KPARAM_PTR: return "ptr";
  default: return "?";
  }
}

const char *kiln_kimage_kind_name(kiln_kimage_kind k) {
  switch (k) {
  case KILN_KIMAGE_PTX: return "ptx";
  case KILN_KIMAGE_CUBIN: return "cubin";
  default: return "?";
  }
}
