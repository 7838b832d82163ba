/* Carrying a conversation on: the tokens after an assistant's reply that
 * is already in the KV cache (kiln/chat.h). Like llama.cpp's
 * common_chat_format_single, only what the template adds for the new
 * message is tokenized; the history is never rendered again. */
#include "config.h"

#include "kiln/chat.h"

#include <stdlib.h>
#include <string.h>

int32_t kiln_chat_turn_end(kiln_chat_kind kind, const kiln_vocab *v) {
  switch (kind) {
  case KILN_CHAT_CHATML: return kiln_vocab_find(v, "<|im_end|>", 10);
  case KILN_CHAT_LLAMA3: return kiln_vocab_find(v, "<|eot_id|>", 10);
  case KILN_CHAT_LLAMA2: return kiln_vocab_eos(v);
  case KILN_CHAT_NONE: return -1;
  }
  return -1;
}

/* What ends the reply in the template's own text, when the model did not
 * end it with the turn-end token. */
static const char *closing(kiln_chat_kind kind, bool reply_closed) {
  switch (kind) {
  case KILN_CHAT_CHATML: return reply_closed ? "\n" : "<|im_end|>\n";
  case KILN_CHAT_LLAMA3: return reply_closed ? "" : "<|eot_id|>";
  case KILN_CHAT_LLAMA2: return reply_closed ? "" : " </s>";
  case KILN_CHAT_NONE: return "";
  }
  return "";
}

kiln_status kiln_chat_next_turn(const kiln_vocab *v, kiln_chat_kind kind, bool reply_closed, const char *user,
                                int32_t **out_ids, size_t *out_n, char **out_text) {
  *out_ids = NULL;
  *out_n = 0;
  if (out_text) *out_text = NULL;
  if (kind == KILN_CHAT_NONE)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "a conversation needs a chat template");
  const char *close = closing(kind, reply_closed);
  int32_t *head = NULL, *turn = NULL;
  size_t n_head = 0, n_turn = 0;
  char *turn_text = NULL;
  kiln_status st = kiln_tokenize(v, close, strlen(close), KILN_TOKENIZE_PARSE_SPECIAL, &head, &n_head);
  kiln_chat_message msg = {"user", user};
  if (!st) st = kiln_chat_tokenize(v, kind, &msg, 1, true, &turn, &n_turn, out_text ? &turn_text : NULL);
  int32_t bos = kiln_vocab_bos(v);
  /* kiln_chat_tokenize puts BOS first as for a new conversation: only
   * llama-2's template repeats it before every turn. */
  size_t skip = n_turn > 0 && bos >= 0 && turn[0] == bos ? 1 : 0;
  bool add_bos = kind == KILN_CHAT_LLAMA2 && bos >= 0;
  int32_t *ids = NULL;
  if (!st) {
    ids = malloc((n_head + add_bos + n_turn - skip + 1) * sizeof *ids);
    if (!ids) st = kiln_status_new(KILN_STATUS_NO_MEMORY, "conversation turn");
  }
  size_t n = 0;
  if (!st) {
    memcpy(ids, head, n_head * sizeof *ids);
    n = n_head;
    if (add_bos) ids[n++] = bos;
    memcpy(ids + n, turn + skip, (n_turn - skip) * sizeof *ids);
    n += n_turn - skip;
  }
  if (!st && out_text) {
    size_t cl = strlen(close), tl = strlen(turn_text);
    const char *bos_text = add_bos ? kiln_vocab_token_text(v, bos) : "";
    size_t bl = strlen(bos_text); /* kiln_chat_tokenize's text leaves BOS out */
    char *t = malloc(cl + bl + tl + 1);
    if (!t) {
      st = kiln_status_new(KILN_STATUS_NO_MEMORY, "conversation turn");
    } else {
      memcpy(t, close, cl);
      memcpy(t + cl, bos_text, bl);
      memcpy(t + cl + bl, turn_text, tl + 1);
      *out_text = t;
    }
  }
  free(head);
  free(turn);
  free(turn_text);
  if (st) {
    free(ids);
    return st;
  }
  *out_ids = ids;
  *out_n = n;
  return NULL;
}
