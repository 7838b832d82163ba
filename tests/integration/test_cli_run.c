/* kiln run through the command: conversation mode (-i) keeps the history in
 * the KV cache and prefills only each new turn, which must continue exactly
 * as a fresh prefill of the whole conversation would; --stop, --ignore-eos,
 * -n -1; progress only on a terminal. Models are synthesized Qwen2s with
 * the real Qwen2 vocabulary (../shared/models/ggml-vocab-qwen2.gguf). */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "kiln/chat.h"
#include "kiln/kiln.h"
#include "kiln/synth.h"
#include "kiln_proc.h"
#include "testutil.h"

static char *dir, *vocab_path;
static char plain[4096], eot_first[4096];

/* Two models: `plain` (special tokens of mean-square 1e-6, as in the seed
 * defect: their logits are small), and `eot_first`, whose special-token rows
 * are large (mean-square 0.05, tied output), so that greedy decoding picks
 * <|im_end|> first after a ChatML prompt (seed 3, found by trying). */
static int setup(void **state) {
  (void)state;
  vocab_path = kt_model_path("ggml-vocab-qwen2.gguf");
  if (!vocab_path) return 0;
  dir = kt_mkdtemp("cli-run");
  kiln_synth_options o;
  kiln_synth_defaults(&o, KILN_ARCH_QWEN2);
  o.n_layer = 1;
  o.n_embd = 64;
  o.n_head = 4;
  o.n_head_kv = 2;
  o.embd_type = KILN_TYPE_Q8_0;
  o.vocab_from = vocab_path;
  o.special_ms = 1e-6;
  snprintf(plain, sizeof plain, "%s/plain.gguf", dir);
  if (kiln_synth_write(&o, plain)) return -1;
  o.tied_output = true;
  o.special_ms = 0.05;
  o.seed = 3;
  snprintf(eot_first, sizeof eot_first, "%s/eot.gguf", dir);
  if (kiln_synth_write(&o, eot_first)) return -1;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  if (dir) kt_rm_rf(dir);
  free(dir);
  free(vocab_path);
  return 0;
}

static int32_t *ids_of(json_t *a, size_t *out_n) {
  assert_true(json_is_array(a));
  size_t n = json_array_size(a);
  int32_t *ids = malloc((n + 1) * sizeof *ids);
  for (size_t i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(a, i));
  *out_n = n;
  return ids;
}

/* The JSON lines of out (one per turn). */
static json_t *json_lines(const char *out) {
  json_t *a = json_array();
  for (const char *p = out; *p;) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    json_error_t e;
    json_t *j = json_loadb(p, len, 0, &e);
    if (!j) fail_msg("not a JSON line (%s): %.*s", e.text, (int)len, p);
    json_array_append_new(a, j);
    p += len + (nl ? 1 : 0);
  }
  return a;
}

static int64_t geti(json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  if (!json_is_integer(v)) fail_msg("no integer \"%s\"", key);
  return (int64_t)json_integer_value(v);
}

/* Appends b[0..nb) to *a (length *na). */
static void append(int32_t **a, size_t *na, const int32_t *b, size_t nb) {
  *a = realloc(*a, (*na + nb + 1) * sizeof **a);
  memcpy(*a + *na, b, nb * sizeof *b);
  *na += nb;
}

/* Greedy continuation of `history` on a fresh cpu session: what kiln run
 * would give after prefilling the whole conversation at once. */
static int32_t *fresh_continuation(const char *model_path, const int32_t *history, size_t n, int32_t n_predict,
                                   size_t *out_n) {
  kiln_runtime *rt;
  kiln_model *m;
  kiln_session *s;
  kiln_sampler *smp;
  KT_ASSERT_OK(kiln_runtime_open(&(kiln_runtime_options){.use_environment = true}, &rt));
  KT_ASSERT_OK(kiln_model_open(model_path, &m));
  KT_ASSERT_OK(kiln_session_open(rt, m, &(kiln_session_options){.backend = "cpu", .fallback_cpu = -1}, &s));
  KT_ASSERT_OK(kiln_sampler_new(&(kiln_sampler_options){0.0f, 0, 1.0f, 1}, &smp));
  int32_t *out = calloc((size_t)n_predict + 1, sizeof *out);
  kiln_generate_stats st;
  KT_ASSERT_OK(kiln_generate(s, history, (int32_t)n, n_predict, smp, NULL, NULL, out, &st));
  *out_n = (size_t)st.n_generated;
  kiln_sampler_free(smp);
  kiln_session_free(s);
  kiln_model_free(m);
  kiln_runtime_free(rt);
  return out;
}

/* Three turns on stdin (the second spans two lines), -n 3 a turn: each
 * turn's prefill is exactly what kiln_chat_next_turn makes of its message,
 * after the previous reply's last (unfed) token; the KV cache grows by
 * exactly that; and each reply equals a fresh greedy run over the whole
 * conversation so far. */
static void test_conversation_keeps_the_cache(void **state) {
  (void)state;
  if (!vocab_path) skip();
  const char *in = "What is the capital of France?\nAnd of\\\nItaly?\nThanks!\n";
  const char *msgs[] = {"What is the capital of France?", "And of\nItaly?", "Thanks!"};
  const char *args[] = {"run", "-m", plain, "-i", "-n", "3", "--json", NULL};
  kt_proc p;
  assert_true(kt_kiln(args, in, strlen(in), false, &p));
  if (p.status != 0) fail_msg("exit %d: %s", p.status, p.err);
  json_t *turns = json_lines(p.out);
  assert_int_equal(json_array_size(turns), 3);

  kiln_gguf *g;
  kiln_vocab *v;
  KT_ASSERT_OK(kiln_gguf_open(vocab_path, &g));
  KT_ASSERT_OK(kiln_vocab_load(g, &v));
  kiln_gguf_close(g);
  int32_t *history = NULL; /* everything fed so far, as a fresh run would get it */
  size_t n_history = 0;
  int64_t kv = 0;
  int32_t pending = -1;
  for (size_t t = 0; t < 3; t++) {
    json_t *turn = json_array_get(turns, t);
    assert_int_equal(geti(turn, "turn"), (int64_t)t + 1);
    size_t n_prompt, n_gen;
    int32_t *prompt = ids_of(json_object_get(turn, "prompt_ids"), &n_prompt);
    int32_t *gen = ids_of(json_object_get(turn, "generated_ids"), &n_gen);
    /* what this turn must feed, and nothing of the history */
    int32_t *want;
    size_t n_want;
    if (t == 0) {
      kiln_chat_message msg = {"user", msgs[0]};
      KT_ASSERT_OK(kiln_chat_tokenize(v, KILN_CHAT_CHATML, &msg, 1, true, &want, &n_want, NULL));
    } else {
      int32_t *next;
      size_t n_next;
      KT_ASSERT_OK(kiln_chat_next_turn(v, KILN_CHAT_CHATML, false, msgs[t], &next, &n_next, NULL));
      want = NULL;
      n_want = 0;
      append(&want, &n_want, &pending, 1);
      append(&want, &n_want, next, n_next);
      free(next);
    }
    assert_int_equal(n_prompt, n_want);
    assert_memory_equal(prompt, want, n_want * sizeof *want);
    assert_int_equal(geti(turn, "prefill_tokens"), (int64_t)n_want);
    assert_int_equal(geti(turn, "kv_before"), kv);
    assert_int_equal(n_gen, 3);
    assert_string_equal(json_string_value(json_object_get(turn, "stop")), "n_predict");
    /* the cache holds the prompt and every reply token but the last */
    kv += (int64_t)n_prompt + (int64_t)n_gen - 1;
    assert_int_equal(geti(turn, "kv_after"), kv);
    /* the reply equals a fresh run over the whole conversation */
    append(&history, &n_history, prompt, n_prompt);
    size_t n_fresh;
    int32_t *fresh = fresh_continuation(plain, history, n_history, 3, &n_fresh);
    assert_int_equal(n_fresh, n_gen);
    assert_memory_equal(fresh, gen, n_gen * sizeof *gen);
    append(&history, &n_history, gen, n_gen - 1);
    pending = gen[n_gen - 1];
    free(fresh);
    free(want);
    free(prompt);
    free(gen);
  }
  free(history);
  kiln_vocab_free(v);
  json_decref(turns);
  kt_proc_free(&p);

  /* the text form: one summary per turn naming the prefill and the cache */
  const char *args2[] = {"run", "-m", plain, "-i", "-n", "3", "-p", "Hello", NULL};
  assert_true(kt_kiln(args2, "Bye\n", 4, false, &p));
  assert_int_equal(p.status, 0);
  assert_non_null(strstr(p.err, "kiln: turn 1 | prefill 9 tokens after 0 in the KV cache, generated 3"));
  assert_non_null(strstr(p.err, "kiln: turn 2 | prefill "));
  assert_null(strstr(p.err, "kiln: turn 3"));
  kt_proc_free(&p);
  /* a drawn seed has no summary line to go in: said first */
  const char *drawn[] = {"run", "-m", plain, "-i", "-n", "2", "--temp", "0.8", "-s", "-1", NULL};
  assert_true(kt_kiln(drawn, "Hi\n", 3, false, &p));
  assert_int_equal(p.status, 0);
  assert_non_null(strstr(p.err, "kiln run: seed "));
  kt_proc_free(&p);

  /* A reply that fills the cache: with a message still to come, an error
   * naming the cache (the message is never answered); at the end of input,
   * a warning and exit 0. */
  const char *full[] = {"run", "-m", plain, "-i", "-n", "200", "-c", "40", "--ignore-eos", NULL};
  assert_true(kt_kiln(full, "Hello\nBye\n", 10, false, &p));
  assert_int_equal(p.status, 1);
  assert_non_null(strstr(p.err, "turn 1's reply filled the KV cache of 40 positions: no room for turn 2"));
  assert_null(strstr(p.err, "kiln: turn 2"));
  kt_proc_free(&p);
  assert_true(kt_kiln(full, "Hello\n", 6, false, &p));
  assert_int_equal(p.status, 0);
  assert_non_null(strstr(p.err, "warning: turn 1's reply stopped when the KV cache of 40 positions was full"));
  kt_proc_free(&p);
}

/* A reply the model closes with <|im_end|>: that token goes into the cache
 * and the next turn does not close the turn again; --ignore-eos keeps
 * generating past it; a model without a chat template cannot converse. */
static void test_conversation_end_of_turn(void **state) {
  (void)state;
  if (!vocab_path) skip();
  const char *args[] = {"run", "-m", eot_first, "-i", "-n", "4", "--json", NULL};
  kt_proc p;
  assert_true(kt_kiln(args, "Hi\nAgain\n", 9, false, &p));
  if (p.status != 0) fail_msg("exit %d: %s", p.status, p.err);
  json_t *turns = json_lines(p.out);
  assert_int_equal(json_array_size(turns), 2);
  json_t *t1 = json_array_get(turns, 0), *t2 = json_array_get(turns, 1);
  size_t n1, n2;
  int32_t *g1 = ids_of(json_object_get(t1, "generated_ids"), &n1);
  int32_t *p2 = ids_of(json_object_get(t2, "prompt_ids"), &n2);
  assert_int_equal(n1, 1);
  assert_int_equal(g1[0], 151645); /* <|im_end|> */
  assert_string_equal(json_string_value(json_object_get(t1, "stop")), "eos");
  /* turn 2: <|im_end|> (the model's), "\n", then the user turn */
  assert_int_equal(p2[0], 151645);
  assert_int_equal(p2[1], 198);
  assert_int_equal(p2[2], 151644);
  assert_int_equal(geti(t2, "kv_before"), geti(t1, "kv_after"));
  free(g1);
  free(p2);
  json_decref(turns);
  kt_proc_free(&p);

  const char *ig[] = {"run", "-m", eot_first, "--chat", "-p", "Hi", "-n", "4", "--ignore-eos", "--json", NULL};
  assert_true(kt_kiln(ig, NULL, 0, false, &p));
  assert_int_equal(p.status, 0);
  json_t *j = json_loads(p.out, 0, NULL);
  assert_non_null(j);
  assert_string_equal(json_string_value(json_object_get(j, "stop")), "n_predict");
  size_t n;
  int32_t *g = ids_of(json_object_get(j, "generated_ids"), &n);
  assert_int_equal(n, 4);
  for (size_t i = 0; i < n; i++) assert_true(g[i] != 151645 && g[i] != 151643);
  free(g);
  json_decref(j);
  kt_proc_free(&p);

  char *stories = kt_model_path("stories260K.gguf");
  if (stories) {
    const char *nt[] = {"run", "-m", stories, "-i", NULL};
    assert_true(kt_kiln(nt, "Hi\n", 3, false, &p));
    assert_int_equal(p.status, 1);
    assert_non_null(strstr(p.err, "needs a chat template"));
    kt_proc_free(&p);
    free(stories);
  }
}

/* --stop ends the text at the stop string; -n -1 runs until the KV cache
 * is full (this model does not sample EOS); -s -1 picks a seed and says it. */
static void test_stop_and_unbounded(void **state) {
  (void)state;
  char *stories = kt_model_path("stories260K.gguf");
  if (!stories) skip();
  const char *st[] = {"run", "-m", stories, "-p", "Once upon a time", "-n", "64", "--stop", "park", "--stop",
                      "Lily", "--json", NULL};
  kt_proc p;
  assert_true(kt_kiln(st, NULL, 0, false, &p));
  assert_int_equal(p.status, 0);
  json_t *j = json_loads(p.out, 0, NULL);
  assert_non_null(j);
  assert_string_equal(json_string_value(json_object_get(j, "stop")), "stop");
  assert_string_equal(json_string_value(json_object_get(j, "text")), ", there was a little girl named Lily");
  json_decref(j);
  kt_proc_free(&p);

  /* a stop string across token boundaries (" girl", " named") */
  const char *span[] = {"run", "-m", stories, "-p", "Once upon a time", "-n", "64", "-r", "girl nam", "--json", NULL};
  assert_true(kt_kiln(span, NULL, 0, false, &p));
  assert_int_equal(p.status, 0);
  j = json_loads(p.out, 0, NULL);
  assert_string_equal(json_string_value(json_object_get(j, "stop")), "stop");
  assert_string_equal(json_string_value(json_object_get(j, "text")), ", there was a little girl named");
  json_decref(j);
  kt_proc_free(&p);

  const char *unb[] = {"run", "-m", stories, "-p", "Once upon a time", "-n", "-1", "-c", "40", "--json", NULL};
  assert_true(kt_kiln(unb, NULL, 0, false, &p));
  assert_int_equal(p.status, 0);
  j = json_loads(p.out, 0, NULL);
  assert_string_equal(json_string_value(json_object_get(j, "stop")), "ctx");
  assert_int_equal(geti(j, "n_prompt") + geti(j, "n_generated"), 41); /* 40 positions, the last token unfed */
  json_decref(j);
  kt_proc_free(&p);

  const char *seed[] = {"run", "-m", stories, "-p", "Once", "-n", "4", "--temp", "0.8", "-s", "-1", NULL};
  assert_true(kt_kiln(seed, NULL, 0, false, &p));
  assert_int_equal(p.status, 0);
  assert_non_null(strstr(p.err, "| seed "));
  assert_null(strstr(p.err, "| seed -1"));
  kt_proc_free(&p);
  /* [sampling] seed = -1 in a config file too: a seed drawn for each run
   * and reported, and the reported one gives the same text again */
  if (dir) {
    char ini[4200], seed_arg[32];
    snprintf(ini, sizeof ini, "%s/seed.ini", dir);
    static const char cfg[] = "[sampling]\nseed = -1\ntemperature = 0.9\n";
    assert_true(kt_write_file(ini, cfg, sizeof cfg - 1));
    const char *drawn[] = {"run", "-m", stories, "-p", "Once", "-n", "12", "--config", ini, "--json", NULL};
    json_int_t seeds[2];
    char *text = NULL;
    for (int r = 0; r < 2; r++) {
      assert_true(kt_kiln(drawn, NULL, 0, false, &p));
      assert_int_equal(p.status, 0);
      j = json_loads(p.out, 0, NULL);
      assert_non_null(j);
      seeds[r] = json_integer_value(json_object_get(j, "seed"));
      assert_true(seeds[r] >= 0);
      if (r == 0) text = strdup(json_string_value(json_object_get(j, "text")));
      json_decref(j);
      kt_proc_free(&p);
    }
    assert_true(seeds[0] != seeds[1]); /* two draws below 2^53 */
    snprintf(seed_arg, sizeof seed_arg, "%lld", (long long)seeds[0]);
    const char *again[] = {"run", "-m", stories, "-p", "Once", "-n", "12", "--temp", "0.9", "-s", seed_arg, "--json", NULL};
    assert_true(kt_kiln(again, NULL, 0, false, &p));
    assert_int_equal(p.status, 0);
    j = json_loads(p.out, 0, NULL);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "text")), text);
    json_decref(j);
    kt_proc_free(&p);
    free(text);
  }
  /* -n 1: the token comes from the prefill; no decode speed is claimed */
  const char *one[] = {"run", "-m", stories, "-p", "Once", "-n", "1", NULL};
  assert_true(kt_kiln(one, NULL, 0, false, &p));
  assert_int_equal(p.status, 0);
  assert_non_null(strstr(p.err, "generated 1 | prefill "));
  assert_non_null(strstr(p.err, "no decode step"));
  assert_null(strstr(p.err, "decode 0.0"));
  kt_proc_free(&p);
  free(stories);
}

/* kiln parity --json and kiln bench -o json / md say what the text says. */
static void test_parity_and_bench_output(void **state) {
  (void)state;
  if (!vocab_path) skip();
  const char *ok[] = {"parity", "-m", plain, "--chat", "-p", "Hello", "--ref", "cpu:f64", "--test", "cpu", "--per-op",
                      "--json", NULL};
  const char *bad[] = {"parity", "-m", plain, "--chat", "-p", "Hello", "--ref", "cpu:f64", "--test", "cpu",
                       "--per-op", "--test-eps", "1e-5", "--json", NULL};
  kt_proc p;
  assert_true(kt_kiln(ok, NULL, 0, false, &p));
  assert_int_equal(p.status, 0);
  json_t *j = json_loads(p.out, 0, NULL);
  assert_non_null(j);
  assert_true(json_is_true(json_object_get(j, "pass")));
  assert_true(json_is_null(json_object_get(j, "first_fail")));
  assert_true(json_array_size(json_object_get(j, "rows")) > 9);
  assert_int_equal(geti(j, "n_rows"), (int64_t)json_array_size(json_object_get(j, "rows")));
  json_decref(j);
  kt_proc_free(&p);
  assert_true(kt_kiln(bad, NULL, 0, false, &p));
  assert_int_equal(p.status, 1);
  j = json_loads(p.out, 0, NULL);
  assert_non_null(j);
  json_t *f = json_object_get(j, "first_fail");
  assert_string_equal(json_string_value(json_object_get(f, "node")), "blk.0.attn_norm");
  assert_int_equal(geti(f, "token"), 151644);
  json_decref(j);
  kt_proc_free(&p);

  const char *bj[] = {"bench", "-m", plain, "-p", "16", "-n", "4", "-r", "2", "-t", "1", "-o", "json", NULL};
  const char *bm[] = {"bench", "-m", plain, "-p", "16", "-n", "4", "-r", "2", "-t", "1", "-d", "8", NULL};
  assert_true(kt_kiln(bj, NULL, 0, false, &p));
  assert_int_equal(p.status, 0);
  j = json_loads(p.out, 0, NULL);
  assert_int_equal(json_array_size(j), 2);
  json_t *pp = json_array_get(j, 0), *tg = json_array_get(j, 1);
  assert_string_equal(json_string_value(json_object_get(pp, "test")), "pp16");
  assert_string_equal(json_string_value(json_object_get(tg, "test")), "tg4");
  assert_int_equal(geti(pp, "n_threads"), 1);
  assert_string_equal(json_string_value(json_object_get(pp, "precision")), "f32");
  assert_int_equal(json_array_size(json_object_get(tg, "samples_ns")), 2);
  assert_true(json_real_value(json_object_get(tg, "avg_ts")) > 0);
  json_decref(j);
  kt_proc_free(&p);
  assert_true(kt_kiln(bm, NULL, 0, false, &p));
  assert_int_equal(p.status, 0);
  assert_non_null(
      strstr(p.out, "| model | backend | threads | precision | n_batch | test | t/s | ms/token | total ms |"));
  assert_non_null(strstr(p.out, "| plain.gguf | cpu | 1 | f32 | 24 | pp16 @ d8 | "));
  assert_non_null(strstr(p.out, "| tg4 @ d8 | "));
  kt_proc_free(&p);

  /* The KV cache's type shows: in the table's precision, and as
   * llama-bench's type_k / type_v in JSON and CSV (whose precision, which
   * can hold commas, is quoted). */
  char ini[4200];
  snprintf(ini, sizeof ini, "%s/kv16.ini", dir);
  assert_true(kt_write_file(ini, "[kv_cache]\ntype = f16\n", 22));
  const char *kb[] = {"bench", "-m", plain, "-p", "8", "-n", "0", "-r", "1", "-t", "1", "--config", ini, NULL};
  assert_true(kt_kiln(kb, NULL, 0, false, &p));
  assert_int_equal(p.status, 0);
  assert_non_null(strstr(p.out, "| plain.gguf | cpu | 1 | f32, KV f16 | 8 | pp8 | "));
  kt_proc_free(&p);
  const char *kj[] = {"bench", "-m", plain, "-p", "8", "-n", "0", "-r", "1", "-t", "1", "--config", ini, "-o", "json", NULL};
  assert_true(kt_kiln(kj, NULL, 0, false, &p));
  assert_int_equal(p.status, 0);
  j = json_loads(p.out, 0, NULL);
  assert_non_null(j);
  assert_string_equal(json_string_value(json_object_get(json_array_get(j, 0), "type_k")), "f16");
  assert_string_equal(json_string_value(json_object_get(json_array_get(j, 0), "type_v")), "f16");
  json_decref(j);
  kt_proc_free(&p);
  const char *kc[] = {"bench", "-m", plain, "-p", "8", "-n", "0", "-r", "1", "-t", "1", "--config", ini, "-o", "csv", NULL};
  assert_true(kt_kiln(kc, NULL, 0, false, &p));
  assert_int_equal(p.status, 0);
  assert_non_null(strstr(p.out, ",total_ms,type_k,type_v\n"));
  assert_non_null(strstr(p.out, ",cpu,1,\"f32, KV f16\",8,0,pp8,"));
  assert_non_null(strstr(p.out, ",f16,f16\n"));
  kt_proc_free(&p);

  /* Past the training context (plain.gguf's context_length is 512): run,
   * with kiln run -c's warning, not refused. */
  const char *past[] = {"bench", "-m", plain, "-p", "520", "-n", "0", "-r", "1", "-t", "1", NULL};
  assert_true(kt_kiln(past, NULL, 0, false, &p));
  if (p.status != 0) fail_msg("kiln bench -p 520 exited %d: %s", p.status, p.err);
  assert_non_null(strstr(p.out, "| pp520 | "));
  assert_non_null(strstr(p.err, "n_ctx 520 is past the model's training context"));
  assert_non_null(strstr(p.err, "context_length 512"));
  kt_proc_free(&p);
}

/* Progress lines go to stderr only when it is a terminal. */
static void test_progress_only_on_a_terminal(void **state) {
  (void)state;
  char *stories = kt_model_path("stories260K.gguf");
  if (!stories) skip();
  const char *args[] = {"run", "-m", stories, "-p", "Once upon a time, there was a little girl named Lily.", "-b",
                        "2", "-n", "2", NULL};
  kt_proc tty, pipe;
  assert_true(kt_kiln(args, NULL, 0, true, &tty));
  assert_true(kt_kiln(args, NULL, 0, false, &pipe));
  assert_int_equal(tty.status, 0);
  assert_int_equal(pipe.status, 0);
  assert_non_null(strstr(tty.err, "kiln: prefill 2/"));
  assert_non_null(strstr(tty.err, "kiln: loading on cpu"));
  assert_null(strstr(pipe.err, "prefill 2/"));
  assert_null(strstr(pipe.err, "loading on"));
  assert_null(strchr(pipe.err, '\r'));
  kt_proc_free(&tty);
  kt_proc_free(&pipe);
  free(stories);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conversation_keeps_the_cache),
      cmocka_unit_test(test_conversation_end_of_turn),
      cmocka_unit_test(test_stop_and_unbounded),
      cmocka_unit_test(test_parity_and_bench_output),
      cmocka_unit_test(test_progress_only_on_a_terminal),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
