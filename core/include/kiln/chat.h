/*
 * kiln/chat.h — chat templates: a conversation to prompt tokens.
 *
 * kiln recognises the template a GGUF carries (tokenizer.chat_template, a
 * Jinja text) by its markers, as llama.cpp's llm_chat_detect_template does,
 * and renders it with its own code rather than a Jinja engine:
 *
 *   ChatML (qwen2, qwen3):  <|im_start|>ROLE\nCONTENT<|im_end|>\n ...
 *                           then <|im_start|>assistant\n
 *   llama-2:                [INST] CONTENT [/INST]   (system folded in as
 *                           <<SYS>>\nSYSTEM\n<</SYS>>\n\n before the first;
 *                           a system prompt no user turn follows gets an
 *                           empty user turn of its own, never dropped)
 *   llama-3:                <|start_header_id|>ROLE<|end_header_id|>\n\n
 *                           CONTENT<|eot_id|> ... then the assistant header
 *
 * Like llama.cpp's renderer, no default system message is invented (Qwen2's
 * Jinja adds "You are a helpful assistant." when none is given; pass one to
 * get it).
 *
 * Rendering yields segments that remember whether their text is the
 * template's or the user's: kiln_chat_tokenize() lets CONTROL and
 * USER_DEFINED token texts (<|im_start|>) become special tokens only in the
 * template's segments, never inside user content. BOS follows
 * tokenizer.ggml.add_bos_token and is never doubled (not added when the
 * rendered text already starts with it).
 */
#ifndef KILN_CHAT_H
#define KILN_CHAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kiln_chat_kind {
  KILN_CHAT_NONE = 0, /* no template: the prompt goes in raw */
  KILN_CHAT_CHATML = 1,
  KILN_CHAT_LLAMA2 = 2,
  KILN_CHAT_LLAMA3 = 3
} kiln_chat_kind;

/* The kind of a Jinja template text; KILN_CHAT_NONE for NULL, and
 * KILN_STATUS_UNSUPPORTED for a template kiln does not recognise (naming
 * its first characters), rather than a silent raw prompt. */
kiln_status kiln_chat_detect(const char *jinja, kiln_chat_kind *out_kind);

/* "chatml", "llama2", "llama3", "none". */
const char *kiln_chat_kind_name(kiln_chat_kind kind);

typedef struct kiln_chat_message {
  const char *role;    /* "system", "user", "assistant" */
  const char *content; /* UTF-8, NUL-terminated (kiln_prompt_tokenize takes a length) */
} kiln_chat_message;

/* Whether `text` is already in this template's form (a prompt the user
 * templated by hand, which kiln must not wrap again): it begins with the
 * template's turn marker ("<|im_start|>", "<|start_header_id|>",
 * "[INST]"), after optional whitespace and the BOS text. A marker later in
 * the text does not count: that is user content, and stays text. */
bool kiln_chat_is_templated(kiln_chat_kind kind, const kiln_vocab *v, const char *text);

/* Renders msgs[0..n) and, with add_generation_prompt, the opening of the
 * assistant's turn, then tokenizes: template text with
 * KILN_TOKENIZE_PARSE_SPECIAL, message contents without it, BOS as the
 * vocabulary says (never twice). *out_ids is malloc'd. When out_text is not
 * NULL it receives the rendered text (malloc'd), for -v and tests. Errors:
 * KILN_STATUS_INVALID_ARGUMENT for an unknown role or a system message not
 * first; tokenizer errors. */
kiln_status kiln_chat_tokenize(const kiln_vocab *v, kiln_chat_kind kind, const kiln_chat_message *msgs,
                               size_t n, bool add_generation_prompt, int32_t **out_ids, size_t *out_n,
                               char **out_text);

/* A prompt as `kiln run`, `kiln parity` and `kiln qa` take it: with chat
 * false, len bytes of raw text, BOS as the vocabulary says, and with
 * parse_special the CONTROL and USER_DEFINED token texts in it become those
 * tokens (llama.cpp's tools tokenize prompts with parse_special = true;
 * without it they stay text); with chat true, rendered with template
 * `jinja` (the model's tokenizer.chat_template) around one user message of
 * the same len bytes, NUL bytes included as in raw mode (and `system` when
 * not NULL), whose text never becomes a special token —
 * unless parse_special is set and the prompt is already templated
 * (kiln_chat_is_templated), in which case it is taken as is with its
 * markers as special tokens. *out_rendered (may be NULL) receives the text
 * that was tokenized, malloc'd. Errors: KILN_STATUS_UNSUPPORTED for chat
 * without a (recognised) template, INVALID_ARGUMENT for a system message
 * without chat; tokenizer errors. */
kiln_status kiln_prompt_tokenize(const kiln_vocab *v, const char *jinja, const char *prompt, size_t len, bool chat,
                                 bool parse_special, const char *system, int32_t **out_ids, size_t *out_n,
                                 char **out_rendered);

/* The token that closes a turn in this template: "<|im_end|>" (ChatML),
 * "<|eot_id|>" (llama-3), EOS (llama-2); -1 when the vocabulary lacks it or
 * for KILN_CHAT_NONE. */
int32_t kiln_chat_turn_end(kiln_chat_kind kind, const kiln_vocab *v);

/* The tokens that carry a conversation on from the end of an assistant's
 * reply already in the KV cache (llama.cpp's common_chat_format_single: the
 * text the template adds for the new message, nothing of the history):
 * the end of the reply — nothing more when reply_closed (the model's own
 * turn-end token, kiln_chat_turn_end, is in the cache), else the template's
 * closing text ("<|im_end|>", "<|eot_id|>", " </s>") — then ChatML's
 * newline, then `user` as a user turn and the opening of the assistant's
 * (llama-2: BOS before "[INST]", as its template puts one before every
 * turn). The user's text never becomes a special token. *out_ids is
 * malloc'd; out_text (may be NULL) receives the rendered text. Errors:
 * KILN_STATUS_INVALID_ARGUMENT for KILN_CHAT_NONE; tokenizer errors. */
kiln_status kiln_chat_next_turn(const kiln_vocab *v, kiln_chat_kind kind, bool reply_closed, const char *user,
                                int32_t **out_ids, size_t *out_n, char **out_text);

#ifdef __cplusplus
}
#endif
#endif /* KILN_CHAT_H */
