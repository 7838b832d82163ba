/* The kernel cache's folder is opened on first use, and its temporary
 * files are its own to clean: a service that compiles nothing creates no
 * folder; one whose folder is unusable keeps kernels in memory and says so
 * once; a writer killed between creating its temporary file and writing it
 * leaves a file that the next service sweeps (once it is older than a
 * minute) and `--clear` removes at once, while a live writer's file is
 * never touched. Real processes, real flock(2), real NVRTC (sm_90, no
 * GPU). The fork tests run first, before this process has used NVRTC. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../cli/cmd_kernels.h"
#include "kcache/kcache_internal.h"
#include "kcache_testhost.h"
#include "kernel_templates.h"
#include "nvrtc_compile.h"
#include "testutil.h"

static const char hex[] = "00112233445566778899aabbccddeeff";

static unsigned count_files(const char *dir) {
  unsigned n = 0;
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  if (d) closedir(d);
  return n;
}

/* The one temporary file in dir (its name into out), or fails. */
static void only_tmp(const char *dir, char out[128]) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  struct dirent *e;
  int n = 0;
  while ((e = readdir(d))) {
    if (!kiln__kcache_is_tmp_name(e->d_name)) continue;
    snprintf(out, 128, "%s", e->d_name);
    n++;
  }
  closedir(d);
  assert_int_equal(n, 1);
}

static void make_old(const char *dir, const char *name) {
  char path[700];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  struct timespec t[2];
  clock_gettime(CLOCK_REALTIME, &t[0]);
  t[0].tv_sec -= 3600;
  t[1] = t[0];
  assert_int_equal(utimensat(AT_FDCWD, path, t, 0), 0);
}

/* A child that creates its temporary file the service's way and, with
 * `die`, is killed before writing a byte; without it, keeps the file
 * locked until the parent closes `hold`. Returns the child's pid; the
 * file exists when this returns. */
static pid_t writer(const char *dir, bool die, int *out_hold) {
  int ready[2], hold[2];
  assert_int_equal(pipe(ready), 0);
  assert_int_equal(pipe(hold), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(ready[0]);
    close(hold[1]);
    kiln_kcache *kc = kt_kcache_open(dir, NULL);
    int dirfd = kiln__kcache_folder_fd(kc);
    char name[96];
    if (dirfd < 0 || kiln__kcache_tmp_create(kc, dirfd, hex, name) < 0) _exit(3);
    if (die) raise(SIGKILL);
    if (write(ready[1], "r", 1) != 1) _exit(4);
    char c;
    if (read(hold[0], &c, 1) < 0) _exit(5); /* EOF: the parent let go */
    _exit(0);
  }
  close(ready[1]);
  close(hold[0]);
  if (die) {
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    close(hold[1]);
    *out_hold = -1;
  } else {
    char c;
    assert_int_equal(read(ready[0], &c, 1), 1);
    *out_hold = hold[1];
  }
  close(ready[0]);
  return pid;
}

static void log_left(void *user, const char *file, const char *why) {
  char line[900];
  snprintf(line, sizeof line, "%s: %s", file, why);
  kt_log_sink(user, 1, line);
}

/* kill -9 between creating the temporary file and writing it: the file is
 * empty, and `--clear` once skipped it as "not a kiln cache file". */
static void test_killed_writer_is_cleaned(void **state) {
  (void)state;
  char *dir = kt_mkdtemp("kcache-killed");
  int hold;
  writer(dir, true, &hold);
  char name[128];
  only_tmp(dir, name);
  char path[700];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  struct stat sb;
  assert_int_equal(stat(path, &sb), 0);
  assert_int_equal(sb.st_size, 0);

  /* A fresh one is not swept (its writer may be between create and lock) ... */
  kt_log log;
  kiln_kcache *kc = kt_kcache_open(dir, &log);
  int fd;
  KT_ASSERT_OK(kiln__kcache_folder_open(kc, &fd));
  kiln_kcache_close(kc);
  assert_int_equal(access(path, F_OK), 0);
  /* ... an old one is, at the next service's first use of the folder. */
  make_old(dir, name);
  kc = kt_kcache_open(dir, &log);
  KT_ASSERT_OK(kiln__kcache_folder_open(kc, &fd));
  assert_int_equal(access(path, F_OK), -1);
  assert_non_null(strstr(log.text, "removed 1 stale temporary file from"));
  kiln_kcache_close(kc);

  /* --clear removes a fresh one at once: no writer holds it. */
  writer(dir, true, &hold);
  only_tmp(dir, name);
  kc = kt_kcache_open(dir, NULL);
  uint32_t removed = 0, left = 0;
  kt_log why = {0};
  KT_ASSERT_OK(kiln_kcache_clear_report(kc, log_left, &why, &removed, &left));
  printf("%s", why.text);
  assert_int_equal(removed, 1);
  assert_int_equal(left, 0);
  assert_int_equal(count_files(dir), 0);
  kiln_kcache_close(kc);
  kt_rm_rf(dir);
  free(dir);
}

/* A live writer's file is never taken, however old it looks. */
static void test_live_writer_is_left_alone(void **state) {
  (void)state;
  char *dir = kt_mkdtemp("kcache-live");
  int hold;
  pid_t pid = writer(dir, false, &hold);
  char name[128];
  only_tmp(dir, name);
  make_old(dir, name);
  char path[700];
  snprintf(path, sizeof path, "%s/%s", dir, name);

  kt_log log;
  kiln_kcache *kc = kt_kcache_open(dir, &log);
  uint32_t removed = 9, left = 0;
  kt_log why = {0};
  KT_ASSERT_OK(kiln_kcache_clear_report(kc, log_left, &why, &removed, &left));
  printf("%s", why.text);
  assert_int_equal(removed, 0);
  assert_int_equal(left, 1);
  char line[300];
  snprintf(line, sizeof line, "%s: a temporary file a running kiln is writing", name);
  assert_non_null(strstr(why.text, line));
  assert_int_equal(access(path, F_OK), 0);
  kiln_kcache_close(kc);

  /* The writer exits without renaming: its old file is stale now, and the
   * next service's first use of the folder sweeps it. */
  close(hold);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  kc = kt_kcache_open(dir, &log);
  KT_ASSERT_OK(kiln_kcache_clear_report(kc, NULL, NULL, &removed, &left));
  assert_int_equal(removed + left, 0);
  assert_non_null(strstr(log.text, "removed 1 stale temporary file from"));
  assert_int_equal(count_files(dir), 0);
  kiln_kcache_close(kc);
  kt_rm_rf(dir);
  free(dir);
}

/* ---- the kill -9 stress ---------------------------------------------------- */

/* Worker w's key j: the first half shared by every worker (renames race
 * on one name), the rest its own. */
static float stress_eps(int w, int j, int n) {
  return j < n / 2 ? 1e-6f * (float)(1 + j) : 1e-5f * (float)(1 + 1000 * w + j);
}

/* Gets every key of worker w through a service on dir; exits 0 when all
 * are there (compiled and written, or already on disk). */
static void stress_worker(const char *dir, int w, int n) {
  kiln_kcache_options o = {.dir = dir, .disk_enabled = true};
  kiln_kcache *kc;
  kiln_nvrtc nv;
  kiln_kcompiler *comp;
  kiln_status st = kiln_kcache_open(&o, &kc);
  if (!st) st = kiln_cuda_templates_register(kt_kcache_host(), kc);
  if (!st) st = kiln_nvrtc_register(&nv, kt_kcache_host(), kc, "sm_90", &comp);
  for (int j = 0; j < n && !st; j++) {
    kiln_kdesc *d;
    st = kiln_kdesc_new(comp, KILN_CUDA_T_RMSNORM_ROW_VEC, &d);
    if (st) break;
    st = kiln_kdesc_set_f32(d, "eps", stress_eps(w, j, n));
    if (!st) st = kiln_kdesc_set_i64(d, "hidden", 896);
    if (!st) st = kiln_kdesc_set_dtype(d, "w_type", KILN_TYPE_F32);
    if (!st) st = kiln_kdesc_set_i64(d, "block_size", 256);
    kiln_kernel *k;
    if (!st) st = kiln_kcache_get(d, &k);
    kiln_kdesc_free(d);
  }
  if (st) {
    fprintf(stderr, "worker %d: %s\n", w, kiln_status_message(st));
    _exit(1);
  }
  kiln_kcache_stats s;
  kiln_kcache_get_stats(kc, &s);
  _exit(s.write_failures ? 2 : 0);
}

static pid_t stress_start(const char *dir, int w, int n) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) stress_worker(dir, w, n);
  return pid;
}

typedef struct stress_check {
  unsigned n, bad;
} stress_check;

static void stress_entry(void *user, const kiln_kcache_entry_info *e) {
  stress_check *c = user;
  c->n++;
  if (e->problem) {
    c->bad++;
    fprintf(stderr, "INVALID %s: %s\n", e->file, e->problem);
  }
}

/* Four processes fill one folder while the parent kills them at random
 * and starts them again; in the end every entry is valid, and `kiln
 * kernels --clear` leaves nothing of kiln's. KILN_KCACHE_STRESS_WRITES sets each worker's
 * key count (default 12; the hardening run used 200). */
static void test_kill9_stress(void **state) {
  (void)state;
  enum { WORKERS = 4 };
  const char *env = getenv("KILN_KCACHE_STRESS_WRITES");
  int n = env && atoi(env) >= 2 ? atoi(env) : 12;
  int max_kills = env ? n : 24;
  char *dir = kt_mkdtemp("kcache-stress");
  pid_t pids[WORKERS];
  bool done[WORKERS] = {false};
  for (int w = 0; w < WORKERS; w++) pids[w] = stress_start(dir, w, n);
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  int kills = 0, finished = 0;
  while (finished < WORKERS) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    struct timespec nap = {0, (long)((rng >> 33) % 40000000)}; /* 0..40 ms */
    nanosleep(&nap, NULL);
    for (int w = 0; w < WORKERS; w++) {
      if (done[w]) continue;
      int status;
      pid_t r = waitpid(pids[w], &status, WNOHANG);
      if (r == pids[w]) {
        if (WIFSIGNALED(status)) fail_msg("worker %d died of signal %d", w, WTERMSIG(status));
        if (WEXITSTATUS(status) != 0) fail_msg("worker %d exited %d", w, WEXITSTATUS(status));
        done[w] = true;
        finished++;
      }
    }
    if (kills >= max_kills || finished == WORKERS) continue;
    int w = (int)((rng >> 20) % WORKERS);
    if (done[w]) continue;
    kill(pids[w], SIGKILL);
    int status;
    assert_int_equal(waitpid(pids[w], &status, 0), pids[w]);
    if (WIFEXITED(status)) { /* it finished just before the signal */
      if (WEXITSTATUS(status) != 0) fail_msg("worker %d exited %d", w, WEXITSTATUS(status));
      done[w] = true;
      finished++;
      continue;
    }
    kills++;
    pids[w] = stress_start(dir, w, n);
  }
  unsigned leftovers = 0;
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d))) leftovers += kiln__kcache_is_tmp_name(e->d_name);
  if (d) closedir(d);

  kt_log log;
  kiln_kcache *kc = kt_kcache_open(dir, &log);
  stress_check c = {0, 0};
  KT_ASSERT_OK(kiln_kcache_list(kc, stress_entry, &c));
  unsigned want = (unsigned)(n / 2 + WORKERS * (n - n / 2));
  printf("stress: %d workers x %d keys, %d kills, %u entries (%u invalid), %u temporary files "
         "left by killed writers\n",
         WORKERS, n, kills, c.n, c.bad, leftovers);
  assert_int_equal(c.bad, 0);
  assert_int_equal(c.n, want);
  kiln_kcache_close(kc);

  /* `kiln kernels --clear`, the command itself */
  fflush(stdout);
  int saved = dup(1);
  FILE *tmp = tmpfile();
  assert_non_null(tmp);
  dup2(fileno(tmp), 1);
  char *argv[] = {"kernels", "--dir", dir, "--clear", NULL};
  int rc = kiln_cmd_kernels(4, argv);
  fflush(stdout);
  dup2(saved, 1);
  close(saved);
  long size = ftell(tmp);
  rewind(tmp);
  char *out = calloc(1, (size_t)size + 1);
  assert_int_equal(fread(out, 1, (size_t)size, tmp), (size_t)size);
  fclose(tmp);
  printf("%s", out);
  assert_int_equal(rc, 0);
  char want_line[700];
  snprintf(want_line, sizeof want_line, "removed %u files from %s\n", want + leftovers, dir);
  assert_string_equal(out, want_line); /* nothing left, nothing else said */
  free(out);
  assert_int_equal(count_files(dir), 0);
  kt_rm_rf(dir);
  free(dir);
}

/* ---- the folder is opened on first use ------------------------------------- */

static kiln_kcompiler *nvrtc(kiln_kcache *kc, kiln_nvrtc *nv) {
  KT_ASSERT_OK(kiln_cuda_templates_register(kt_kcache_host(), kc));
  kiln_kcompiler *c;
  KT_ASSERT_OK(kiln_nvrtc_register(nv, kt_kcache_host(), kc, "sm_90", &c));
  return c;
}

static void get(kiln_kcompiler *c, float eps) {
  kiln_kdesc *d;
  KT_ASSERT_OK(kiln_kdesc_new(c, KILN_CUDA_T_RMSNORM_ROW_VEC, &d));
  KT_ASSERT_OK(kiln_kdesc_set_f32(d, "eps", eps));
  KT_ASSERT_OK(kiln_kdesc_set_i64(d, "hidden", 896));
  KT_ASSERT_OK(kiln_kdesc_set_dtype(d, "w_type", KILN_TYPE_F32));
  KT_ASSERT_OK(kiln_kdesc_set_i64(d, "block_size", 256));
  kiln_kernel *k;
  KT_ASSERT_OK(kiln_kcache_get(d, &k));
  assert_true(k->image_size > 0);
  kiln_kdesc_free(d);
}

static void test_folder_made_on_first_use(void **state) {
  (void)state;
  char *base = kt_mkdtemp("kcache-lazy");
  char dir[600];
  snprintf(dir, sizeof dir, "%s/a/b", base);
  kt_log log;
  kiln_kcache *kc = kt_kcache_open(dir, &log);
  kiln_nvrtc nv;
  kiln_kcompiler *c = nvrtc(kc, &nv); /* templates and a compiler: still no folder */
  assert_null(kiln_kcache_dir(kc));
  assert_int_equal(count_files(base), 0);
  get(c, 1e-6f);
  assert_non_null(kiln_kcache_dir(kc));
  assert_string_equal(kiln_kcache_dir(kc), dir);
  assert_int_equal(count_files(dir), 1);
  kiln_kcache_close(kc);

  /* with no folder configured and no HOME, nothing is needed until a
   * compile, and then the kernel is still served, from memory */
  char *xdg = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
  char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
  unsetenv("XDG_CACHE_HOME");
  unsetenv("HOME");
  memset(&log, 0, sizeof log);
  kiln_kcache_options o = {.disk_enabled = true, .log = kt_log_sink, .log_user = &log};
  KT_ASSERT_OK(kiln_kcache_open(&o, &kc));
  c = nvrtc(kc, &nv);
  get(c, 1e-6f);
  get(c, 1e-5f);
  get(c, 1e-6f);
  if (xdg) setenv("XDG_CACHE_HOME", xdg, 1);
  if (home) setenv("HOME", home, 1);
  free(xdg);
  free(home);
  printf("%s", log.text);
  assert_int_equal(log.lines, 1); /* said once */
  assert_non_null(strstr(log.text, "no usable folder (kernel cache: no folder: neither "
                                   "XDG_CACHE_HOME nor HOME"));
  assert_non_null(strstr(log.text, "compiled kernels stay in memory for this run"));
  kiln_kcache_stats s;
  kiln_kcache_get_stats(kc, &s);
  assert_int_equal(s.compiles, 2);
  assert_int_equal(s.memory_hits, 1);
  assert_int_equal(s.disk_writes + s.write_failures, 0);
  KT_ASSERT_ERR(kiln_kcache_list(kc, NULL, NULL), KILN_STATUS_INVALID_ARGUMENT, NULL);
  KT_ASSERT_ERR(kiln_kcache_clear(kc, NULL), KILN_STATUS_NOT_FOUND, "[kernel_cache] dir");
  kiln_kcache_close(kc);
  kt_rm_rf(base);
  free(base);
}

/* A folder path that is a file: memory tier, one line, list says why. */
static void test_unusable_folder(void **state) {
  (void)state;
  char *base = kt_mkdtemp("kcache-unusable");
  char file[600];
  snprintf(file, sizeof file, "%s/plain", base);
  assert_true(kt_write_file(file, "x", 1));
  kt_log log;
  kiln_kcache *kc = kt_kcache_open(file, &log);
  kiln_nvrtc nv;
  kiln_kcompiler *c = nvrtc(kc, &nv);
  get(c, 1e-6f);
  get(c, 1e-5f);
  printf("%s", log.text);
  assert_int_equal(log.lines, 1);
  assert_non_null(strstr(log.text, file));
  assert_null(kiln_kcache_dir(kc));
  KT_ASSERT_ERR(kiln_kcache_clear(kc, NULL), KILN_STATUS_IO, file);
  kiln_kcache_close(kc);
  kt_rm_rf(base);
  free(base);
}

/* An entry whose image is empty is malformed, not a hit. */
static void test_empty_image_refused(void **state) {
  (void)state;
  char *buf;
  size_t n;
  KT_ASSERT_OK(kiln__kcache_entry_encode("template t\n", KILN_KIMAGE_PTX, "", 0, &buf, &n));
  char *canon;
  void *img;
  size_t isz;
  kiln_kimage_kind kind;
  KT_ASSERT_ERR(kiln__kcache_entry_decode(buf, n, &canon, &kind, &img, &isz),
                KILN_STATUS_MALFORMED, "empty image");
  free(buf);

  /* and on disk: discarded and rebuilt */
  char *dir = kt_mkdtemp("kcache-empty");
  kt_log log;
  kiln_kcache *kc = kt_kcache_open(dir, &log);
  kiln_nvrtc nv;
  kiln_kcompiler *c = nvrtc(kc, &nv);
  get(c, 1e-6f);
  kiln_kcache_close(kc);
  DIR *d = opendir(dir);
  struct dirent *e;
  char path[700] = "";
  while (d && (e = readdir(d)))
    if (kiln__kcache_is_entry_name(e->d_name)) snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
  if (d) closedir(d);
  assert_true(path[0]);
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  rewind(f);
  char *entry = malloc((size_t)size + 1);
  size_t got = fread(entry, 1, (size_t)size, f);
  fclose(f);
  assert_true(got > 0);
  char *decoded;
  KT_ASSERT_OK(kiln__kcache_entry_decode(entry, got, &decoded, &kind, &img, &isz));
  free(entry);
  free(img);
  KT_ASSERT_OK(kiln__kcache_entry_encode(decoded, KILN_KIMAGE_PTX, "", 0, &buf, &n));
  free(decoded);
  assert_true(kt_write_file(path, buf, n));
  free(buf);
  kc = kt_kcache_open(dir, &log);
  c = nvrtc(kc, &nv);
  get(c, 1e-6f);
  kiln_kcache_stats s;
  kiln_kcache_get_stats(kc, &s);
  assert_int_equal(s.disk_hits, 0);
  assert_int_equal(s.discarded, 1);
  assert_int_equal(s.compiles, 1);
  assert_non_null(strstr(log.text, "empty image"));
  kiln_kcache_close(kc);
  kt_rm_rf(dir);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_killed_writer_is_cleaned),
      cmocka_unit_test(test_live_writer_is_left_alone),
      cmocka_unit_test(test_kill9_stress),
      cmocka_unit_test(test_folder_made_on_first_use),
      cmocka_unit_test(test_unusable_folder),
      cmocka_unit_test(test_empty_image_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
