/*
 * kiln/gguf_write.h — builds GGUF files: metadata of every value type and
 * tensors, written atomically to a path or into memory.
 *
 * Writes the layout of the GGUF specification (ggml-org/ggml docs/gguf.md),
 * version 3 by default (2 on request: the layout is the same), little-endian:
 * header, key/values in the order first set, tensor infos in the order
 * added, padding to the alignment, then each tensor's data padded to the
 * alignment (tensor offsets are consecutive multiples of it, as ggml's
 * writer lays them out). A file with no tensors ends after its tensor infos.
 * Everything this writer accepts, kiln_gguf_open() reads back; what the
 * reader would refuse is refused here first, with KILN_STATUS_INVALID_ARGUMENT
 * naming the key or tensor.
 *
 * Ownership: the writer copies every key, string, array and tensor byte it
 * is given, so callers' buffers may be freed as soon as a call returns.
 * kiln_gguf_writer_write_memory() hands back a malloc'd buffer the caller
 * frees with free().
 *
 * Use (two tiny models that differ only in ε):
 *   kiln_gguf_writer *w;
 *   kiln_gguf_writer_new(&w);
 *   kiln_gguf_writer_set_str(w, "general.architecture", "llama");
 *   kiln_gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
 *   kiln_gguf_writer_add_tensor_f32(w, "token_embd.weight", KILN_TYPE_Q8_0, 2, ne, values);
 *   kiln_gguf_writer_write_file(w, "a.gguf");
 *   kiln_gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-6f); // replaces
 *   kiln_gguf_writer_write_file(w, "b.gguf");
 *   kiln_gguf_writer_free(w);
 */
#ifndef KILN_GGUF_WRITE_H
#define KILN_GGUF_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/gguf.h"
#include "kiln/status.h"
#include "kiln/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_gguf_writer kiln_gguf_writer;

/* An empty writer: version 3, alignment 32, no keys, no tensors.
 * KILN_STATUS_NO_MEMORY if it cannot be allocated. */
kiln_status kiln_gguf_writer_new(kiln_gguf_writer **out_writer);

/* Releases w and everything it copied; NULL is fine. */
void kiln_gguf_writer_free(kiln_gguf_writer *w);

/* The header's version: 2 or 3 (KILN_STATUS_INVALID_ARGUMENT otherwise). */
kiln_status kiln_gguf_writer_set_version(kiln_gguf_writer *w, uint32_t version);

/* Sets general.alignment (a uint32 key, as gguf.md defines it): a non-zero
 * multiple of 8, else KILN_STATUS_INVALID_ARGUMENT. Setting the key with
 * kiln_gguf_writer_set_u32() does the same; any other type for that key is
 * refused. Without it the file has no such key and readers assume 32. */
kiln_status kiln_gguf_writer_set_alignment(kiln_gguf_writer *w, uint32_t alignment);

/* Scalar and string keys. Setting a key that is already set replaces its
 * type and value in place (it keeps its position in the file). Keys must be
 * 1 to 65535 bytes (gguf.md); KILN_STATUS_INVALID_ARGUMENT otherwise.
 * set_strn takes a string of `len` bytes that need not be NUL-terminated
 * (and may contain NULs). */
kiln_status kiln_gguf_writer_set_u8(kiln_gguf_writer *w, const char *key, uint8_t v);
kiln_status kiln_gguf_writer_set_i8(kiln_gguf_writer *w, const char *key, int8_t v);
kiln_status kiln_gguf_writer_set_u16(kiln_gguf_writer *w, const char *key, uint16_t v);
kiln_status kiln_gguf_writer_set_i16(kiln_gguf_writer *w, const char *key, int16_t v);
kiln_status kiln_gguf_writer_set_u32(kiln_gguf_writer *w, const char *key, uint32_t v);
kiln_status kiln_gguf_writer_set_i32(kiln_gguf_writer *w, const char *key, int32_t v);
kiln_status kiln_gguf_writer_set_u64(kiln_gguf_writer *w, const char *key, uint64_t v);
kiln_status kiln_gguf_writer_set_i64(kiln_gguf_writer *w, const char *key, int64_t v);
/* The exact f32 bit pattern is written (ε round-trips bit-exactly). */
kiln_status kiln_gguf_writer_set_f32(kiln_gguf_writer *w, const char *key, float v);
kiln_status kiln_gguf_writer_set_f64(kiln_gguf_writer *w, const char *key, double v);
kiln_status kiln_gguf_writer_set_bool(kiln_gguf_writer *w, const char *key, bool v);
kiln_status kiln_gguf_writer_set_str(kiln_gguf_writer *w, const char *key, const char *s);
kiln_status kiln_gguf_writer_set_strn(kiln_gguf_writer *w, const char *key, const char *s,
                                      size_t len);

/* An array of n scalars of elem_type (any type but STRING and ARRAY),
 * `values` holding them as the matching C type: uint8_t, int8_t, uint16_t,
 * int16_t, uint32_t, int32_t, float, bool, uint64_t, int64_t, double. Other
 * element types are KILN_STATUS_INVALID_ARGUMENT (ggml reads no nested
 * arrays). Replaces an existing key as above. n may be 0. */
kiln_status kiln_gguf_writer_set_arr(kiln_gguf_writer *w, const char *key,
                                     kiln_gguf_vtype elem_type, const void *values, uint64_t n);
kiln_status kiln_gguf_writer_set_arr_u32(kiln_gguf_writer *w, const char *key,
                                         const uint32_t *values, uint64_t n);
kiln_status kiln_gguf_writer_set_arr_i32(kiln_gguf_writer *w, const char *key,
                                         const int32_t *values, uint64_t n);
kiln_status kiln_gguf_writer_set_arr_f32(kiln_gguf_writer *w, const char *key, const float *values,
                                         uint64_t n);
/* An array of n strings: NUL-terminated ones, or (strv) ones with lengths. */
kiln_status kiln_gguf_writer_set_arr_str(kiln_gguf_writer *w, const char *key,
                                         const char *const *strs, uint64_t n);
kiln_status kiln_gguf_writer_set_arr_strv(kiln_gguf_writer *w, const char *key,
                                          const kiln_gguf_str *strs, uint64_t n);

/* Removes a key; KILN_STATUS_NOT_FOUND naming it if it is not set. Removing
 * general.alignment returns the layout to the default 32. */
kiln_status kiln_gguf_writer_remove(kiln_gguf_writer *w, const char *key);

/* True when `key` is set. */
bool kiln_gguf_writer_has(const kiln_gguf_writer *w, const char *key);

/* Copies one key/value of an open file (any type, arrays of strings
 * included), replacing a key of the same name. */
kiln_status kiln_gguf_writer_copy_kv(kiln_gguf_writer *w, const kiln_gguf *g,
                                     const kiln_gguf_kv *kv);

/* Copies every key/value of g whose key starts with `prefix` ("" for all),
 * in g's order; e.g. "tokenizer.ggml." takes a vocabulary from another
 * model (`kiln synth --vocab-from`). *out_copied (may be NULL) gets the
 * count; copying none is not an error. */
kiln_status kiln_gguf_writer_copy_kvs(kiln_gguf_writer *w, const kiln_gguf *g, const char *prefix,
                                      uint64_t *out_copied);

/* Adds a tensor from bytes already in `type`'s layout: shape ne[0..n_dims)
 * (ne0 first; 1 to 4 dims, each >= 1, ne0 a whole number of blocks), and
 * nbytes, which must equal the size that shape implies (rows of
 * kiln_type_row_bytes(type, ne0)). Names are 1 to 63 bytes (ggml's
 * GGML_MAX_NAME with its NUL) and unique. Errors: KILN_STATUS_INVALID_ARGUMENT
 * naming the tensor and what is wrong. */
kiln_status kiln_gguf_writer_add_tensor_raw(kiln_gguf_writer *w, const char *name, kiln_type type,
                                            int n_dims, const int64_t *ne, const void *data,
                                            uint64_t nbytes);

/* Adds a tensor from ne0*ne1*ne2*ne3 f32 values (ne0 fastest), converted to
 * `type` with kiln_quantize() (F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_K,
 * Q5_K, Q6_K). Same rules and errors as add_tensor_raw, plus kiln_quantize's
 * (non-finite values cannot be quantized to block types). */
kiln_status kiln_gguf_writer_add_tensor_f32(kiln_gguf_writer *w, const char *name, kiln_type type,
                                            int n_dims, const int64_t *ne, const float *values);

/* The whole file in one malloc'd buffer (free() it). */
kiln_status kiln_gguf_writer_write_memory(const kiln_gguf_writer *w, void **out_data,
                                          size_t *out_size);

/* Writes the file atomically: into a temporary file in the same folder,
 * fsync'd, then renamed over `path` (and the folder fsync'd), so a failed
 * write never leaves a partial file nor clobbers an existing one. On Linux
 * the temporary file is unnamed (O_TMPFILE) until it is complete, so a
 * process killed mid-write leaves nothing behind; elsewhere, or on a file
 * system without O_TMPFILE, it is a named "<path>.tmp-XXXXXX". The file
 * gets mode 0644.
 * Only a regular file is ever replaced: KILN_STATUS_INVALID_ARGUMENT naming
 * the path and what is there when it is a symbolic link (never followed,
 * never replaced), a directory, a device, a FIFO or a socket, or a regular
 * file that is read-only (not writable by the caller, or no write bit at
 * all); nothing is written then. KILN_STATUS_IO naming the path, the step
 * and errno's message on any other failure. */
kiln_status kiln_gguf_writer_write_file(const kiln_gguf_writer *w, const char *path);

#ifdef __cplusplus
}
#endif
#endif /* KILN_GGUF_WRITE_H */
