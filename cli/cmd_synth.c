/* kiln synth: write a synthetic model (kiln/synth.h). */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "kiln/synth.h"

static void usage(FILE *out) {
  fputs("usage: kiln synth --arch llama|qwen2|qwen3|qwen35 -o OUT.gguf [options]\n"
        "\n"
        "Writes a model of that architecture and shape with seeded random weights.\n"
        "\n"
        "  --layers N --embd N --ff N --heads N --heads-kv N   shape (default 2, 64, 128, 4, 2;\n"
        "                        qwen35: 4 layers)\n"
        "  --head-dim N          attention.key_length (default embd / heads; qwen35 32)\n"
        "  --rot N               rope.dimension_count (default head-dim; qwen35 8)\n"
        "  --ctx N               context_length (default 512)\n"
        "  --eps X               RMSNorm ε, written as that f32 (default 1e-5 llama, 1e-6 qwen)\n"
        "  --theta X             RoPE θ (default 1e4 llama, 1e6 qwen, 1e7 qwen35)\n"
        "  --type T              projection weights: F32 F16 BF16 Q8_0 Q4_0 Q5_0 Q4_K Q5_K Q6_K\n"
        "                        (default F32)\n"
        "  --embd-type T         token embedding (and untied output) type (default F32)\n"
        "  --tied | --untied     output.weight absent (tied to token_embd) or present\n"
        "  --vocab N             embedding rows when there is no --vocab-from (default 256)\n"
        "  --vocab-from FILE     copy every tokenizer.* key (vocabulary, merges, template) from FILE\n"
        "  --vocab-rows N        with --vocab-from: token_embd rows, padding past the vocabulary\n"
        "                        (and the token list, with [PAD<id>] tokens, as llama.cpp's converter)\n"
        "  --special-ms X        CONTROL tokens' embedding rows get exactly mean-square X\n"
        "  --embd-ms X           mean-square of the other rows (default 3e-4)\n"
        "  --seed N              (default 1)\n"
        "\n"
        "qwen35 (hybrid: Gated DeltaNet and gated full attention; default R R R F):\n"
        "  --full-every N        every Nth layer is full attention (full_attention_interval, default 4)\n"
        "  --layers-pattern P    one letter per layer, R (Gated DeltaNet) or F (full attention);\n"
        "                        the interval written beside it is the one P follows, if any\n"
        "  --ssm-conv N          conv width (ssm.conv_kernel, default 4)\n"
        "  --ssm-groups N        q/k heads of linear attention (ssm.group_count, default 2)\n"
        "  --ssm-heads N         value heads (ssm.time_step_rank, default 4)\n"
        "  --ssm-state N         q/k head dim (ssm.state_size, default 16)\n"
        "  --ssm-head-v N        value head dim (ssm.inner_size / heads, default 16)\n"
        "  --rope-sections A,B,C,D  rope.dimension_sections, in rotated pairs, sum <= n_rot/2 (default 2,1,1,0)\n",
        out);
}

static bool num(const char *flag, const char *arg, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double v = strtod(arg, &end);
  if (errno || end == arg || *end || !(v >= lo && v <= hi)) {
    fprintf(stderr, "kiln synth: %s %s: expected a number in [%g, %g]\n", flag, arg, lo, hi);
    return false;
  }
  *out = v;
  return true;
}

/* A whole decimal number in [lo, hi]. */
static bool whole(const char *flag, const char *arg, unsigned long long lo, unsigned long long hi, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = arg[0] >= '0' && arg[0] <= '9' ? strtoull(arg, &end, 10) : 0;
  if (!(arg[0] >= '0' && arg[0] <= '9') || errno || *end || v < lo || v > hi) {
    fprintf(stderr, "kiln synth: %s %s: expected a whole number in [%llu, %llu]\n", flag, arg, lo, hi);
    return false;
  }
  *out = v;
  return true;
}

static bool type_of(const char *name, kiln_type *out) {
  static const kiln_type types[] = {KILN_TYPE_F32,  KILN_TYPE_F16,  KILN_TYPE_BF16,
                                    KILN_TYPE_Q8_0, KILN_TYPE_Q4_0, KILN_TYPE_Q5_0,
                                    KILN_TYPE_Q4_K, KILN_TYPE_Q5_K, KILN_TYPE_Q6_K};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    if (!strcasecmp(name, kiln_type_name(types[i]))) {
      *out = types[i];
      return true;
    }
  fprintf(stderr, "kiln synth: unknown tensor type \"%s\"\n", name);
  return false;
}

/* "A,B,C,D": up to four whole numbers, the rest 0. */
static bool sections(const char *arg, int32_t *out) {
  int32_t v[4] = {0, 0, 0, 0};
  const char *p = arg;
  for (int i = 0;; i++) {
    char *end;
    errno = 0;
    long x = *p >= '0' && *p <= '9' ? strtol(p, &end, 10) : -1;
    if (i == 4 || x < 0 || x > 4096 || errno || (*end && *end != ',')) {
      fprintf(stderr, "kiln synth: --rope-sections %s: expected up to four whole numbers A,B,C,D\n", arg);
      return false;
    }
    v[i] = (int32_t)x;
    if (!*end) break;
    p = end + 1;
  }
  memcpy(out, v, sizeof v);
  return true;
}

int cmd_synth(int argc, char **argv) {
  enum { O_ARCH = 256, O_LAYERS, O_EMBD, O_FF, O_HEADS, O_HEADS_KV, O_HEAD_DIM, O_ROT, O_CTX, O_EPS, O_THETA,
         O_TYPE, O_EMBD_TYPE, O_TIED, O_UNTIED, O_VOCAB, O_VOCAB_FROM, O_SPECIAL_MS, O_EMBD_MS, O_SEED,
         O_VOCAB_ROWS, O_FULL_EVERY, O_PATTERN, O_SSM_CONV, O_SSM_GROUPS, O_SSM_HEADS, O_SSM_STATE, O_SSM_HEAD_V,
         O_SECTIONS };
  static const struct option longopts[] = {
      {"arch", required_argument, 0, O_ARCH},         {"layers", required_argument, 0, O_LAYERS},
      {"embd", required_argument, 0, O_EMBD},         {"ff", required_argument, 0, O_FF},
      {"heads", required_argument, 0, O_HEADS},       {"heads-kv", required_argument, 0, O_HEADS_KV},
      {"head-dim", required_argument, 0, O_HEAD_DIM}, {"rot", required_argument, 0, O_ROT},
      {"ctx", required_argument, 0, O_CTX},           {"eps", required_argument, 0, O_EPS},
      {"theta", required_argument, 0, O_THETA},       {"type", required_argument, 0, O_TYPE},
      {"embd-type", required_argument, 0, O_EMBD_TYPE}, {"tied", no_argument, 0, O_TIED},
      {"untied", no_argument, 0, O_UNTIED},           {"vocab", required_argument, 0, O_VOCAB},
      {"vocab-from", required_argument, 0, O_VOCAB_FROM}, {"special-ms", required_argument, 0, O_SPECIAL_MS},
      {"embd-ms", required_argument, 0, O_EMBD_MS},   {"seed", required_argument, 0, O_SEED},
      {"vocab-rows", required_argument, 0, O_VOCAB_ROWS}, {"full-every", required_argument, 0, O_FULL_EVERY},
      {"layers-pattern", required_argument, 0, O_PATTERN}, {"ssm-conv", required_argument, 0, O_SSM_CONV},
      {"ssm-groups", required_argument, 0, O_SSM_GROUPS}, {"ssm-heads", required_argument, 0, O_SSM_HEADS},
      {"ssm-state", required_argument, 0, O_SSM_STATE}, {"ssm-head-v", required_argument, 0, O_SSM_HEAD_V},
      {"rope-sections", required_argument, 0, O_SECTIONS},
      {"output", required_argument, 0, 'o'},          {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  /* The architecture decides the defaults, so find it first. */
  kiln_arch arch = KILN_ARCH_LLAMA;
  bool have_arch = false;
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], "--arch")) {
      have_arch = true;
      if (!strcmp(argv[i + 1], "llama")) arch = KILN_ARCH_LLAMA;
      else if (!strcmp(argv[i + 1], "qwen2")) arch = KILN_ARCH_QWEN2;
      else if (!strcmp(argv[i + 1], "qwen3")) arch = KILN_ARCH_QWEN3;
      else if (!strcmp(argv[i + 1], "qwen35")) arch = KILN_ARCH_QWEN35;
      else {
        fprintf(stderr, "kiln synth: --arch %s: expected llama, qwen2, qwen3 or qwen35\n", argv[i + 1]);
        return 2;
      }
    }
  kiln_synth_options o;
  kiln_synth_defaults(&o, arch);
  const char *out = NULL;
  double v;
  uint64_t u;
  bool ok = true;
  int opt;
  optind = 1;
  while (ok && (opt = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
    switch (opt) {
    case O_ARCH: break;
    case O_LAYERS: ok = whole("--layers", optarg, 1, 1024, &u); o.n_layer = (uint32_t)u; break;
    case O_EMBD: ok = whole("--embd", optarg, 1, 1 << 20, &u); o.n_embd = (uint32_t)u; break;
    case O_FF: ok = whole("--ff", optarg, 1, 1 << 22, &u); o.n_ff = (uint32_t)u; break;
    case O_HEADS: ok = whole("--heads", optarg, 1, 4096, &u); o.n_head = (uint32_t)u; break;
    case O_HEADS_KV: ok = whole("--heads-kv", optarg, 1, 4096, &u); o.n_head_kv = (uint32_t)u; break;
    case O_HEAD_DIM: ok = whole("--head-dim", optarg, 2, 4096, &u); o.head_dim = (uint32_t)u; break;
    case O_ROT: ok = whole("--rot", optarg, 2, 4096, &u); o.n_rot = (uint32_t)u; break;
    case O_CTX: ok = whole("--ctx", optarg, 1, 1 << 24, &u); o.n_ctx = (uint32_t)u; break;
    case O_EPS: ok = num("--eps", optarg, 1e-30, 1, &v); o.eps = (float)v; break;
    case O_THETA: ok = num("--theta", optarg, 1, 1e12, &v); o.rope_theta = (float)v; break;
    case O_TYPE: ok = type_of(optarg, &o.matrix_type); break;
    case O_EMBD_TYPE: ok = type_of(optarg, &o.embd_type); break;
    case O_TIED: o.tied_output = true; break;
    case O_UNTIED: o.tied_output = false; break;
    case O_VOCAB: ok = whole("--vocab", optarg, 1, 1 << 24, &u); o.n_vocab = (uint32_t)u; break;
    case O_VOCAB_FROM: o.vocab_from = optarg; break;
    case O_SPECIAL_MS: ok = num("--special-ms", optarg, 1e-30, 1e6, &o.special_ms); break;
    case O_EMBD_MS: ok = num("--embd-ms", optarg, 1e-30, 1e6, &o.embd_ms); break;
    case O_SEED: ok = whole("--seed", optarg, 0, ~0ull, &o.seed); break;
    case O_VOCAB_ROWS: ok = whole("--vocab-rows", optarg, 1, 1 << 24, &u); o.vocab_rows = (uint32_t)u; break;
    case O_FULL_EVERY: ok = whole("--full-every", optarg, 1, 1024, &u); o.full_attn_interval = (uint32_t)u; break;
    case O_PATTERN: o.layer_pattern = optarg; break;
    case O_SSM_CONV: ok = whole("--ssm-conv", optarg, 2, 64, &u); o.ssm_conv = (uint32_t)u; break;
    case O_SSM_GROUPS: ok = whole("--ssm-groups", optarg, 1, 4096, &u); o.ssm_groups = (uint32_t)u; break;
    case O_SSM_HEADS: ok = whole("--ssm-heads", optarg, 1, 4096, &u); o.ssm_heads = (uint32_t)u; break;
    case O_SSM_STATE: ok = whole("--ssm-state", optarg, 1, 4096, &u); o.ssm_state = (uint32_t)u; break;
    case O_SSM_HEAD_V: ok = whole("--ssm-head-v", optarg, 1, 4096, &u); o.ssm_head_v = (uint32_t)u; break;
    case O_SECTIONS: ok = sections(optarg, o.rope_sections); break;
    case 'o': out = optarg; break;
    case 'h': usage(stdout); return 0;
    default: usage(stderr); return 2;
    }
  }
  if (!ok) return 2;
  if (o.vocab_rows && !o.vocab_from) {
    fprintf(stderr, "kiln synth: --vocab-rows pads a vocabulary: it needs --vocab-from\n");
    return 2;
  }
  if (!have_arch || !out || optind != argc) {
    if (!have_arch) fprintf(stderr, "kiln synth: --arch is required\n");
    else if (!out) fprintf(stderr, "kiln synth: -o OUT.gguf is required\n");
    else fprintf(stderr, "kiln synth: unexpected argument \"%s\"\n", argv[optind]);
    usage(stderr);
    return 2;
  }
  kiln_status st = kiln_synth_write(&o, out);
  if (st) return cli_fail("synth", st);
  fprintf(stderr, "kiln synth: wrote %s\n", out);
  return 0;
}
