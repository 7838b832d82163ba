/* Replaying a golden case: tokenize as the case says, generate greedily,
 * compare with the reference ids. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/chat.h"
#include "kiln/golden.h"
#include "kiln/gguf.h"
#include "kiln/kiln.h"

static kiln_status prompt_ids(const kiln_model *m, const kiln_golden_case *c, int32_t **ids, size_t *n) {
  const kiln_vocab *v = kiln_model_vocab(m);
  if (!v)
    return kiln_status_new(KILN_STATUS_UNSUPPORTED,
                           "%s has no vocabulary (tokenizer.ggml.model is absent): cannot tokenize the prompt of "
                           "golden case [%s]",
                           kiln_gguf_path(kiln_model_gguf(m)), c->name);
  return kiln_prompt_tokenize(v, kiln_model_chat_template(m), c->prompt, c->prompt_len, c->chat, c->chat, NULL, ids, n,
                              NULL);
}

static kiln_status check_reference_ids(const kiln_golden_case *c, uint32_t n_vocab) {
  for (size_t i = 0; i < c->n_ids; i++)
    if ((uint32_t)c->ids[i] >= n_vocab)
      return kiln_status_new(KILN_STATUS_MALFORMED, "case [%s]: reference id %d (at %zu) is outside the vocabulary of %u",
                             c->name, c->ids[i], i, n_vocab);
  for (int k = 0; k < c->n_top; k++)
    if ((uint32_t)c->top_id[k] >= n_vocab || !isfinite(c->top_logit[k]))
      return kiln_status_new(KILN_STATUS_MALFORMED, "case [%s]: top entry %d:%g is not a finite logit of a token "
                             "in the vocabulary of %u", c->name, c->top_id[k], (double)c->top_logit[k], n_vocab);
  return NULL;
}

/* Greedy decoding from the logits after the prompt, as make_golden.py
 * does with llama.cpp: stop after n tokens or after EOS / end-of-turn. */
static kiln_status decode(kiln_session *s, const kiln_vocab *v, float *logits, int32_t n_vocab, int32_t n,
                          int32_t *out, size_t *out_n) {
  int32_t eos = kiln_vocab_eos(v), eot = kiln_vocab_eot(v);
  *out_n = 0;
  for (int32_t i = 0; i < n; i++) {
    int32_t tok = kiln_argmax(logits, n_vocab);
    out[(*out_n)++] = tok;
    if (tok == eos || tok == eot || i + 1 == n) break;
    KILN_RETURN_IF_ERROR(kiln_session_eval(s, &tok, 1, logits, NULL));
  }
  return NULL;
}

kiln_status kiln_golden_run(kiln_session *s, const kiln_golden_case *c, kiln_golden_result *out) {
  memset(out, 0, sizeof *out);
  out->first_mismatch = -1;
  const kiln_model *m = kiln_session_model(s);
  int32_t n_vocab = (int32_t)kiln_model_hparams(m)->n_vocab;
  KILN_RETURN_IF_ERROR(check_reference_ids(c, (uint32_t)n_vocab));
  int32_t *ids = NULL;
  size_t n = 0;
  KILN_RETURN_IF_ERROR(prompt_ids(m, c, &ids, &n));
  out->prompt_ids_match =
      !c->prompt_ids || (n == c->n_prompt_ids && memcmp(ids, c->prompt_ids, n * sizeof *ids) == 0);
  float *logits = malloc((size_t)n_vocab * sizeof *logits);
  out->ids = calloc((size_t)c->n, sizeof *out->ids);
  kiln_status st = logits && out->ids ? NULL : kiln_status_new(KILN_STATUS_NO_MEMORY, "golden case");
  if (!st) {
    kiln_session_reset(s);
    st = kiln_session_eval(s, ids, (int32_t)n, logits, NULL);
  }
  for (int k = 0; !st && k < c->n_top; k++) {
    double ref = c->top_logit[k], d = fabs((double)logits[c->top_id[k]] - ref) / fmax(1.0, fabs(ref));
    if (d > out->top_max_rel) out->top_max_rel = d;
  }
  if (!st) st = decode(s, kiln_model_vocab(m), logits, n_vocab, c->n, out->ids, &out->n_ids);
  out->text_match = true;
  if (!st && c->text) {
    size_t cap = c->text_len + 64 * out->n_ids + 1, len = 0;
    char *text = malloc(cap);
    if (!text) st = kiln_status_new(KILN_STATUS_NO_MEMORY, "golden text");
    for (size_t i = 0; !st && i < out->n_ids; i++)
      st = kiln_token_to_piece(kiln_model_vocab(m), out->ids[i], false, text, cap, &len);
    if (!st) out->text_match = len == c->text_len && memcmp(text, c->text, len) == 0;
    free(text);
  }
  free(logits);
  free(ids);
  if (st) {
    kiln_golden_result_clear(out);
    return kiln_status_annotate(st, "golden case [%s]", c->name);
  }
  size_t common = out->n_ids < c->n_ids ? out->n_ids : c->n_ids;
  for (size_t i = 0; i < common && out->first_mismatch < 0; i++)
    if (out->ids[i] != c->ids[i]) out->first_mismatch = (long)i;
  if (out->first_mismatch < 0 && out->n_ids != c->n_ids) out->first_mismatch = (long)common;
  out->pass = out->prompt_ids_match && out->first_mismatch < 0 && out->text_match &&
              out->top_max_rel <= KILN_GOLDEN_TOP_TOLERANCE;
  return NULL;
}

void kiln_golden_result_clear(kiln_golden_result *r) {
  free(r->ids);
  r->ids = NULL;
  r->n_ids = 0;
}
