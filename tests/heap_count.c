/* The counting allocator (tests/heap_count.h): GNU ld's --wrap turns each
 * call to malloc & co. in the program's own objects into a call to
 * __wrap_malloc & co. here, which call the real function and count. */
#include "config.h"

#include <malloc.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "heap_count.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);

static int64_t live, mark, peak;
static uint64_t calls, calls_at_mark;

static void add(void *p) {
  __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
  if (!p) return;
  int64_t now = __atomic_add_fetch(&live, (int64_t)malloc_usable_size(p), __ATOMIC_RELAXED);
  int64_t old = __atomic_load_n(&peak, __ATOMIC_RELAXED);
  while (now > old &&
         !__atomic_compare_exchange_n(&peak, &old, now, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}

static void sub(void *p) {
  if (p) __atomic_sub_fetch(&live, (int64_t)malloc_usable_size(p), __ATOMIC_RELAXED);
}

void *__wrap_malloc(size_t n) {
  void *p = __real_malloc(n);
  add(p);
  return p;
}

void *__wrap_calloc(size_t n, size_t size) {
  void *p = __real_calloc(n, size);
  add(p);
  return p;
}

void *__wrap_realloc(void *p, size_t n) {
  size_t old = p ? malloc_usable_size(p) : 0;
  void *q = __real_realloc(p, n);
  if (!q && n) return NULL; /* p is untouched */
  __atomic_sub_fetch(&live, (int64_t)old, __ATOMIC_RELAXED);
  add(q);
  return q;
}

void __wrap_free(void *p) {
  sub(p);
  __real_free(p);
}

char *__wrap_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = __wrap_malloc(n);
  if (p) memcpy(p, s, n);
  return p;
}

char *__wrap_strndup(const char *s, size_t n) {
  size_t len = strnlen(s, n);
  char *p = __wrap_malloc(len + 1);
  if (p) {
    memcpy(p, s, len);
    p[len] = '\0';
  }
  return p;
}

void heap_count_mark(void) {
  int64_t now = __atomic_load_n(&live, __ATOMIC_RELAXED);
  __atomic_store_n(&mark, now, __ATOMIC_RELAXED);
  __atomic_store_n(&peak, now, __ATOMIC_RELAXED);
  __atomic_store_n(&calls_at_mark, __atomic_load_n(&calls, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
}

uint64_t heap_count_calls_since_mark(void) {
  return __atomic_load_n(&calls, __ATOMIC_RELAXED) - __atomic_load_n(&calls_at_mark, __ATOMIC_RELAXED);
}

uint64_t heap_count_peak_since_mark(void) {
  int64_t d = __atomic_load_n(&peak, __ATOMIC_RELAXED) - __atomic_load_n(&mark, __ATOMIC_RELAXED);
  return d > 0 ? (uint64_t)d : 0;
}

int64_t heap_count_live(void) { return __atomic_load_n(&live, __ATOMIC_RELAXED); }
