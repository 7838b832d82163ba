/* Replaying a golden case: tokenize as the case says, generate greedily,
 * compare with the reference ids. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "kiln/chat.h"
#include "kiln/golden.h"
#include "kiln/kiln.h"

static kiln_status prompt_ids(const kiln_model *m, const kiln_golden_case *c, int32_t **ids, size_t *n) {
  const kiln_vocab *v = kiln_model_vocab(m);
  if (!v) return kiln_status_new(KILN_STATUS_UNSUPPORTED, "the model has no vocabulary");
  if (!c->chat)
    return kiln_tokenize(v, c->prompt, c->prompt_len, kiln_vocab_add_bos(v) ? KILN_TOKENIZE_ADD_BOS : 0, ids, n);
  kiln_chat_kind kind;
  KILN_RETURN_IF_ERROR(kiln_chat_detect(kiln_model_chat_template(m), &kind));
  if (kind == KILN_CHAT_NONE)
    return kiln_status_new(KILN_STATUS_UNSUPPORTED, "case [%s] is a chat case, but the model has no chat template",
                           c->name);
  kiln_chat_message msg = {"user", c->prompt};
  return kiln_chat_tokenize(v, kind, &msg, 1, true, ids, n, NULL);
}

kiln_status kiln_golden_run(kiln_session *s, const kiln_golden_case *c, kiln_golden_result *out) {
  memset(out, 0, sizeof *out);
  out->first_mismatch = -1;
  const kiln_model *m = kiln_session_model(s);
  int32_t *ids = NULL;
  size_t n = 0;
  KILN_RETURN_IF_ERROR(prompt_ids(m, c, &ids, &n));
  out->prompt_ids_match =
      !c->prompt_ids || (n == c->n_prompt_ids && memcmp(ids, c->prompt_ids, n * sizeof *ids) == 0);
  kiln_sampler *sm;
  kiln_status st = kiln_sampler_new(&(kiln_sampler_options){0.0f, 0, 1.0f, 0}, &sm);
  out->ids = calloc((size_t)c->n, sizeof *out->ids);
  if (!st && !out->ids) st = kiln_status_new(KILN_STATUS_NO_MEMORY, "golden ids");
  kiln_generate_stats stats = {0};
  if (!st) {
    kiln_session_reset(s);
    st = kiln_generate(s, ids, (int32_t)n, c->n, sm, NULL, NULL, out->ids, &stats);
  }
  kiln_sampler_free(sm);
  free(ids);
  if (st) {
    kiln_golden_result_clear(out);
    return kiln_status_annotate(st, "golden case [%s]", c->name);
  }
  out->n_ids = (size_t)stats.n_generated;
  size_t common = out->n_ids < c->n_ids ? out->n_ids : c->n_ids;
  for (size_t i = 0; i < common && out->first_mismatch < 0; i++)
    if (out->ids[i] != c->ids[i]) out->first_mismatch = (long)i;
  if (out->first_mismatch < 0 && out->n_ids != c->n_ids) out->first_mismatch = (long)common;
  out->pass = out->prompt_ids_match && out->first_mismatch < 0;
  return NULL;
}

void kiln_golden_result_clear(kiln_golden_result *r) {
  free(r->ids);
  r->ids = NULL;
  r->n_ids = 0;
}
