/* libFuzzer target for the kernel cache's entry reader (kcache_disk.c): any
 * bytes are refused with a reason, or decode into a canonical text and a
 * non-empty image that encode back into exactly the same bytes (the format
 * has one spelling of each entry, and a NUL inside the canonical text would
 * not survive). The file-name
 * predicates that decide what --clear may remove get the bytes too. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kcache/kcache_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *canonical = NULL;
  void *image = NULL;
  size_t image_size = 0;
  kiln_kimage_kind kind;
  kiln_status st =
      kiln__kcache_entry_decode((const char *)data, size, &canonical, &kind, &image, &image_size);
  if (st) {
    if (!kiln_status_message(st)[0]) abort();
    kiln_status_free(st);
  } else {
    if (!image_size) abort(); /* an empty image is malformed */
    char *again;
    size_t again_size;
    if (kiln__kcache_entry_encode(canonical, kind, image, image_size, &again, &again_size)) abort();
    if (again_size != size || memcmp(again, data, size) != 0) abort();
    free(again);
    free(canonical);
    free(image);
  }
  /* names: an entry's name and a temporary file's never both */
  char name[128];
  size_t n = size < sizeof name - 1 ? size : sizeof name - 1;
  memcpy(name, data, n);
  name[n] = '\0';
  if (kiln__kcache_is_entry_name(name) && kiln__kcache_is_tmp_name(name)) abort();
  return 0;
}
