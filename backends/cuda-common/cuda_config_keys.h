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
   .default_value = "bf16x3",                                                 \
   .choices = "f32|tf32|bf16|bf16x3|tf32x3|q16mma|fp8",                       \
   .help = "prefill GEMM arithmetic, all with f32 sums: bf16x3 keeps each "   \
           "operand as two bf16 terms (three products a pair, about 5e-6 "    \
           "relative) on tensor cores; tf32x3 the same in TF32 terms (about " \
           "2^-21, f32's grade, at half bf16x3's tensor rate; not yet "       \
           "measured on a device); f32 is IEEE f32 on CUDA cores (3.2x "      \
           "slower); tf32 and bf16 round the operands for tensor cores "      \
           "(LOWER accuracy: about 4e-4 and 2e-3 relative a GEMM; both fail " \
           "kiln parity's default thresholds on a 7B); q16mma reads block "   \
           "weights (Q4_0|Q5_0|Q8_0|Q4_K|Q5_K|Q6_K) directly on int8 tensor " \
           "cores with the activations at q16, the decode matvecs' "          \
           "accuracy (other weights take bf16x3; half bf16x3's speed on an "  \
           "H100); fp8 takes e4m3 weights and activations with a scale a " \
           "row and a token through cuBLASLt (compute capability 9.0, else "   \
           "bf16x3, f32 below 8.0 as every tensor-core mode; LOWEST "       \
           "accuracy: about 3e-2 relative a GEMM)"}

#define KILN_CUDA_KEY_MMQ_SHAPE                                               \
  {.name = "mmq_shape",                                                       \
   .type = KILN_CONFIG_STRING,                                                \
   .default_value = "auto",                                                   \
   .help = "gemm = q16mma's block tile, TILE_M,TILE_N,WARPS[,PREFETCH] "     \
           "(weight rows, tokens, warps: tile_m a multiple of 16, tile_n of " \
           "8, the warps dividing the 16x8 fragments, at most 48 KiB of "    \
           "shared memory; prefetch 1 reads the next step into registers "   \
           "during this one's MMAs), for tuning; auto = 128,64,4,0; the same "\
           "sums whichever shape"}

#define KILN_CUDA_KEY_GEMM_SCRATCH                                            \
  {.name = "gemm_scratch_mib",                                                \
   .type = KILN_CONFIG_INT,                                                   \
   .default_value = "256",                                                    \
   .min = 1,                                                                  \
   .max = 65536,                                                              \
   .help = "largest tile (MiB) a weight is dequantized into for the "        \
           "prefill GEMMs (4 bytes a value, bf16 2, bf16x3 6, fp8 1); larger " \
           "weights go in several tiles"}

#define KILN_CUDA_KEY_ACTIVATIONS                                             \
  {.name = "activations",                                                     \
   .type = KILN_CONFIG_ENUM,                                                  \
   .default_value = "q16",                                                    \
   .choices = "f32|q16|q8",                                                   \
   .help = "how a decode matvec meets a block-quantized weight (Q4_0, Q5_0, " \
           "Q8_0, Q4_K, Q5_K, Q6_K): f32 = exact, weights dequantized to "    \
           "f32 and multiplied by f32 activations; q16 = activations "        \
           "rounded per 32 "                                                  \
           "values to 16-bit integers (about 1.5e-5 relative) for int8 dot "  \
           "products, much faster, within parity's default thresholds "      \
           "against cpu:f64; q8 = 8-bit "                                     \
           "activations as llama.cpp's q8_1 (about 4e-3 relative: LOWER "     \
           "accuracy, fails the default parity thresholds)"}

/* recurrent_guard, with the batched plugins' help (their prefill GEMMs
 * too) or cuda-serial's (no GEMM: one token at a time, matvecs only). */
#define KILN_CUDA_KEY_RECURRENT_GUARD_HELP(help_text)                         \
  {.name = "recurrent_guard",                                                 \
   .type = KILN_CONFIG_ENUM,                                                  \
   .default_value = "f32",                                                    \
   .choices = "f32|off",                                                      \
   .help = help_text}
#define KILN_CUDA_KEY_RECURRENT_GUARD                                         \
  KILN_CUDA_KEY_RECURRENT_GUARD_HELP(                                         \
      "matvecs and prefill GEMMs whose output a recurrent state reads "      \
      "(every one before a model's last Gated DeltaNet: qwen35), where "     \
      "quantized activations' or bf16x3's rounding reaches the delta rule "  \
      "and comes out amplified past parity's 1e-3: f32 = the exact f32 "     \
      "matvec and GEMM for them, off = they follow activations and gemm "    \
      "like the rest; no effect on models without recurrent layers")
#define KILN_CUDA_KEY_RECURRENT_GUARD_SERIAL                                  \
  KILN_CUDA_KEY_RECURRENT_GUARD_HELP(                                         \
      "matvecs whose output a recurrent state reads (every one before a "    \
      "model's last Gated DeltaNet: qwen35), where quantized activations' "  \
      "rounding reaches the delta rule and comes out amplified past "        \
      "parity's 1e-3: f32 = the exact f32 matvec for them, off = they "      \
      "follow activations like the rest; no effect on models without "       \
      "recurrent layers")

#define KILN_CUDA_KEY_FUSE                                                    \
  {.name = "fuse",                                                            \
   .type = KILN_CONFIG_BOOL,                                                  \
   .default_value = "true",                                                   \
   .help = "run neighbouring nodes as one kernel where one exists (residual " \
           "add + RMSNorm, RMSNorm or SwiGLU + quantizing the next matvec's " \
           "input, Q/K/V and gate/up matvecs sharing an input, the RoPE of "  \
           "Q and K with both KV-cache stores); false runs every node alone " \
           "(for comparing the two)"}

#define KILN_CUDA_KEY_GRAPH                                                   \
  {.name = "graph",                                                           \
   .type = KILN_CONFIG_BOOL,                                                  \
   .default_value = "true",                                                   \
   .help = "capture a decode step (one token) as a CUDA graph the second "    \
           "time it comes and replay it for every later one, positions read " \
           "from device memory; false launches every kernel every step (the " \
           "profile's per-node table needs it: a replay is timed whole)"}

#define KILN_CUDA_KEY_PDL                                                     \
  {.name = "pdl",                                                             \
   .type = KILN_CONFIG_BOOL,                                                  \
   .default_value = "true",                                                   \
   .help = "programmatic dependent launch on compute capability 9.0 and up: " \
           "each kernel is scheduled while the one before it finishes and "   \
           "waits for it before it reads or writes anything (the same "       \
           "results, shorter gaps between kernels); false launches each "     \
           "kernel after the previous one has ended (for comparing the two)"}

#define KILN_CUDA_KEY_MATVEC_LOAD                                             \
  {.name = "matvec_load",                                                     \
   .type = KILN_CONFIG_ENUM,                                                  \
   .default_value = "auto",                                                   \
   .choices = "auto|direct|staged|bulk",                                      \
   .help = "how a quantized-activation matvec reads its weights: direct "     \
           "(each lane its blocks' bytes), staged (16-byte loads through "    \
           "shared memory), bulk (persistent blocks whose rows arrive by "    \
           "bulk copies into shared-memory stages; compute capability 9.0), " \
           "auto (bulk where the H200 measured it faster, on compute "        \
           "capability 9.x devices; else staged where a block type is only "  \
           "2-byte aligned: Q4_0, Q5_0, Q8_0, Q6_K); the same sums whichever "\
           "way for one shape"}

#define KILN_CUDA_KEY_MATVEC_SHAPE                                            \
  {.name = "matvec_shape",                                                    \
   .type = KILN_CONFIG_STRING,                                                \
   .default_value = "auto",                                                   \
   .help = "the quantized-activation matvec's launch shape, WARPS,K_SPLIT,"   \
           "ROWS[,GROUPS[,STAGES]] (warps per block, warps sharing a row, "   \
           "rows per group, sets of groups per block, bulk-copy stages: 0 "   \
           "or 2..16 with groups 1), for tuning; auto picks one by the "      \
           "weights' types and shapes"}

#define KILN_CUDA_KEY_ATTENTION_SPLITS                                        \
  {.name = "attention_splits",                                                \
   .type = KILN_CONFIG_INT,                                                   \
   .default_value = "0",                                                      \
   .min = 0,                                                                  \
   .max = 256,                                                                \
   .help = "splits of the keys in decode attention (split-KV: one block per " \
           "split and KV head, then the merge, as attention_merge says), "    \
           "for tuning; 0 = "                                                 \
           "auto: about two blocks per SM, and no more splits than the KV "   \
           "cache's length can give a tile of 32 keys each"}

#define KILN_CUDA_KEY_ATTENTION_MERGE                                         \
  {.name = "attention_merge",                                                 \
   .type = KILN_CONFIG_ENUM,                                                  \
   .default_value = "kernel",                                                 \
   .choices = "kernel|fused",                                                 \
   .help = "how decode attention merges its splits: kernel = a merge "        \
           "kernel of one block per query head; fused = the last block of "   \
           "each KV head merges its GQA group's records in the split kernel " \
           "(one launch a layer fewer) where head_dim is a multiple of 32 "   \
           "and the group has at most 256 records, else the merge kernel. "   \
           "fused measured 5 % slower at tg128 (H100, 2026-12-07)"}

#define KILN_CUDA_KEY_DECODE_ATTENTION                                        \
  {.name = "decode_attention",                                                \
   .type = KILN_CONFIG_ENUM,                                                  \
   .default_value = "mma",                                                    \
   .choices = "split|mma",                                                    \
   .help = "the split decode attention's first half: mma = tensor cores "     \
           "(attention_mma, mma.sync) where the KV cache is f16 or bf16, "    \
           "head_dim a multiple of 16 up to 128 and at most 16 query heads "  \
           "share a KV head (merged by attention_merge), else CUDA cores; "   \
           "split = CUDA cores (attention_split) always"}

#define KILN_CUDA_KEY_PREFILL_ATTENTION                                       \
  {.name = "prefill_attention",                                               \
   .type = KILN_CONFIG_ENUM,                                                  \
   .default_value = "flash",                                                  \
   .choices = "flash|rows",                                                   \
   .help = "attention of a prefill step (several tokens): flash = tiled "     \
           "flash attention, each K/V tile read once for a block of query "   \
           "rows of one GQA group; rows = one block per (head, token), "      \
           "walking the whole cache for each; both f32, for comparison. A "   \
           "node flash cannot hold takes rows either way"}

#define KILN_CUDA_KEY_ALLOW_LOWER_CC                                          \
  {.name = "allow_lower_cc",                                                  \
   .type = KILN_CONFIG_BOOL,                                                  \
   .default_value = "false",                                                  \
   .help = "open on a device below compute capability 12.0 (e.g. an H200), "  \
           "compiling the 12.x kernel variants for that device's own sm_XY; " \
           "for testing"}

#define KILN_CUDA_KEY_DEVICES                                                 \
  {.name = "devices",                                                         \
   .type = KILN_CONFIG_STRING,                                                \
   .default_value = "",                                                       \
   .help = "tensor parallelism: the CUDA devices of the shards, one per "     \
           "shard (e.g. 0,1); empty = `device` for tensor_parallel = 1"}

#define KILN_CUDA_KEY_TENSOR_PARALLEL                                         \
  {.name = "tensor_parallel",                                                 \
   .type = KILN_CONFIG_INT,                                                   \
   .default_value = "1",                                                      \
   .min = 1,                                                                  \
   .max = 8,                                                                  \
   .help = "shards a model is split into across devices through NCCL "       \
           "(Megatron-style; kiln/tp.h); > 1 is refused at open until the "   \
           "multi-GPU path exists, naming what is missing first (libnccl.so.2, " \
           "devices)"}

/* cuda-serial's keys, in one place: its plugin and the test-only
 * kiln-cuda-stale (tests/plugins, cuda-serial with a stale graph replay)
 * declare the same list, so a key cuda-common reads is never undeclared in
 * one of them (that is an internal error at every open). */
#define KILN_CUDA_SERIAL_KEYS                                                          \
  KILN_CUDA_KEY_DEVICE, KILN_CUDA_KEY_POISON, KILN_CUDA_KEY_PROFILE,                   \
      KILN_CUDA_KEY_ACTIVATIONS, KILN_CUDA_KEY_RECURRENT_GUARD_SERIAL,                 \
      KILN_CUDA_KEY_MATVEC_LOAD, KILN_CUDA_KEY_MATVEC_SHAPE, KILN_CUDA_KEY_ATTENTION_SPLITS, \
      KILN_CUDA_KEY_ATTENTION_MERGE, KILN_CUDA_KEY_DECODE_ATTENTION, KILN_CUDA_KEY_FUSE,  \
      KILN_CUDA_KEY_GRAPH, KILN_CUDA_KEY_PDL, KILN_CUDA_KEY_DEVICES,                    \
      KILN_CUDA_KEY_TENSOR_PARALLEL

#endif
