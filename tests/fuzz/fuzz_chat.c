/* libFuzzer target for chat rendering (core/src/tokenizer/chat.c): a
 * conversation of any roles and contents renders or is refused with a
 * status, and special tokens come only from the template: the rendered ids
 * hold exactly as many CONTROL and USER_DEFINED tokens as the same
 * conversation with every content empty, whatever the contents say
 * ("<|im_start|>", "[INST]", "<s>"). Real vocabularies: Qwen2's (ChatML,
 * and llama-3's markers, which it lacks) and llama's SentencePiece one
 * (llama-2).
 *
 * The next turn of a conversation (kiln_chat_next_turn, what `kiln run -i`
 * feeds after a reply) is held to the same rule with the last message's
 * content as the user's text.
 *
 * Input: byte 0 picks the template (bits 0-1: ChatML, llama-2, llama-3, or
 * kiln_prompt_tokenize's one-message path with Qwen2's own template), the
 * generation prompt (bit 2), whether special-token texts are parsed in a
 * raw or hand-templated prompt (bit 3), and whether the previous reply
 * ended in the model's turn-end token (bit 4); the rest is messages
 * separated by 0x1e, each a role byte (system, user, assistant by value mod
 * 3) and content. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_vocab.h"
#include "kiln/chat.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static kiln_vocab *qwen2, *llama;
static char *qwen2_template;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  qwen2 = fuzz_load_vocab("ggml-vocab-qwen2.gguf", &qwen2_template);
  llama = fuzz_load_vocab("ggml-vocab-llama-spm.gguf", NULL);
  if (!qwen2_template) abort();
  return 0;
}

static size_t count_special(const kiln_vocab *v, const int32_t *ids, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    kiln_token_type t = kiln_vocab_token_type(v, ids[i]);
    k += t == KILN_TOKEN_CONTROL || t == KILN_TOKEN_USER_DEFINED;
  }
  return k;
}

#define MAX_MSGS 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int mode = data[0] & 3;
  bool gen = data[0] & 4, parse_special = data[0] & 8, closed = data[0] & 16;
  const kiln_vocab *v = mode == 1 ? llama : qwen2;
  const char *rest = (const char *)data + 1;
  size_t n_rest = size - 1;

  if (mode == 3) { /* one prompt, its NUL bytes kept, maybe templated by hand */
    int32_t *ids, *bare;
    size_t n, n_bare;
    kiln_status st =
        kiln_prompt_tokenize(v, qwen2_template, rest, n_rest, true, parse_special, NULL, &ids, &n, NULL);
    if (st) abort(); /* any text renders */
    char *z = malloc(n_rest + 1);
    if (!z) abort();
    memcpy(z, rest, n_rest);
    z[n_rest] = '\0';
    if (!parse_special || !kiln_chat_is_templated(KILN_CHAT_CHATML, v, z)) {
      if (kiln_prompt_tokenize(v, qwen2_template, "", 0, true, parse_special, NULL, &bare, &n_bare, NULL))
        abort();
      if (count_special(v, ids, n) != count_special(v, bare, n_bare)) abort();
      free(bare);
    }
    free(z);
    free(ids);
    return 0;
  }

  static const kiln_chat_kind kinds[] = {KILN_CHAT_CHATML, KILN_CHAT_LLAMA2, KILN_CHAT_LLAMA3};
  static const char *const roles[] = {"system", "user", "assistant"};
  kiln_chat_message msgs[MAX_MSGS], empty[MAX_MSGS];
  char *contents[MAX_MSGS];
  size_t n_msgs = 0;
  for (size_t at = 0; at < n_rest && n_msgs < MAX_MSGS;) {
    const char *end = memchr(rest + at, 0x1e, n_rest - at);
    size_t len = end ? (size_t)(end - (rest + at)) : n_rest - at;
    const char *role = len ? roles[(unsigned char)rest[at] % 3] : "user";
    size_t clen = len ? len - 1 : 0;
    char *c = malloc(clen + 1);
    if (!c) abort();
    memcpy(c, rest + at + (len ? 1 : 0), clen);
    c[clen] = '\0'; /* the API takes C strings: a NUL inside ends it */
    contents[n_msgs] = c;
    msgs[n_msgs] = (kiln_chat_message){role, c};
    empty[n_msgs] = (kiln_chat_message){role, ""};
    n_msgs++;
    at += len + 1;
  }
  int32_t *ids = NULL, *bare = NULL;
  size_t n = 0, n_bare = 0;
  char *text = NULL;
  kiln_status st = kiln_chat_tokenize(v, kinds[mode], msgs, n_msgs, gen, &ids, &n, &text);
  kiln_status st_bare = kiln_chat_tokenize(v, kinds[mode], empty, n_msgs, gen, &bare, &n_bare, NULL);
  if (!st != !st_bare) abort(); /* refusals depend on the roles alone */
  if (st) {
    if (kiln_status_code_of(st) != KILN_STATUS_INVALID_ARGUMENT) abort();
    kiln_status_free(st);
    kiln_status_free(st_bare);
  } else {
    if (!text) abort();
    if (count_special(v, ids, n) != count_special(v, bare, n_bare)) abort();
    free(ids);
    free(bare);
    free(text);
  }
  /* the next turn after a reply, the last content as the user's text */
  const char *user = n_msgs ? contents[n_msgs - 1] : "";
  st = kiln_chat_next_turn(v, kinds[mode], closed, user, &ids, &n, NULL);
  st_bare = kiln_chat_next_turn(v, kinds[mode], closed, "", &bare, &n_bare, NULL);
  if (st || st_bare) abort(); /* every template has a next turn */
  if (count_special(v, ids, n) != count_special(v, bare, n_bare)) abort();
  free(ids);
  free(bare);
  for (size_t i = 0; i < n_msgs; i++) free(contents[i]);
  return 0;
}
