/* GGUF value types: their names and their sizes in bytes (the GGUF spec,
 * "gguf_metadata_value_type"). Below both the reader and the getters. */
#include "config.h"

#include <stddef.h>

#include "gguf_internal.h"

const char *kiln_gguf_vtype_name(kiln_gguf_vtype t) {
  switch (t) {
  case KILN_GGUF_UINT8: return "uint8";
  case KILN_GGUF_INT8: return "int8";
  case KILN_GGUF_UINT16: return "uint16";
  case KILN_GGUF_INT16: return "int16";
  case KILN_GGUF_UINT32: return "uint32";
  case KILN_GGUF_INT32: return "int32";
  case KILN_GGUF_FLOAT32: return "float32";
  case KILN_GGUF_BOOL: return "bool";
  case KILN_GGUF_STRING: return "string";
  case KILN_GGUF_ARRAY: return "array";
  case KILN_GGUF_UINT64: return "uint64";
  case KILN_GGUF_INT64: return "int64";
  case KILN_GGUF_FLOAT64: return "float64";
  default: return "?";
  }
}

size_t kiln_gguf_vtype_size(kiln_gguf_vtype t) {
  switch (t) {
  case KILN_GGUF_UINT8:
  case KILN_GGUF_INT8:
  case KILN_GGUF_BOOL: return 1;
  case KILN_GGUF_UINT16:
  case KILN_GGUF_INT16: return 2;
  case KILN_GGUF_UINT32:
  case KILN_GGUF_INT32:
  case KILN_GGUF_FLOAT32: return 4;
  case KILN_GGUF_UINT64:
  case KILN_GGUF_INT64:
  case KILN_GGUF_FLOAT64: return 8;
  default: return 0;
  }
}
