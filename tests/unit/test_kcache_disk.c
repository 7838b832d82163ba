/* The kernel cache's disk tier: entries are reused across services
 * (processes), and an entry that claims another target, is damaged or
 * describes another kernel is discarded with a log line and rebuilt, never
 * used; hostile files in the folder are never followed; concurrent
 * processes filling one folder leave only valid entries. Real NVRTC, sm_90,
 * no GPU. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "kcache/kcache_internal.h"
#include "kcache_testhost.h"
#include "kernel_templates.h"
#include "nvrtc_compile.h"
#include "testutil.h"

#define IMM_1E5 "0f3727C5AC"
#define IMM_1E6 "0f358637BD"

/* A backend's view: a service on dir, the templates, an NVRTC compiler. */
typedef struct svc {
  kiln_kcache *kc;
  kiln_nvrtc nv;
  kiln_kcompiler *c;
  kt_log log;
} svc;

static void svc_open(svc *s, const char *dir, const char *arch) {
  s->kc = kt_kcache_open(dir, &s->log);
  KT_ASSERT_OK(kiln_cuda_templates_register(kt_kcache_host(), s->kc));
  KT_ASSERT_OK(kiln_nvrtc_register(&s->nv, kt_kcache_host(), s->kc, arch, &s->c));
}

static kiln_kdesc *row_vec(svc *s, int64_t hidden, float eps) {
  kiln_kdesc *d;
  KT_ASSERT_OK(kiln_kdesc_new(s->c, KILN_CUDA_T_RMSNORM_ROW_VEC, &d));
  KT_ASSERT_OK(kiln_kdesc_set_f32(d, "eps", eps));
  KT_ASSERT_OK(kiln_kdesc_set_i64(d, "hidden", hidden));
  KT_ASSERT_OK(kiln_kdesc_set_dtype(d, "w_type", KILN_TYPE_F32));
  KT_ASSERT_OK(kiln_kdesc_set_i64(d, "block_size", 256));
  return d;
}

static kiln_kernel *get(svc *s, int64_t hidden, float eps) {
  kiln_kdesc *d = row_vec(s, hidden, eps);
  kiln_kernel *k = NULL;
  KT_ASSERT_OK(kiln_kcache_get(d, &k));
  kiln_kdesc_free(d);
  return k;
}

static char *entry_path(const char *dir, const kiln_kernel *k) {
  char hex[KILN_KKEY_HEX_SIZE];
  kiln_kkey_format(&k->key, hex);
  size_t n = strlen(dir) + 40;
  char *p = malloc(n);
  snprintf(p, n, "%s/%s.kk", dir, hex);
  return p;
}

static char *slurp(const char *path, size_t *out_n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  size_t got = fread(b, 1, (size_t)n, f);
  fclose(f);
  b[got] = '\0';
  *out_n = got;
  return b;
}

static kiln_kcache_stats stats(svc *s) {
  kiln_kcache_stats st;
  kiln_kcache_get_stats(s->kc, &st);
  return st;
}

/* The file at path decodes and holds exactly this canonical text and PTX. */
static void assert_entry_is(const char *path, const kiln_kernel *k) {
  size_t n;
  char *buf = slurp(path, &n);
  assert_non_null(buf);
  char *canon;
  void *img;
  size_t isz;
  kiln_kimage_kind kind;
  KT_ASSERT_OK(kiln__kcache_entry_decode(buf, n, &canon, &kind, &img, &isz));
  assert_string_equal(canon, k->canonical);
  assert_int_equal(isz, k->image_size);
  assert_memory_equal(img, k->image, isz);
  free(canon);
  free(img);
  free(buf);
}

static unsigned count_names(const char *dir, const char *suffix_or_mid) {
  unsigned n = 0;
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (strstr(e->d_name, suffix_or_mid)) n++;
  if (d) closedir(d);
  return n;
}

/* Two processes (and a third, the parent, afterwards) fill one folder at
 * once. Runs first, before this process has used NVRTC. */
static void test_concurrent_processes(void **state) {
  char *dir = kt_mkdtemp("kcache-fork");
  enum { KIDS = 3, KERNELS = 6 };
  static const int64_t hid[KERNELS] = {896, 896, 1536, 1536, 3584, 3584};
  static const float eps[KERNELS] = {1e-5f, 1e-6f, 1e-5f, 1e-6f, 1e-5f, 1e-6f};
  int go[2];
  assert_int_equal(pipe(go), 0);
  pid_t pids[KIDS];
  for (int i = 0; i < KIDS; i++) {
    pids[i] = fork();
    assert_true(pids[i] >= 0);
    if (pids[i] == 0) {
      close(go[1]);
      char c;
      if (read(go[0], &c, 1) != 0) _exit(3); /* wait until the parent lets all go */
      kiln_kcache_options o = {.dir = dir, .disk_enabled = true};
      kiln_kcache *kc;
      kiln_nvrtc nv;
      kiln_kcompiler *comp;
      kiln_status st = kiln_kcache_open(&o, &kc);
      if (!st) st = kiln_cuda_templates_register(kt_kcache_host(), kc);
      if (!st) st = kiln_nvrtc_register(&nv, kt_kcache_host(), kc, "sm_90", &comp);
      for (int j = 0; j < KERNELS && !st; j++) {
        kiln_kdesc *d;
        st = kiln_kdesc_new(comp, KILN_CUDA_T_RMSNORM_ROW_VEC, &d);
        if (st) break;
        if (!st) st = kiln_kdesc_set_f32(d, "eps", eps[j]);
        if (!st) st = kiln_kdesc_set_i64(d, "hidden", hid[j]);
        if (!st) st = kiln_kdesc_set_dtype(d, "w_type", KILN_TYPE_F32);
        if (!st) st = kiln_kdesc_set_i64(d, "block_size", 256);
        kiln_kernel *k;
        if (!st) st = kiln_kcache_get(d, &k);
        if (!st && !strstr(k->image, eps[j] == 1e-5f ? IMM_1E5 : IMM_1E6)) _exit(4);
        kiln_kdesc_free(d);
      }
      if (st) {
        fprintf(stderr, "child: %s\n", kiln_status_message(st));
        _exit(1);
      }
      kiln_kcache_close(kc);
      _exit(0);
    }
  }
  close(go[0]);
  close(go[1]); /* EOF: all children start together */
  for (int i = 0; i < KIDS; i++) {
    int status;
    assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
  }
  assert_int_equal(count_names(dir, ".kk.tmp."), 0);
  assert_int_equal(count_names(dir, ".kk"), KERNELS);

  svc s;
  svc_open(&s, dir, "sm_90");
  for (int j = 0; j < KERNELS; j++) {
    kiln_kernel *k = get(&s, hid[j], eps[j]);
    char *p = entry_path(dir, k);
    assert_entry_is(p, k);
    free(p);
  }
  kiln_kcache_stats st = stats(&s);
  assert_int_equal(st.disk_hits, KERNELS);
  assert_int_equal(st.compiles, 0);
  assert_int_equal(st.discarded, 0);
  kiln_kcache_close(s.kc);
  kt_rm_rf(dir);
  free(dir);
}

/* A second service (another process, as far as the cache can tell) finds
 * the first one's entry, byte for byte. */
static void test_reuse_across_services(void **state) {
  char *dir = kt_mkdtemp("kcache-reuse");
  svc a, b;
  svc_open(&a, dir, "sm_90");
  kiln_kernel *ka = get(&a, 3584, 1e-6f);
  assert_int_equal(stats(&a).compiles, 1);
  assert_int_equal(stats(&a).disk_writes, 1);
  char *p = entry_path(dir, ka);
  assert_entry_is(p, ka);
  svc_open(&b, dir, "sm_90");
  kiln_kernel *kb = get(&b, 3584, 1e-6f);
  assert_int_equal(stats(&b).disk_hits, 1);
  assert_int_equal(stats(&b).compiles, 0);
  assert_int_equal(kb->image_size, ka->image_size);
  assert_memory_equal(kb->image, ka->image, ka->image_size);
  assert_ptr_equal(get(&b, 3584, 1e-6f), kb);
  assert_int_equal(stats(&b).memory_hits, 1);
  /* Another target shares the folder under its own keys. */
  svc c;
  svc_open(&c, dir, "sm_120");
  kiln_kernel *kc120 = get(&c, 3584, 1e-6f);
  assert_false(kiln_kkey_equal(&kc120->key, &ka->key));
  assert_int_equal(stats(&c).compiles, 1);
  assert_non_null(strstr(kc120->image, ".target sm_120"));
  assert_entry_is(p, ka);
  assert_int_equal(count_names(dir, ".kk"), 2);
  free(p);
  kiln_kcache_close(a.kc);
  kiln_kcache_close(b.kc);
  kiln_kcache_close(c.kc);
  kt_rm_rf(dir);
  free(dir);
}

/* Replaces line `prefix...` of canonical text with `repl` (a whole line). */
static char *replace_line(const char *canon, const char *prefix, const char *repl) {
  const char *at = strstr(canon, prefix);
  assert_non_null(at);
  const char *end = strchr(at, '\n');
  size_t n = strlen(canon) + strlen(repl) + 2;
  char *out = malloc(n);
  snprintf(out, n, "%.*s%s%s", (int)(at - canon), canon, repl, end);
  return out;
}

/* Seeds the entry for (3584, 1e-6) with `canonical` and `image` under a
 * valid checksum, then asks for (3584, 1e-6): the entry must be refused
 * with a log line naming the file and `why`, and the right kernel built
 * and written in its place. */
static void seed_and_expect_rebuild(const char *canonical, const char *image, size_t image_size,
                                    const char *raw, size_t raw_size, const char *why) {
  char *dir = kt_mkdtemp("kcache-seeded");
  svc ref;
  svc_open(&ref, NULL, "sm_90"); /* memory only: the reference kernel */
  kiln_kernel *want = get(&ref, 3584, 1e-6f);
  char *p = entry_path(dir, want);
  if (raw) {
    assert_true(kt_write_file(p, raw, raw_size));
  } else {
    char *buf;
    size_t n;
    KT_ASSERT_OK(kiln__kcache_entry_encode(canonical, KILN_KIMAGE_PTX, image, image_size, &buf, &n));
    assert_true(kt_write_file(p, buf, n));
    free(buf);
  }
  svc s;
  svc_open(&s, dir, "sm_90");
  kiln_kernel *k = get(&s, 3584, 1e-6f);
  kiln_kcache_stats st = stats(&s);
  printf("log: %s", s.log.text);
  assert_int_equal(st.discarded, 1);
  assert_int_equal(st.disk_hits, 0);
  assert_int_equal(st.compiles, 1);
  assert_int_equal(st.disk_writes, 1);
  assert_non_null(strstr(s.log.text, p));
  assert_non_null(strstr(s.log.text, why));
  assert_true(strstr(k->image, IMM_1E6) && !strstr(k->image, IMM_1E5));
  assert_int_equal(k->image_size, want->image_size);
  assert_memory_equal(k->image, want->image, want->image_size);
  assert_entry_is(p, want);
  /* and the next service uses the rebuilt entry */
  svc t;
  svc_open(&t, dir, "sm_90");
  get(&t, 3584, 1e-6f);
  assert_int_equal(stats(&t).disk_hits, 1);
  assert_int_equal(stats(&t).discarded, 0);
  kiln_kcache_close(t.kc);
  kiln_kcache_close(s.kc);
  kiln_kcache_close(ref.kc);
  free(p);
  kt_rm_rf(dir);
  free(dir);
}

/* Entries claiming another compute capability, another NVRTC build or
 * another kernel ABI, holding another kernel's PTX (the 1e-5 one) under a
 * valid checksum: each is a miss and is rebuilt. */
static void test_foreign_fingerprints(void **state) {
  svc ref;
  svc_open(&ref, NULL, "sm_90");
  kiln_kernel *want = get(&ref, 3584, 1e-6f);
  kiln_kernel *wrong = get(&ref, 3584, 1e-5f); /* what a bad entry would smuggle in */
  static const struct {
    const char *prefix, *line, *why;
  } cases[] = {
      {"arch ", "arch sm_120", "target fingerprint mismatch: entry has \"arch sm_120\""},
      {"arch ", "arch sm_121", "where \"arch sm_90\" was asked for"},
      {"compiler-version ", "compiler-version 12.8 V12.8.93 CL-35583870",
       "entry has \"compiler-version 12.8 V12.8.93 CL-35583870\""},
      {"kernel-abi ", "kernel-abi 0", "target fingerprint mismatch: entry has \"kernel-abi 0\""},
      {"option --gpu", "option --gpu-architecture=sm_120", "target fingerprint mismatch"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *c = replace_line(want->canonical, cases[i].prefix, cases[i].line);
    seed_and_expect_rebuild(c, wrong->image, wrong->image_size, NULL, 0, cases[i].why);
    free(c);
  }
  kiln_kcache_close(ref.kc);
}

/* A truncated entry, a flipped byte, and an entry for another descriptor
 * (eps 1e-5 under a valid checksum, at the 1e-6 key's name). */
static void test_damaged_entries(void **state) {
  svc ref;
  svc_open(&ref, NULL, "sm_90");
  kiln_kernel *want = get(&ref, 3584, 1e-6f);
  kiln_kernel *wrong = get(&ref, 3584, 1e-5f);
  char *buf;
  size_t n;
  KT_ASSERT_OK(kiln__kcache_entry_encode(want->canonical, KILN_KIMAGE_PTX, want->image,
                                         want->image_size, &buf, &n));
  seed_and_expect_rebuild(NULL, NULL, 0, buf, n / 2, "truncated");
  seed_and_expect_rebuild(NULL, NULL, 0, buf, n - 1, "truncated");
  char *flip = malloc(n);
  memcpy(flip, buf, n);
  char *imm = strstr(flip, IMM_1E6);
  assert_non_null(imm);
  imm[9] ^= 0x01; /* 0f358637BD -> 0f358637BE: one ulp, still valid PTX */
  seed_and_expect_rebuild(NULL, NULL, 0, flip, n, "checksum mismatch");
  free(flip);
  free(buf);
  seed_and_expect_rebuild(wrong->canonical, wrong->image, wrong->image_size, NULL, 0,
                          "descriptor mismatch: entry has \"param eps f32 0x3727c5ac\" where "
                          "\"param eps f32 0x358637bd\" was asked for");
  seed_and_expect_rebuild(NULL, NULL, 0, "", 0, "truncated");
  seed_and_expect_rebuild(NULL, NULL, 0, "GIF89a", 6, "not a kiln kernel-cache entry");
  kiln_kcache_close(ref.kc);
}

/* A kiln_kcache_left_fn: "<file>: <why>" lines into the kt_log user. */
static void log_left(void *user, const char *file, const char *why) {
  char line[700];
  snprintf(line, sizeof line, "%s: %s", file, why);
  kt_log_sink(user, 1, line);
}

/* clear decides by content, not by name: a user's file that happens to be
 * named like an entry (or like a temporary file) stays, and is reported;
 * real entries, damaged ones (they still begin with the entry header) and
 * the service's leftover temporary files go. `kiln kernels --clear` once
 * deleted a text file named like an entry that --list had just called
 * INVALID. */
static void test_clear_checks_content(void **state) {
  (void)state;
  char *dir = kt_mkdtemp("kcache-clear");
  char *buf;
  size_t n;
  KT_ASSERT_OK(kiln__kcache_entry_encode("template t\n", KILN_KIMAGE_PTX, "ptx", 3, &buf, &n));
  static const char hex[] = "0123456789abcdef0123456789abcdef";
  static const struct {
    const char *name, *content; /* NULL content: the encoded entry */
    size_t len;                 /* 0: strlen(content), or the whole entry */
    bool removed;
    const char *why;
  } files[] = {
      {"%s.kk", NULL, 0, true, NULL},                   /* a real entry */
      {"%s.kk.tmp.12.3", NULL, 40, true, NULL},         /* a partial temporary file */
      {"%s.kk.tmp.12.4", "", 0, true, NULL},            /* a writer killed before writing */
      {"%s.kk.tmp.12.5", NULL, 7, true, NULL},          /* ... inside the first line */
      {"1%.31s.kk", NULL, 100, true, NULL},             /* a damaged (truncated) entry */
      {"2%.31s.kk", "precious\n", 0, false, "does not begin with the cache-entry header"},
      {"3%.31s.kk", "kiln-kc", 0, false, "does not begin with the cache-entry header"},
      {"4%.31s.kk", "", 0, false, "does not begin with the cache-entry header"},
      {"%s.kk.tmp.99.1", "my notes\n", 0, false, "does not begin like a cache entry"},
      {"%s.kk.tmp.99.x", "", 0, false, "not named like a cache entry"},
      {"%s.kk.bak", NULL, 0, false, "not named like a cache entry"},
      {"notes%.0s.txt", "mine\n", 0, false, "not named like a cache entry"},
  };
  size_t nf = sizeof files / sizeof files[0];
  char path[600], name[128];
  for (size_t i = 0; i < nf; i++) {
    snprintf(name, sizeof name, files[i].name, hex);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    const char *c = files[i].content ? files[i].content : buf;
    size_t len = files[i].len ? files[i].len : files[i].content ? strlen(c) : n;
    assert_true(kt_write_file(path, c, len));
  }
  kiln_kcache *kc = kt_kcache_open(dir, NULL);
  uint32_t removed = 0, left = 0;
  kt_log why = {0};
  KT_ASSERT_OK(kiln_kcache_clear_report(kc, log_left, &why, &removed, &left));
  printf("%s", why.text);
  assert_int_equal(removed, 5);
  assert_int_equal(left, nf - 5);
  for (size_t i = 0; i < nf; i++) {
    snprintf(name, sizeof name, files[i].name, hex);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (files[i].removed) {
      if (access(path, F_OK) == 0) fail_msg("%s was not removed", name);
      continue;
    }
    if (access(path, F_OK) != 0) fail_msg("%s, not a cache file, was removed", name);
    char line[300];
    snprintf(line, sizeof line, "%s: %s", name, files[i].why);
    if (!strstr(why.text, line)) fail_msg("no \"%s\" in the report:\n%s", line, why.text);
  }
  /* the plain call does the same (nothing more to remove) */
  KT_ASSERT_OK(kiln_kcache_clear(kc, &removed));
  assert_int_equal(removed, 0);
  kiln_kcache_close(kc);
  free(buf);
  kt_rm_rf(dir);
  free(dir);
}

/* A symlink, a folder and a FIFO where an entry belongs: none is followed
 * or damaged; the link and the FIFO are replaced by a real entry; the
 * folder stays and the kernel is still served from memory. */
static void test_hostile_files(void **state) {
  char *dir = kt_mkdtemp("kcache-hostile");
  char *outside = kt_mkdtemp("kcache-victim");
  char victim[512];
  snprintf(victim, sizeof victim, "%s/precious.txt", outside);
  assert_true(kt_write_file(victim, "user data\n", 10));

  svc ref;
  svc_open(&ref, NULL, "sm_90");
  kiln_kernel *k1 = get(&ref, 3584, 1e-6f), *k2 = get(&ref, 896, 1e-6f),
              *k3 = get(&ref, 1536, 1e-6f);
  char *p1 = entry_path(dir, k1), *p2 = entry_path(dir, k2), *p3 = entry_path(dir, k3);
  assert_int_equal(symlink(victim, p1), 0);
  assert_int_equal(mkdir(p2, 0700), 0);
  char inner[600];
  snprintf(inner, sizeof inner, "%s/inside", p2);
  assert_true(kt_write_file(inner, "x", 1));
  assert_int_equal(mkfifo(p3, 0600), 0);

  svc s;
  svc_open(&s, dir, "sm_90");
  kiln_kernel *g1 = get(&s, 3584, 1e-6f), *g2 = get(&s, 896, 1e-6f), *g3 = get(&s, 1536, 1e-6f);
  printf("log: %s", s.log.text);
  assert_memory_equal(g1->image, k1->image, k1->image_size);
  assert_memory_equal(g2->image, k2->image, k2->image_size);
  assert_memory_equal(g3->image, k3->image, k3->image_size);
  assert_non_null(strstr(s.log.text, "symbolic link"));
  assert_non_null(strstr(s.log.text, "not a regular file"));
  assert_non_null(strstr(s.log.text, "cannot write"));
  size_t n;
  char *v = slurp(victim, &n);
  assert_string_equal(v, "user data\n");
  free(v);
  struct stat sb;
  assert_int_equal(lstat(p1, &sb), 0);
  assert_true(S_ISREG(sb.st_mode));
  assert_entry_is(p1, k1);
  assert_int_equal(lstat(p2, &sb), 0);
  assert_true(S_ISDIR(sb.st_mode));
  assert_int_equal(access(inner, F_OK), 0);
  assert_int_equal(lstat(p3, &sb), 0);
  assert_true(S_ISREG(sb.st_mode));
  assert_int_equal(stats(&s).write_failures, 1);

  /* clear: removes the real entry (the FIFO's replacement); leaves the
   * link named like an entry (neither followed nor unlinked: the cache
   * writes no links), the folder named like one, and everything else, each
   * reported with its reason. */
  char keep[512];
  snprintf(keep, sizeof keep, "%s/notes.txt", dir);
  assert_true(kt_write_file(keep, "mine", 4));
  unlink(p1);
  assert_int_equal(symlink(victim, p1), 0);
  uint32_t removed = 0, left = 0;
  kt_log why = {0};
  KT_ASSERT_OK(kiln_kcache_clear_report(s.kc, log_left, &why, &removed, &left));
  printf("left: %s", why.text);
  assert_int_equal(removed, 1);
  assert_int_equal(left, 3);
  char line[700];
  snprintf(line, sizeof line, "%s: a symbolic link", p1 + strlen(dir) + 1);
  assert_non_null(strstr(why.text, line));
  snprintf(line, sizeof line, "%s: a folder", p2 + strlen(dir) + 1);
  assert_non_null(strstr(why.text, line));
  assert_non_null(strstr(why.text, "notes.txt: not named like a cache entry"));
  struct stat lb;
  assert_int_equal(lstat(p1, &lb), 0);
  assert_true(S_ISLNK(lb.st_mode));
  assert_int_equal(lstat(p3, &lb), -1);
  v = slurp(victim, &n);
  assert_string_equal(v, "user data\n");
  free(v);
  assert_int_equal(access(keep, F_OK), 0);
  assert_int_equal(access(inner, F_OK), 0);
  kiln_kcache_close(s.kc);
  kiln_kcache_close(ref.kc);
  free(p1);
  free(p2);
  free(p3);
  kt_rm_rf(dir);
  kt_rm_rf(outside);
  free(dir);
  free(outside);
}

static void test_disk_tier_off(void **state) {
  char *dir = kt_mkdtemp("kcache-off");
  kiln_kcache_options o = {.dir = dir, .disk_enabled = false};
  kiln_kcache *kc;
  KT_ASSERT_OK(kiln_kcache_open(&o, &kc));
  assert_null(kiln_kcache_dir(kc));
  KT_ASSERT_OK(kiln_cuda_templates_register(kt_kcache_host(), kc));
  kiln_nvrtc nv;
  kiln_kcompiler *c;
  KT_ASSERT_OK(kiln_nvrtc_register(&nv, kt_kcache_host(), kc, "sm_90", &c));
  svc s = {.kc = kc, .c = c};
  get(&s, 896, 1e-6f);
  assert_int_equal(count_names(dir, "kk"), 0);
  KT_ASSERT_ERR(kiln_kcache_clear(kc, NULL), KILN_STATUS_UNSUPPORTED, "disk tier is off");
  kiln_kcache_close(kc);
  kt_rm_rf(dir);
  free(dir);
}

static void test_default_dir(void **state) {
  char *saved_xdg = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
  char *saved_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
  char *d;
  setenv("XDG_CACHE_HOME", "/x/cache", 1);
  KT_ASSERT_OK(kiln_kcache_default_dir(&d));
  assert_string_equal(d, "/x/cache/kiln");
  free(d);
  setenv("XDG_CACHE_HOME", "relative", 1); /* the XDG spec says: ignore */
  setenv("HOME", "/home/u", 1);
  KT_ASSERT_OK(kiln_kcache_default_dir(&d));
  assert_string_equal(d, "/home/u/.cache/kiln");
  free(d);
  unsetenv("XDG_CACHE_HOME");
  unsetenv("HOME");
  KT_ASSERT_ERR(kiln_kcache_default_dir(&d), KILN_STATUS_NOT_FOUND, "[kernel_cache] dir");
  if (saved_xdg) setenv("XDG_CACHE_HOME", saved_xdg, 1);
  if (saved_home) setenv("HOME", saved_home, 1);
  free(saved_xdg);
  free(saved_home);
  assert_int_equal(kiln_kcache_n_config_keys, 2);
  assert_string_equal(kiln_kcache_config_keys[0].name, "dir");
  assert_string_equal(kiln_kcache_config_keys[1].name, "enabled");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_concurrent_processes),
      cmocka_unit_test(test_reuse_across_services),
      cmocka_unit_test(test_foreign_fingerprints),
      cmocka_unit_test(test_damaged_entries),
      cmocka_unit_test(test_hostile_files),
      cmocka_unit_test(test_clear_checks_content),
      cmocka_unit_test(test_disk_tier_off),
      cmocka_unit_test(test_default_dir),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
