/*
 * kiln/golden.h — golden sets: prompts with the token ids a reference
 * (llama.cpp, pinned; tests/golden/make_golden.py says how) produced, for
 * `kiln qa` and `make check`.
 *
 * The file is INI (read with inih), one section per case:
 *
 *   [once-upon]
 *   prompt = "Once upon a time"       ; C escapes: \n \t \" \\ \xNN
 *   chat = false                      ; true: render the chat template once
 *   n = 64                            ; tokens to generate (greedy)
 *   prompt_ids = 1 403 407 261 378    ; optional: the reference's prompt tokens
 *   ids = 432 383 286 ...             ; the reference's generated tokens
 *   text = ", there was ..."          ; optional: their text
 *   top = 432:17.7989 383:14.2825     ; optional: largest logits after the prompt
 *
 * inih reads lines of at most 199 bytes, so a long value continues on
 * indented lines (inih's multi-line values): ids and top pairs append, and
 * each quoted piece of a string is appended to it, like adjacent C string
 * literals. Errors name the file and line (KILN_STATUS_MALFORMED): a case
 * name used twice (at the second header), a key set twice in a case, a
 * top entry that is not a whole id:logit pair ("383:9." is one cut short),
 * more ids than n (at the ids line).
 */
#ifndef KILN_GOLDEN_H
#define KILN_GOLDEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_GOLDEN_MAX_TOP 16

typedef struct kiln_golden_case {
  char *name;
  char *prompt;           /* unescaped, NUL-terminated (may hold NUL bytes: prompt_len) */
  size_t prompt_len;
  bool chat;
  int32_t n;              /* tokens to generate */
  int32_t *prompt_ids;    /* NULL when not given */
  size_t n_prompt_ids;
  int32_t *ids;
  size_t n_ids;           /* may be < n when the reference stopped at EOS */
  char *text;             /* NULL when not given */
  size_t text_len;
  int32_t top_id[KILN_GOLDEN_MAX_TOP];
  float top_logit[KILN_GOLDEN_MAX_TOP];
  int n_top;
  int line;               /* of the [section] header */
} kiln_golden_case;

typedef struct kiln_golden {
  char *path;
  kiln_golden_case *cases;
  size_t n_cases;
} kiln_golden;

/* Reads and checks `path`: every case needs prompt, n (1..65536) and ids;
 * unknown keys, malformed numbers and bad escapes are errors naming
 * path:line. */
kiln_status kiln_golden_load(const char *path, kiln_golden **out_golden);
void kiln_golden_free(kiln_golden *g);

/* What replaying one case gave. */
typedef struct kiln_golden_result {
  bool pass;              /* every check below holds */
  bool prompt_ids_match;  /* true when the case lists none */
  bool text_match;        /* the generated pieces equal `text`; true when the case has none */
  double top_max_rel;     /* largest |logit - reference| / max(1, |reference|) over `top` (0 when none) */
  int32_t *ids;           /* the generated ids (malloc'd; kiln_golden_result_clear) */
  size_t n_ids;
  long first_mismatch;    /* index of the first differing id, -1 when none */
} kiln_golden_result;

struct kiln_session;
struct kiln_model;

/* Replays case c on session s (reset first): the prompt through
 * kiln_prompt_tokenize (chat or raw, as the case says; a raw prompt's
 * special-token texts stay text, as make_golden.py tokenizes with
 * special=False), then c->n greedy
 * tokens, stopping after EOS or end-of-turn as the reference did. The
 * result passes when the prompt ids (if listed), every generated id, the
 * text (if given) and the logits after the prompt (if `top` is given,
 * within KILN_GOLDEN_TOP_TOLERANCE relative) equal the reference's.
 * Errors (not mismatches) are returned: no vocabulary, no template for a
 * chat case, a reference id outside the vocabulary, evaluation errors. */
#define KILN_GOLDEN_TOP_TOLERANCE 1e-4
kiln_status kiln_golden_run(struct kiln_session *s, const kiln_golden_case *c, kiln_golden_result *out);
void kiln_golden_result_clear(kiln_golden_result *r);

#ifdef __cplusplus
}
#endif
#endif
