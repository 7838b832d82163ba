/* A counting allocator for tests that measure heap use. A program linked
 * with heap_count_ldflags (tests/local.mk: -Wl,--wrap= for malloc, calloc,
 * realloc, free, strdup and strndup) sends every such call made by code
 * compiled into it through tests/heap_count.c, which keeps the bytes live
 * (malloc_usable_size of each block) and the peak. Code in shared
 * libraries (libkiln.so, glibc's own internals) is not counted: link the
 * code under test into the program. */
#ifndef KILN_TESTS_HEAP_COUNT_H
#define KILN_TESTS_HEAP_COUNT_H

#include <stdint.h>

/* Starts a measurement: the peak is reset to the bytes live now. */
void heap_count_mark(void);

/* The most bytes live at once since heap_count_mark(), minus those live at
 * the mark: what the code run since then cost at its worst. */
uint64_t heap_count_peak_since_mark(void);

/* How many malloc, calloc, realloc, strdup and strndup calls there have
 * been since heap_count_mark(): a measure of the work done, free of the
 * clock. */
uint64_t heap_count_calls_since_mark(void);

/* Bytes live now (blocks allocated through the wrappers and not freed). */
int64_t heap_count_live(void);

#endif
