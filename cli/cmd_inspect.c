/* kiln inspect: a GGUF file's header, metadata, hyperparameters and tensors. */
#include "config.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "kiln/escape.h"
#include "kiln/gguf.h"
#include "kiln/half.h"

static void usage(FILE *out) {
  fputs("usage: kiln inspect [--no-tensors] [-m] MODEL.gguf\n"
        "\n"
        "Prints the GGUF header, every metadata key (arrays abbreviated), the\n"
        "effective hyperparameters kiln would run with, and the tensor table\n"
        "(name, type, shape ne0 first, offset in the data section, bytes).\n"
        "-m MODEL.gguf names the model as the other commands do.\n",
        out);
}

/* Up to max bytes of s, cut back to a UTF-8 character boundary. */
static size_t shown_len(const char *s, uint64_t len, size_t max) {
  if (len <= max) return (size_t)len;
  size_t n = max;
  while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80) n--;
  return n;
}

/* File text, escaped (kiln/escape.h: metadata may hold terminal control
 * sequences), padded with spaces to `width` columns. */
static void put_text(const char *s, size_t n, int width) {
  size_t w = kiln_fput_escaped(stdout, s, n, 0);
  for (; (int)w < width; w++) putchar(' ');
}

static void print_value(const kiln_gguf *g, const kiln_gguf_kv *kv) {
  switch (kv->type) {
  case KILN_GGUF_UINT8: case KILN_GGUF_UINT16: case KILN_GGUF_UINT32: case KILN_GGUF_UINT64:
    printf("%" PRIu64, kv->v.u64);
    break;
  case KILN_GGUF_INT8: case KILN_GGUF_INT16: case KILN_GGUF_INT32: case KILN_GGUF_INT64:
    printf("%" PRId64, kv->v.i64);
    break;
  case KILN_GGUF_FLOAT32:
    printf("%.9g (f32 0x%08x)", (double)kv->v.f32, kiln_f32_to_bits(kv->v.f32));
    break;
  case KILN_GGUF_FLOAT64: printf("%.17g", kv->v.f64); break;
  case KILN_GGUF_BOOL: printf("%s", kv->v.b ? "true" : "false"); break;
  case KILN_GGUF_STRING: {
    printf("\"");
    put_text(kv->v.str.ptr, shown_len(kv->v.str.ptr, kv->v.str.len, 120), 0);
    printf("\"%s", kv->v.str.len > 120 ? "..." : "");
    break;
  }
  case KILN_GGUF_ARRAY: {
    printf("[%s x %" PRIu64 "]", kiln_gguf_vtype_name(kv->elem_type), kv->n);
    uint64_t show = kv->n < 6 ? kv->n : 6;
    printf(" ");
    for (uint64_t i = 0; i < show; i++) {
      if (kv->elem_type == KILN_GGUF_STRING) {
        kiln_gguf_str s = kiln_gguf_arr_str(g, kv, i);
        printf("%s\"", i ? ", " : "");
        put_text(s.ptr, shown_len(s.ptr, s.len, 40), 0);
        printf("\"");
      } else if (kv->elem_type == KILN_GGUF_FLOAT32) {
        printf("%s%g", i ? ", " : "", (double)kiln_gguf_arr_f32(kv, i));
      } else if (kv->elem_type == KILN_GGUF_INT32) {
        printf("%s%d", i ? ", " : "", kiln_gguf_arr_i32(kv, i));
      } else if (kv->elem_type == KILN_GGUF_UINT32) {
        printf("%s%u", i ? ", " : "", kiln_gguf_arr_u32(kv, i));
      } else {
        printf("%s...", i ? ", " : "");
        break;
      }
    }
    if (kv->n > show) printf(", ...");
    break;
  }
  default: printf("?"); break;
  }
}

int cmd_inspect(int argc, char **argv) {
  static const struct option longopts[] = {
      {"no-tensors", no_argument, 0, 'N'}, {"model", required_argument, 0, 'm'},
      {"help", no_argument, 0, 'h'},       {0, 0, 0, 0}};
  bool tensors = true;
  const char *model = NULL;
  int opt;
  optind = 1;
  while ((opt = getopt_long(argc, argv, "hm:", longopts, NULL)) != -1) {
    if (opt == 'N') tensors = false;
    else if (opt == 'm') model = optarg;
    else if (opt == 'h') {
      usage(stdout);
      return 0;
    } else {
      usage(stderr);
      return 2;
    }
  }
  const int n_pos = argc - optind + (model ? 1 : 0); /* -m and a positional model both count */
  if (n_pos != 1) {
    fprintf(stderr, "kiln inspect: %s\n", n_pos == 0 ? "give one MODEL.gguf" : "one model at a time");
    usage(stderr);
    return 2;
  }
  const char *path = model ? model : argv[optind];
  kiln_gguf *g;
  kiln_status st = kiln_gguf_open(path, &g);
  if (st) return cli_fail("inspect", st);
  printf("file: %s\nGGUF version %u, alignment %" PRIu64 ", %" PRIu64 " metadata keys, %" PRIu64
         " tensors, data at byte %" PRIu64 "\n\n",
         path, kiln_gguf_version(g), kiln_gguf_alignment(g), kiln_gguf_n_kv(g), kiln_gguf_n_tensors(g),
         kiln_gguf_data_offset(g));
  printf("metadata:\n");
  for (uint64_t i = 0; i < kiln_gguf_n_kv(g); i++) {
    const kiln_gguf_kv *kv = kiln_gguf_kv_at(g, i);
    printf("  ");
    put_text(kv->key.ptr, kv->key.len, 44);
    printf(" %-8s = ", kiln_gguf_vtype_name(kv->type));
    print_value(g, kv);
    printf("\n");
  }
  kiln_gguf_close(g);

  /* Hyperparameters as kiln would run the model (or why it would not). */
  kiln_model *m;
  st = kiln_model_open(path, &m);
  printf("\nhyperparameters:\n");
  if (st) {
    printf("  (kiln cannot run this file: ");
    const char *why = kiln_status_message(st);
    kiln_fput_escaped(stdout, why, strlen(why), KILN_ESCAPE_KEEP_BACKSLASH);
    printf(")\n");
    kiln_status_free(st);
  } else {
    kiln_hparams_print(kiln_model_hparams(m), stdout);
    const kiln_vocab *v = kiln_model_vocab(m);
    if (v)
      printf("vocab          = %s, %d tokens, bos %d, eos %d, eot %d, add_bos %s\n",
             kiln_vocab_kind_of(v) == KILN_VOCAB_SPM ? "SentencePiece" : "byte-level BPE",
             kiln_vocab_n_tokens(v), kiln_vocab_bos(v), kiln_vocab_eos(v), kiln_vocab_eot(v),
             kiln_vocab_add_bos(v) ? "yes" : "no");
    printf("chat_template  = %s\n", kiln_model_chat_template(m) ? "present" : "none");
    kiln_model_free(m);
  }
  if (!tensors) return 0;
  st = kiln_gguf_open(path, &g);
  if (st) return cli_fail("inspect", st);
  printf("\ntensors (name, type, ne0 first, offset, bytes):\n");
  for (uint64_t i = 0; i < kiln_gguf_n_tensors(g); i++) {
    const kiln_gguf_tensor *t = kiln_gguf_tensor_at(g, i);
    char shape[96];
    int n = 0;
    for (int d = 0; d < t->n_dims; d++)
      n += snprintf(shape + n, sizeof shape - (size_t)n, "%s%" PRId64, d ? "x" : "", t->ne[d]);
    printf("  ");
    put_text(t->name.ptr, t->name.len, 36);
    printf(" %-5s %-16s %12" PRIu64 " %12" PRIu64 "\n", kiln_type_name(t->type), shape, t->offset,
           t->nbytes);
  }
  kiln_gguf_close(g);
  return 0;
}
