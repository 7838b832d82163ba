/* Descriptors: a template, a compiler (the target fingerprint) and one
 * typed value per baked parameter, filled only through these setters. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kcache_internal.h"

kiln_status kiln_kdesc_new(kiln_kcompiler *c, const char *template_name, kiln_kdesc **out_desc) {
  if (!c || !template_name || !out_desc)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "kdesc_new: NULL argument");
  *out_desc = NULL;
  pthread_mutex_lock(&c->kc->mu);
  const kcache_tmpl *t = kiln__kcache_find_template(c->kc, template_name);
  pthread_mutex_unlock(&c->kc->mu);
  if (!t)
    return kiln_status_new(KILN_STATUS_NOT_FOUND,
                           "kernel template %s is not registered with the kernel cache",
                           template_name);
  kiln_kdesc *d = calloc(1, sizeof *d);
  if (!d) return kiln_status_new(KILN_STATUS_NO_MEMORY, "kdesc_new: out of memory");
  d->compiler = c;
  d->tmpl = t;
  *out_desc = d;
  return NULL;
}

void kiln_kdesc_free(kiln_kdesc *d) { free(d); }

/* The slot for baked parameter `name` of type `type`, or an error naming
 * the template and the parameter. */
static kiln_status slot_for(kiln_kdesc *d, const char *name, kiln_kparam_type type,
                            kcache_value **out) {
  if (!d || !name)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "kdesc_set: NULL argument");
  const kcache_tmpl *t = d->tmpl;
  for (uint32_t i = 0; i < t->pub.n_params; i++) {
    const kiln_kparam_decl *p = &t->params[i];
    if (strcmp(p->name, name) != 0) continue;
    if (p->kind != KILN_KPARAM_BAKED)
      return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                             "template %s: parameter %s is a runtime kernel argument, not part "
                             "of a descriptor",
                             t->pub.name, name);
    if (p->type != type)
      return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                             "template %s: parameter %s is declared %s, set as %s",
                             t->pub.name, name, kiln_kparam_type_name(p->type),
                             kiln_kparam_type_name(type));
    *out = &d->values[i];
    return NULL;
  }
  return kiln_status_new(KILN_STATUS_NOT_FOUND,
                         "template %s: no parameter %s in its schema", t->pub.name, name);
}

kiln_status kiln_kdesc_set_f32(kiln_kdesc *d, const char *name, float v) {
  kcache_value *s;
  KILN_RETURN_IF_ERROR(slot_for(d, name, KILN_KPARAM_F32, &s));
  if (!isfinite(v))
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "template %s: parameter %s: %g is not finite", d->tmpl->pub.name,
                           name, (double)v);
  memset(s, 0, sizeof *s);
  memcpy(&s->u.f32_bits, &v, sizeof v);
  s->set = true;
  return NULL;
}

kiln_status kiln_kdesc_set_f64(kiln_kdesc *d, const char *name, double v) {
  kcache_value *s;
  KILN_RETURN_IF_ERROR(slot_for(d, name, KILN_KPARAM_F64, &s));
  if (!isfinite(v))
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "template %s: parameter %s: %g is not finite", d->tmpl->pub.name,
                           name, v);
  memset(s, 0, sizeof *s);
  memcpy(&s->u.f64_bits, &v, sizeof v);
  s->set = true;
  return NULL;
}

kiln_status kiln_kdesc_set_i64(kiln_kdesc *d, const char *name, int64_t v) {
  kcache_value *s;
  KILN_RETURN_IF_ERROR(slot_for(d, name, KILN_KPARAM_I64, &s));
  memset(s, 0, sizeof *s);
  s->u.i64 = v;
  s->set = true;
  return NULL;
}

kiln_status kiln_kdesc_set_str(kiln_kdesc *d, const char *name, const char *v) {
  kcache_value *s;
  KILN_RETURN_IF_ERROR(slot_for(d, name, KILN_KPARAM_STR, &s));
  static const char allowed[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_";
  if (!v || !*v || strlen(v) >= KILN_KCACHE_NAME_MAX || strspn(v, allowed) != strlen(v))
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "template %s: parameter %s: \"%s\" is not [A-Za-z0-9_]{1,63}",
                           d->tmpl->pub.name, name, v ? v : "(null)");
  memset(s, 0, sizeof *s);
  strcpy(s->str, v);
  s->set = true;
  return NULL;
}

kiln_status kiln_kdesc_set_dtype(kiln_kdesc *d, const char *name, kiln_type v) {
  kcache_value *s;
  KILN_RETURN_IF_ERROR(slot_for(d, name, KILN_KPARAM_DTYPE, &s));
  if (!kiln_type_is_known(v))
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "template %s: parameter %s: type id %d is not one kiln knows",
                           d->tmpl->pub.name, name, (int)v);
  memset(s, 0, sizeof *s);
  s->u.dtype = (int32_t)v;
  s->set = true;
  return NULL;
}
