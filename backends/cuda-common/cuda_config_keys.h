/* Config keys the CUDA plugins share; each plugin's entry table lists the
 * ones it declares (kiln/config_schema.h). */
#ifndef KILN_CUDA_CONFIG_KEYS_H
#define KILN_CUDA_CONFIG_KEYS_H

#include "kiln/config_schema.h"

#define KILN_CUDA_KEY_DEVICE                                                  \
  {.name = "device",                                                          \
   .type = KILN_CONFIG_INT,                                                   \
   .default_value = "0",                                                      \
   .min = 0,                                                                  \
   .max = 1024,                                                               \
   .help = "CUDA device index, as the driver numbers them (cuDeviceGet)"}

#define KILN_CUDA_KEY_POISON                                                  \
  {.name = "poison",                                                          \
   .type = KILN_CONFIG_INT,                                                   \
   .default_value = "-1",                                                     \
   .min = -1,                                                                 \
   .max = 255,                                                                \
   .help = "testing: fill every new device buffer and scratch tile with "    \
           "this byte before use; -1 = off"}

#define KILN_CUDA_KEY_PROFILE                                                 \
  {.name = "profile",                                                         \
   .type = KILN_CONFIG_BOOL,                                                  \
   .default_value = "false",                                                  \
   .help = "time every node's launches with CUDA events and log a summary "   \
           "per kind of node (runs, GPU ms, share, GB/s of weight reads) "    \
           "when the backend closes, at log_level = info; adds two event "    \
           "records per node, so the step itself runs a little slower"}

#define KILN_CUDA_KEY_GEMM                                                    \
  {.name = "gemm",                                                            \
   .type = KILN_CONFIG_ENUM,                                                  \
   .default_value = "f32",                                                    \
   .choices = "f32|tf32|bf16",                                                \
   .help = "prefill GEMM arithmetic (cuBLAS compute type): f32 is IEEE f32 "  \
           "and meets parity; tf32 and bf16 use tensor cores and LOWER "      \
           "accuracy (about 1e-3 and 1e-2 relative)"}

#define KILN_CUDA_KEY_GEMM_SCRATCH                                            \
  {.name = "gemm_scratch_mib",                                                \
   .type = KILN_CONFIG_INT,                                                   \
   .default_value = "256",                                                    \
   .min = 1,                                                                  \
   .max = 65536,                                                              \
   .help = "largest f32 tile (MiB) a quantized weight is dequantized into "   \
           "for the prefill GEMMs; larger weights go in several tiles"}

#define KILN_CUDA_KEY_ALLOW_LOWER_CC                                          \
  {.name = "allow_lower_cc",                                                  \
   .type = KILN_CONFIG_BOOL,                                                  \
   .default_value = "false",                                                  \
   .help = "open on a device below compute capability 12.0 (e.g. an H200), "  \
           "compiling the 12.x kernel variants for that device's own sm_XY; " \
           "for testing"}

#endif
