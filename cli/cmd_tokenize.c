/* kiln tokenize / kiln detokenize: text to token ids and pieces and back,
 * with llama-tokenize's flags and output, on any GGUF with a vocabulary
 * (a vocabulary-only file included). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "kiln/escape.h"
#include "kiln/gguf.h"

static void tokenize_usage(FILE *out) {
  fputs("usage: kiln tokenize -m MODEL (-p TEXT | -f FILE | --stdin) [options]\n"
        "\n"
        "Tokenizes the text with the model's vocabulary (a vocabulary-only GGUF will do)\n"
        "and prints one line per token, \"    ID -> 'PIECE'\", as llama-tokenize does.\n"
        "BOS comes first when the vocabulary adds it (tokenizer.ggml.add_bos_token).\n"
        "\n"
        "  -m, --model FILE       the GGUF file\n"
        "  -p, --prompt TEXT      the text (escapes \\n \\t \\\\ ... processed unless --no-escape)\n"
        "  -f, --file FILE        read the text from FILE; -f - reads standard input\n"
        "      --stdin            read the text from standard input\n"
        "      --ids              print only the ids, as [1, 2, 3]\n"
        "      --show-count       then \"Total number of tokens: N\"\n"
        "      --no-bos           no BOS\n"
        "      --no-escape        -p's text as typed\n"
        "      --no-parse-special, --no-special\n"
        "                         special-token texts (<|im_start|>, <s>) stay text\n"
        "      --json             {\"ids\": [...], \"pieces\": [...]} on one line\n"
        "  -h, --help             this text\n",
        out);
}

static void detokenize_usage(FILE *out) {
  fputs("usage: kiln detokenize -m MODEL (-p IDS | -f FILE | --stdin) [--no-special] [--json]\n"
        "\n"
        "Decodes token ids (separated by spaces, commas or newlines; \"[1, 2, 3]\" as\n"
        "kiln tokenize --ids prints them will do) to text and writes its bytes to\n"
        "stdout as they are, without a newline of its own.\n"
        "\n"
        "  -m, --model FILE       the GGUF file (a vocabulary-only one will do)\n"
        "  -p, --prompt IDS       the ids\n"
        "  -f, --file FILE        read the ids from FILE; -f - reads standard input\n"
        "      --stdin            read the ids from standard input\n"
        "      --no-special       CONTROL tokens (<|im_start|>, </s>) give no text\n"
        "      --json             {\"text\": ..., \"ids\": [...]} on one line\n"
        "  -h, --help             this text\n",
        out);
}

static kiln_status load_vocab(const char *path, kiln_vocab **out) {
  kiln_gguf *g = NULL;
  KILN_RETURN_IF_ERROR(kiln_gguf_open(path, &g));
  kiln_status st = kiln_vocab_load(g, out);
  kiln_gguf_close(g);
  return st;
}

/* The piece a token shows as (special tokens as their text), as
 * llama-tokenize's common_token_to_piece. *out is malloc'd. */
static kiln_status piece_of(const kiln_vocab *v, int32_t id, char **out, size_t *out_len) {
  size_t cap = 64;
  for (;;) {
    char *buf = malloc(cap);
    if (!buf) return kiln_status_new(KILN_STATUS_NO_MEMORY, "piece");
    size_t len = 0;
    kiln_status st = kiln_token_to_piece(v, id, true, buf, cap, &len);
    if (!st) {
      *out = buf;
      *out_len = len;
      return NULL;
    }
    free(buf);
    if (kiln_status_code_of(st) != KILN_STATUS_OUT_OF_RANGE || cap > (1u << 20)) return st;
    kiln_status_free(st);
    cap *= 4;
  }
}

/* Valid UTF-8? (llama-tokenize marks the pieces that are not.) */
static bool valid_utf8(const char *s, size_t n) {
  json_t *j = json_stringn(s, n); /* jansson checks UTF-8 */
  bool ok = j != NULL;
  json_decref(j);
  return ok;
}

typedef struct text_source {
  const char *prompt, *file;
  bool from_stdin;
} text_source;

/* -p, -f or --stdin: exactly one. */
static bool read_source(const char *cmd, const text_source *src, bool escape, char **out, size_t *len,
                        kiln_status *st) {
  int n = (src->prompt != NULL) + (src->file != NULL) + src->from_stdin;
  if (n != 1) {
    fprintf(stderr, "kiln %s: give exactly one of -p, -f and --stdin\n", cmd);
    return false;
  }
  return cli_prompt(cmd, src->prompt, src->from_stdin ? "-" : src->file, escape, out, len, st);
}

int cmd_tokenize(int argc, char **argv) {
  enum { O_STDIN = CLI_OPT_FIRST_FREE, O_IDS, O_COUNT, O_NO_BOS, O_NO_ESCAPE, O_NO_SPECIAL, O_JSON };
  static const struct option longopts[] = {
      {"model", required_argument, 0, 'm'},      {"prompt", required_argument, 0, 'p'},
      {"file", required_argument, 0, 'f'},       {"stdin", no_argument, 0, O_STDIN},
      {"ids", no_argument, 0, O_IDS},            {"show-count", no_argument, 0, O_COUNT},
      {"no-bos", no_argument, 0, O_NO_BOS},      {"no-escape", no_argument, 0, O_NO_ESCAPE},
      {"no-parse-special", no_argument, 0, O_NO_SPECIAL}, {"no-special", no_argument, 0, O_NO_SPECIAL},
      {"json", no_argument, 0, O_JSON},          {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  const char *model = NULL;
  text_source src = {0};
  bool ids_only = false, count = false, bos = true, escape = true, special = true, json = false;
  int opt;
  optind = 1;
  while ((opt = getopt_long(argc, argv, "m:p:f:h", longopts, NULL)) != -1) {
    switch (opt) {
    case 'm': model = optarg; break;
    case 'p': src.prompt = optarg; break;
    case 'f': src.file = optarg; break;
    case O_STDIN: src.from_stdin = true; break;
    case O_IDS: ids_only = true; break;
    case O_COUNT: count = true; break;
    case O_NO_BOS: bos = false; break;
    case O_NO_ESCAPE: escape = false; break;
    case O_NO_SPECIAL: special = false; break;
    case O_JSON: json = true; break;
    case 'h': tokenize_usage(stdout); return CLI_EXIT_OK;
    default: tokenize_usage(stderr); return CLI_EXIT_USAGE;
    }
  }
  if (optind < argc) return cli_usage_error("tokenize", "unexpected argument \"%s\"", argv[optind]);
  if (!model) return cli_usage_error("tokenize", "-m MODEL is required");
  char *text = NULL;
  size_t len = 0;
  kiln_status st = NULL;
  if (!read_source("tokenize", &src, escape, &text, &len, &st)) return CLI_EXIT_USAGE;
  kiln_vocab *v = NULL;
  int32_t *ids = NULL;
  size_t n = 0;
  if (!st) st = load_vocab(model, &v);
  if (!st) {
    int flags = (bos && kiln_vocab_add_bos(v) ? KILN_TOKENIZE_ADD_BOS : 0) |
                (special ? KILN_TOKENIZE_PARSE_SPECIAL : 0);
    st = kiln_tokenize(v, text, len, flags, &ids, &n);
  }
  json_t *pieces = json ? json_array() : NULL;
  if (!st && ids_only && !json) {
    fputc('[', stdout);
    for (size_t i = 0; i < n; i++) printf(i ? ", %d" : "%d", ids[i]);
    fputs("]\n", stdout);
  } else {
    for (size_t i = 0; !st && i < n; i++) {
      char *p = NULL;
      size_t pl = 0;
      st = piece_of(v, ids[i], &p, &pl);
      if (st) break;
      if (json) {
        json_array_append_new(pieces, cli_json_text(p, pl));
      } else if (!ids_only) {
        printf("%6d -> '", ids[i]);
        /* a piece is vocabulary text from the file: no control byte of it
         * reaches the terminal (kiln/escape.h) */
        kiln_fput_escaped(stdout, p, pl, KILN_ESCAPE_KEEP_BACKSLASH);
        fputs(valid_utf8(p, pl) ? "'\n" : "' (UTF-8 decode failure)\n", stdout);
      }
      free(p);
    }
  }
  int rc = CLI_EXIT_OK;
  if (st) {
    rc = cli_fail("tokenize", st);
  } else if (json) {
    json_t *j = json_pack("{s:o, s:o, s:i}", "ids", json_array(), "pieces", pieces, "n_tokens", (int)n);
    pieces = NULL;
    for (size_t i = 0; j && i < n; i++) json_array_append_new(json_object_get(j, "ids"), json_integer(ids[i]));
    if (!cli_json_print(j)) rc = CLI_EXIT_FAIL;
  } else if (count) {
    printf("Total number of tokens: %zu\n", n);
  }
  json_decref(pieces);
  free(ids);
  free(text);
  kiln_vocab_free(v);
  return rc;
}

/* Whether text's brackets are those of a list: none, or one '[' first and
 * one ']' last (spaces aside), as `tokenize --ids` prints it. */
static bool brackets_ok(const char *text, size_t len) {
  size_t open = 0, close = 0, first = len, last = len;
  for (size_t i = 0; i < len; i++) {
    if (!strchr(" \t\n\r", text[i]) || !text[i]) {
      if (first == len) first = i;
      last = i;
    }
    open += text[i] == '[';
    close += text[i] == ']';
  }
  if (open == 0 && close == 0) return true;
  return open == 1 && close == 1 && text[first] == '[' && text[last] == ']';
}

/* Ids separated by spaces, commas, newlines, with optional brackets around
 * the whole list. A comma separates two ids: one with no id before it
 * (",1", "1,,2") or after it ("1,") marks an empty element, an error
 * naming its position, not a separator to skip. */
static kiln_status parse_ids(const char *what, const char *text, size_t len, int32_t **out, size_t *out_n) {
  if (!brackets_ok(text, len))
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT,
                           "%s: brackets that do not enclose the whole list (give [1, 2, 3] or 1 2 3)", what);
  size_t cap = 64, n = 0, comma = 0;
  bool after_id = false, after_comma = false;
  int32_t *ids = malloc(cap * sizeof *ids);
  if (!ids) return kiln_status_new(KILN_STATUS_NO_MEMORY, "ids");
  for (size_t i = 0; i < len;) {
    char c = text[i];
    if (c == ',') {
      if (!after_id) {
        free(ids);
        return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "%s: id %zu is empty (no id before the comma at byte %zu)",
                               what, n + 1, i);
      }
      after_id = false;
      after_comma = true;
      comma = i++;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '[' || c == ']') {
      i++;
      continue;
    }
    size_t j = i;
    while (j < len && text[j] >= '0' && text[j] <= '9') j++;
    bool sep = j == len || strchr(" \t\n\r,[]", text[j]) != NULL;
    if (j == i || !sep || j - i > 10) {
      free(ids);
      size_t e = j;
      while (e < len && !strchr(" \t\n\r,[]", text[e])) e++;
      return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "%s: \"%.*s\" at byte %zu is not a token id", what,
                             (int)(e - i > 40 ? 40 : e - i), text + i, i);
    }
    long long v = strtoll(text + i, NULL, 10);
    if (v > INT32_MAX) {
      free(ids);
      return kiln_status_new(KILN_STATUS_OUT_OF_RANGE, "%s: id %lld at byte %zu is too large", what, v, i);
    }
    if (n == cap) {
      int32_t *g = realloc(ids, 2 * cap * sizeof *ids);
      if (!g) {
        free(ids);
        return kiln_status_new(KILN_STATUS_NO_MEMORY, "ids");
      }
      ids = g;
      cap *= 2;
    }
    ids[n++] = (int32_t)v;
    after_id = true;
    after_comma = false;
    i = j;
  }
  if (after_comma) {
    free(ids);
    return kiln_status_new(KILN_STATUS_INVALID_ARGUMENT, "%s: id %zu is empty (no id after the comma at byte %zu)",
                           what, n + 1, comma);
  }
  *out = ids;
  *out_n = n;
  return NULL;
}

int cmd_detokenize(int argc, char **argv) {
  enum { O_STDIN = CLI_OPT_FIRST_FREE, O_NO_SPECIAL, O_JSON };
  static const struct option longopts[] = {
      {"model", required_argument, 0, 'm'},   {"prompt", required_argument, 0, 'p'},
      {"file", required_argument, 0, 'f'},    {"stdin", no_argument, 0, O_STDIN},
      {"no-special", no_argument, 0, O_NO_SPECIAL}, {"json", no_argument, 0, O_JSON},
      {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
  const char *model = NULL;
  text_source src = {0};
  bool special = true, json = false;
  int opt;
  optind = 1;
  while ((opt = getopt_long(argc, argv, "m:p:f:h", longopts, NULL)) != -1) {
    switch (opt) {
    case 'm': model = optarg; break;
    case 'p': src.prompt = optarg; break;
    case 'f': src.file = optarg; break;
    case O_STDIN: src.from_stdin = true; break;
    case O_NO_SPECIAL: special = false; break;
    case O_JSON: json = true; break;
    case 'h': detokenize_usage(stdout); return CLI_EXIT_OK;
    default: detokenize_usage(stderr); return CLI_EXIT_USAGE;
    }
  }
  if (optind < argc) return cli_usage_error("detokenize", "unexpected argument \"%s\"", argv[optind]);
  if (!model) return cli_usage_error("detokenize", "-m MODEL is required");
  char *in = NULL, *text = NULL;
  size_t in_len = 0, len = 0, n = 0;
  int32_t *ids = NULL;
  kiln_vocab *v = NULL;
  kiln_status st = NULL;
  if (!read_source("detokenize", &src, false, &in, &in_len, &st)) return CLI_EXIT_USAGE;
  /* ids given with -p are the command line's: a malformed one, or one
   * outside the vocabulary, exits 2 as any bad flag value does; from -f
   * or standard input they are bad input (1) */
  cli_common cc = {.cmd = "detokenize"};
  if (!st) st = parse_ids(src.prompt ? "-p" : src.file && strcmp(src.file, "-") ? src.file : "standard input", in,
                          in_len, &ids, &n);
  cc.flags_at_fault = st && src.prompt;
  if (!st) st = load_vocab(model, &v);
  if (!st) {
    st = kiln_detokenize(v, ids, n, special, &text, &len);
    cc.flags_at_fault = st && src.prompt && kiln_status_code_of(st) == KILN_STATUS_INVALID_ARGUMENT;
    if (st && src.prompt) st = kiln_status_annotate(st, "-p");
  }
  int rc = CLI_EXIT_OK;
  if (st) {
    rc = cli_exit(&cc, st);
  } else if (json) {
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) json_array_append_new(a, json_integer(ids[i]));
    if (!cli_json_print(json_pack("{s:o, s:o}", "text", cli_json_text(text, len), "ids", a))) rc = CLI_EXIT_FAIL;
  } else {
    fwrite(text, 1, len, stdout);
  }
  free(text);
  free(ids);
  free(in);
  kiln_vocab_free(v);
  return rc;
}
