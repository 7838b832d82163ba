/* Chat templates rendered by kiln's own code, as segments that keep the
 * template's text apart from the user's (kiln/chat.h). */
#include "config.h"

#include "kiln/chat.h"

#include <stdlib.h>
#include <string.h>

kiln_status kiln_chat_detect(const char *jinja, kiln_chat_kind *out_kind) {
  *out_kind = KILN_CHAT_NONE;
  if (!jinja) return NULL;
  if (strstr(jinja, "<|im_start|>")) *out_kind = KILN_CHAT_CHATML;
  else if (strstr(jinja, "<|start_header_id|>")) *out_kind = KILN_CHAT_LLAMA3;
  else if (strstr(jinja, "[INST]")) *out_kind = KILN_CHAT_LLAMA2;
  else
    return kiln_status_new(KILN_STATUS_UNSUPPORTED,
                           "tokenizer.chat_template is not one kiln renders (ChatML, llama-2, llama-3): "
                           "\"%.60s...\"; use --raw and template the prompt yourself",
                           jinja);
  return NULL;
}

const char *kiln_chat_kind_name(kiln_chat_kind kind) {
  switch (kind) {
  case KILN_CHAT_NONE: return "none";
  case KILN_CHAT_CHATML: return "chatml";
  case KILN_CHAT_LLAMA2: return "llama2";
  case KILN_CHAT_LLAMA3: return "llama3";
  }
  return "?";
}

static const char *turn_marker(kiln_chat_kind kind) {
  switch (kind) {
  case KILN_CHAT_CHATML: return "<|im_start|>";
  case KILN_CHAT_LLAMA3: return "<|start_header_id|>";
  case KILN_CHAT_LLAMA2: return "[INST]";
  case KILN_CHAT_NONE: return NULL;
  }
  return NULL;
}

/* Whether text[0..len) begins with the C string s. */
static bool starts_with(const char *text, size_t len, const char *s) {
  size_t n = strlen(s);
  return n <= len && memcmp(text, s, n) == 0;
}

/* kiln_chat_is_templated() on len bytes, which need no NUL after them. */
static bool is_templated(kiln_chat_kind kind, const kiln_vocab *v, const char *text, size_t len) {
  const char *marker = turn_marker(kind);
  if (!marker) return false;
  while (len && (*text == ' ' || *text == '\t' || *text == '\n' || *text == '\r')) text++, len--;
  int32_t bos = v ? kiln_vocab_bos(v) : -1;
  const char *bos_text = bos >= 0 ? kiln_vocab_token_text(v, bos) : NULL;
  if (bos_text && *bos_text && starts_with(text, len, bos_text)) {
    text += strlen(bos_text);
    len -= strlen(bos_text);
  }
  return starts_with(text, len, marker);
}

bool kiln_chat_is_templated(kiln_chat_kind kind, const kiln_vocab *v, const char *text) {
  return is_templated(kind, v, text, strlen(text));
}

/* A message with its length: contents may hold NUL bytes (a prompt read
 * from a file), which a C string would cut. */
typedef struct sized_message {
  const char *role;
  const char *content;
  size_t len;
} sized_message;

static kiln_status render_tokenize(const kiln_vocab *v, kiln_chat_kind kind, const sized_message *t,
                                   size_t n, bool add_generation_prompt, int32_t **out_ids,
                                   size_t *out_n, char **out_text);

/* A raw prompt whose special-token texts are tokens: BOS as the vocabulary
 * says, but not a second one when the text starts with the BOS text. */
static kiln_status raw_special(const kiln_vocab *v, const char *prompt, size_t len, bool add_bos, int32_t **out_ids,
                               size_t *out_n) {
  KILN_RETURN_IF_ERROR(kiln_tokenize(v, prompt, len, KILN_TOKENIZE_PARSE_SPECIAL, out_ids, out_n));
  int32_t bos = kiln_vocab_bos(v);
  if (!add_bos || bos < 0 || (*out_n > 0 && (*out_ids)[0] == bos)) return NULL;
  int32_t *ids = realloc(*out_ids, (*out_n + 1) * sizeof *ids);
  if (!ids) {
    free(*out_ids);
    *out_ids = NULL;
    *out_n = 0;
    return kiln_status_new(KILN_STATUS_NO_MEMORY, "prompt tokens");
  }
  memmove(ids + 1, ids, *out_n * sizeof *ids);
  ids[0] = bos;
  *out_ids = ids;
  (*out_n)++;
  return NULL;
}

kiln_status kiln_prompt_tokenize(const kiln_vocab *v, const char *jinja, const char *prompt, size_t len, bool chat,
                                 bool parse_special, const char *system, int32_t **out_ids, size_t *out_n,
                                 char **out_rendered) {
  *out_ids = NULL;
  *out_n = 0;
  if (out_rendered) *out_rendered = NULL;
  int bos_flag = kiln_vocab_add_bos(v) ? KILN_TOKENIZE_ADD_BOS : 0;
  if (system && !chat)
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "a system message needs the chat template (--chat)");
  if (!chat && !parse_special) return kiln_tokenize(v, prompt, len, bos_flag, out_ids, out_n);
  if (!chat) return raw_special(v, prompt, len, bos_flag != 0, out_ids, out_n);
  kiln_chat_kind kind;
  KILN_RETURN_IF_ERROR(kiln_chat_detect(jinja, &kind));
  if (kind == KILN_CHAT_NONE)
    return kiln_status_new(KILN_STATUS_UNSUPPORTED,
                           "the model has no chat template (tokenizer.chat_template): send the prompt raw");
  /* The prompt is len bytes, NULs included as in raw mode, and need not
   * end in one. */
  if (parse_special && is_templated(kind, v, prompt, len)) {
    /* templated by hand: the markers are the user's to use; BOS once */
    int32_t bos = kiln_vocab_bos(v);
    const char *bos_text = bos >= 0 ? kiln_vocab_token_text(v, bos) : NULL;
    bool has_bos = bos_text && *bos_text && starts_with(prompt, len, bos_text);
    KILN_RETURN_IF_ERROR(kiln_tokenize(v, prompt, len, KILN_TOKENIZE_PARSE_SPECIAL | (has_bos ? 0 : bos_flag),
                                       out_ids, out_n));
    if (out_rendered && (*out_rendered = malloc(len + 1))) {
      memcpy(*out_rendered, prompt, len);
      (*out_rendered)[len] = '\0';
    } else if (out_rendered) {
      free(*out_ids);
      *out_ids = NULL;
      return kiln_status_new(KILN_STATUS_NO_MEMORY, "prompt");
    }
    return NULL;
  }
  sized_message turns[2] = {{"system", system, system ? strlen(system) : 0}, {"user", prompt, len}};
  return render_tokenize(v, kind, system ? turns : turns + 1, system ? 2 : 1, true, out_ids, out_n,
                         out_rendered);
}

typedef struct segment {
  const char *text;
  size_t len;
  bool is_template; /* special tokens allowed */
} segment;

typedef struct render {
  segment *seg;
  size_t n, cap;
  kiln_status err;
} render;

static void add(render *r, const char *text, size_t len, bool is_template) {
  if (r->err || len == 0) return;
  if (r->n == r->cap) {
    size_t cap = r->cap ? 2 * r->cap : 16;
    segment *s = realloc(r->seg, cap * sizeof *s);
    if (!s) {
      r->err = kiln_status_new(KILN_STATUS_NO_MEMORY, "chat template");
      return;
    }
    r->seg = s;
    r->cap = cap;
  }
  r->seg[r->n++] = (segment){text, len, is_template};
}

#define TMPL(r, s) add((r), (s), strlen(s), true)
#define USER(r, t) add((r), (t)->content, (t)->len, false)

static bool role_is(const sized_message *m, const char *role) { return strcmp(m->role, role) == 0; }

static kiln_status check_roles(const sized_message *msgs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (!role_is(&msgs[i], "system") && !role_is(&msgs[i], "user") && !role_is(&msgs[i], "assistant"))
      return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "chat message %zu: unknown role \"%s\"", i,
                             msgs[i].role);
    if (i > 0 && role_is(&msgs[i], "system"))
      return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "chat message %zu: a system message must come first",
                             i);
  }
  return NULL;
}

static void render_chatml(render *r, const sized_message *msgs, size_t n, bool gen) {
  for (size_t i = 0; i < n; i++) {
    TMPL(r, "<|im_start|>");
    TMPL(r, msgs[i].role);
    TMPL(r, "\n");
    USER(r, &msgs[i]);
    TMPL(r, "<|im_end|>\n");
  }
  if (gen) TMPL(r, "<|im_start|>assistant\n");
}

/* Opens a llama-2 user turn, with the pending system prompt folded in. */
static void llama2_open(render *r, bool *first, const sized_message **system) {
  TMPL(r, *first ? "[INST] " : "<s>[INST] ");
  if (*system) {
    TMPL(r, "<<SYS>>\n");
    USER(r, *system);
    TMPL(r, "\n<</SYS>>\n\n");
    *system = NULL;
  }
  *first = false;
}

/* Meta's llama-2 chat format: each user turn in [INST] ... [/INST], the
 * system prompt inside the first one, BOS before every turn after the
 * first (the first BOS is the tokenizer's). A system prompt that no user
 * turn follows (alone, or before an assistant turn) gets an empty user
 * turn of its own rather than being dropped. */
static void render_llama2(render *r, const sized_message *msgs, size_t n) {
  const sized_message *system = NULL;
  bool first = true;
  for (size_t i = 0; i < n; i++) {
    if (role_is(&msgs[i], "system")) {
      system = &msgs[i];
    } else if (role_is(&msgs[i], "user")) {
      llama2_open(r, &first, &system);
      USER(r, &msgs[i]);
      TMPL(r, " [/INST]");
    } else {
      if (system) {
        llama2_open(r, &first, &system);
        TMPL(r, " [/INST]");
      }
      TMPL(r, " ");
      USER(r, &msgs[i]);
      TMPL(r, " </s>");
    }
  }
  if (system) {
    llama2_open(r, &first, &system);
    TMPL(r, " [/INST]");
  }
}

static void render_llama3(render *r, const sized_message *msgs, size_t n, bool gen) {
  for (size_t i = 0; i < n; i++) {
    TMPL(r, "<|start_header_id|>");
    TMPL(r, msgs[i].role);
    TMPL(r, "<|end_header_id|>\n\n");
    USER(r, &msgs[i]);
    TMPL(r, "<|eot_id|>");
  }
  if (gen) TMPL(r, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static kiln_status append_ids(int32_t **all, size_t *n_all, const int32_t *ids, size_t n) {
  int32_t *g = realloc(*all, (*n_all + n + 1) * sizeof *g);
  if (!g) return kiln_status_new(KILN_STATUS_NO_MEMORY, "chat tokens");
  memcpy(g + *n_all, ids, n * sizeof *ids);
  *all = g;
  *n_all += n;
  return NULL;
}

kiln_status kiln_chat_tokenize(const kiln_vocab *v, kiln_chat_kind kind, const kiln_chat_message *msgs,
                               size_t n, bool add_generation_prompt, int32_t **out_ids, size_t *out_n,
                               char **out_text) {
  *out_ids = NULL;
  *out_n = 0;
  if (out_text) *out_text = NULL;
  sized_message *turns = malloc((n ? n : 1) * sizeof *turns);
  if (!turns) return kiln_status_new(KILN_STATUS_NO_MEMORY, "chat messages");
  for (size_t i = 0; i < n; i++)
    turns[i] = (sized_message){msgs[i].role, msgs[i].content, strlen(msgs[i].content)};
  kiln_status st =
      render_tokenize(v, kind, turns, n, add_generation_prompt, out_ids, out_n, out_text);
  free(turns);
  return st;
}

static kiln_status render_tokenize(const kiln_vocab *v, kiln_chat_kind kind, const sized_message *msgs,
                                   size_t n, bool add_generation_prompt, int32_t **out_ids,
                                   size_t *out_n, char **out_text) {
  *out_ids = NULL;
  *out_n = 0;
  if (out_text) *out_text = NULL;
  KILN_RETURN_IF_ERROR(check_roles(msgs, n));
  render r = {0};
  switch (kind) {
  case KILN_CHAT_CHATML: render_chatml(&r, msgs, n, add_generation_prompt); break;
  case KILN_CHAT_LLAMA2: render_llama2(&r, msgs, n); break;
  case KILN_CHAT_LLAMA3: render_llama3(&r, msgs, n, add_generation_prompt); break;
  case KILN_CHAT_NONE:
    for (size_t i = 0; i < n; i++) USER(&r, &msgs[i]);
    break;
  }
  kiln_status st = r.err;
  int32_t *all = NULL;
  size_t n_all = 0;
  int32_t bos = kiln_vocab_bos(v);
  if (!st && kiln_vocab_add_bos(v) && bos >= 0) st = append_ids(&all, &n_all, &bos, 1);
  for (size_t i = 0; !st && i < r.n; i++) {
    int32_t *ids;
    size_t m;
    st = kiln_tokenize(v, r.seg[i].text, r.seg[i].len, r.seg[i].is_template ? KILN_TOKENIZE_PARSE_SPECIAL : 0,
                       &ids, &m);
    if (st) break;
    /* a template that begins with BOS text must not get a second BOS */
    size_t skip = n_all == 1 && m > 0 && ids[0] == bos && all[0] == bos ? 1 : 0;
    st = append_ids(&all, &n_all, ids + skip, m - skip);
    free(ids);
  }
  if (!st && out_text) {
    size_t len = 0;
    for (size_t i = 0; i < r.n; i++) len += r.seg[i].len;
    char *t = malloc(len + 1);
    if (!t) st = kiln_status_new(KILN_STATUS_NO_MEMORY, "chat text");
    for (size_t i = 0, o = 0; !st && i < r.n; i++) {
      memcpy(t + o, r.seg[i].text, r.seg[i].len);
      o += r.seg[i].len;
    }
    if (!st) {
      t[len] = 0;
      *out_text = t;
    }
  }
  free(r.seg);
  if (st) {
    free(all);
    return st;
  }
  if (!all) all = malloc(sizeof *all); /* zero tokens: still a valid array */
  *out_ids = all;
  *out_n = n_all;
  return NULL;
}
