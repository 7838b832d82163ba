/* The part of the CUDA backend plugins they share: everything behind the
 * ops table (kiln/plugin.h). Each plugin (backends/cuda-serial,
 * cuda-batched, cuda-cc120) is one KILN_CUDA_PLUGIN_ENTRY (below): its
 * name, its config keys and a kiln_cuda_flavor saying how it differs:
 *
 *   cuda-serial   prefill runs the decode path one token at a time;
 *                 RMSNorm is rmsnorm_row_vec (float4 rows).
 *   cuda-batched  prefill runs each node once over all the step's tokens:
 *                 rmsnorm_rows over every row, MUL_MAT as cuBLAS GEMMs on
 *                 f32 tiles, batched RoPE, causal attention as flash
 *                 attention ([<plugin>] prefill_attention); decode
 *                 (a step of one token) as cuda-serial.
 *   cuda-cc120    for compute capability 12.x: rmsnorm_row_cc12 and the
 *                 12.x launch shapes (fewer warps per matvec block and per
 *                 attention block), prefill as cuda-batched.
 *
 * Context: the device's primary context (cuDevicePrimaryCtxRetain), made
 * current at every entry, and one stream per backend instance; cuBLAS runs
 * in the same context and on the same stream. Kernels come only from the
 * kernel-cache service: prepare(node) builds each descriptor from the
 * node, kcache_get compiles (NVRTC, the device's exact sm_XY) or finds the
 * PTX, the module is loaded once per kernel into the kernel's slot, and
 * the node's state keeps the CUfunction, so run() only launches.
 *
 * Decode (a step of one token, every flavor): MUL_MAT of a block weight as
 * matvec_q on quantized activations ([<plugin>] activations), neighbouring
 * nodes fused where a kernel for them exists (cuda_fuse.c), ATTENTION as
 * split-KV attention (attention_split + attention_merge, [<plugin>]
 * attention_splits), positions from the per-step block (cuda_step.h), and
 * the step captured as a CUDA graph and replayed (cuda_graph.c).
 *
 * Errors: every driver and cuBLAS call is checked; a failure becomes a
 * status with the call, the CUDA (or cuBLAS) error name and text, and the
 * node. Nothing aborts. */
#ifndef KILN_CUDA_BACKEND_H
#define KILN_CUDA_BACKEND_H

#include <cublas_v2.h>

#include "cuda_driver.h"
#include "nccl_loader.h"
#include "kiln/plugin.h"
#include "cuda_step.h"
#include "nvrtc_compile.h"
#include "op_describe.h"
#include "rmsnorm_describe.h"

typedef enum kiln_cuda_prefill {
  KILN_CUDA_PREFILL_SERIAL = 0, /* a step of T tokens: T decode passes */
  KILN_CUDA_PREFILL_BATCHED = 1 /* one pass over all T tokens (GEMMs) */
} kiln_cuda_prefill;

/* How one CUDA plugin differs from the others. */
typedef struct kiln_cuda_flavor {
  const char *name; /* "cuda-serial": the plugin, its config section */
  kiln_cuda_prefill prefill;
  kiln_cuda_rmsnorm_variant norm_decode;  /* steps of one token */
  kiln_cuda_rmsnorm_variant norm_prefill; /* batched steps of several tokens */
  uint32_t matvec_warps;                  /* warps per matvec block */
  uint32_t matvec_rows_per_group;         /* weight rows per group of warps (matvec.cu.tmpl) */
  uint32_t attention_warps;               /* warps per (head, token) block, batched steps */
  uint32_t attention_warps_decode;        /* the same for steps of one token, whose n_head
                                             blocks alone must keep the device busy (a node
                                             the split kernel cannot take) */
  uint32_t attention_warps_split;         /* warps per block of the split-KV decode attention
                                             (attention_split, attention_merge) */
  kiln_cuda_flash_shape flash;            /* the flash prefill attention's tiles
                                             (flash_attention): bq query rows and bk cache
                                             positions a block, its warps; bq 0: no flash
                                             prefill (cuda-serial). Sized so a block's
                                             shared memory at head_dim 256 fits the
                                             flavor's devices (flash_shape.h) */
  int cc_major; /* 0: any device; 12: compute capability 12.x only (cuda-cc120) */
  /* Config keys the plugin declares beyond device and poison. */
  bool has_gemm_keys;      /* gemm, gemm_scratch_mib */
  bool has_allow_lower_cc; /* allow_lower_cc */
} kiln_cuda_flavor;

/* The plugin object (init .. fini): the host table and the driver. */
typedef struct kiln_cuda_plugin {
  const kiln_host_api *host;
  const kiln_cuda_flavor *fl;
  kiln_cu cu;
  bool cu_ok;
  char cu_why[256]; /* why the driver did not load */
  /* NCCL, loaded on first need (cuda_parallel.c) */
  bool nccl_tried, nccl_ok;
  kiln_nccl nccl;
  char nccl_why[256];
} kiln_cuda_plugin;

/* The most devices tensor_parallel may name. */
#define KILN_CUDA_MAX_TP 8

/* [<plugin>] tensor_parallel and devices (cuda_parallel.c). */
typedef struct kiln_cuda_tp_config {
  int n;              /* tensor_parallel, 1..KILN_CUDA_MAX_TP */
  int devices[KILN_CUDA_MAX_TP];
  int n_devices;      /* 0: devices not set */
} kiln_cuda_tp_config;

/* Reads and checks the two keys (cfg NULL: the defaults); errors name
 * where the value came from (config_origin.h), the section, the key and
 * the value. */
kiln_status kiln_cuda_tp_read_config(const kiln_host_api *host, const char *section,
                                     const kiln_config_section *cfg, kiln_cuda_tp_config *out);
/* NULL for tensor_parallel = 1 (and devices agreeing with device); else a
 * refusal naming what is missing (NCCL, the driver, devices) or, when all
 * is there, that the multi-GPU path is not built, after the place of the
 * value it refuses (tc read from cfg). */
kiln_status kiln_cuda_tp_check_open(kiln_cuda_plugin *pl, const kiln_config_section *cfg,
                                    const kiln_cuda_tp_config *tc, int device);
/* The ops table's probe_parallel. */
kiln_status kiln_cuda_probe_parallel(void *plugin, const kiln_config_section *cfg, char *out, size_t cap);

/* A loaded kernel, kept in a kiln_kernel's slot. */
typedef struct kiln_cuda_module {
  CUmodule module;
  CUfunction fn;
} kiln_cuda_module;

/* A kernel as a node uses it: the function and its launch shape. */
typedef struct kiln_cuda_fn {
  CUfunction fn;      /* NULL: not needed on this node */
  uint32_t block;     /* threads per block */
  uint32_t per_block; /* rows (or warps) per block where the kernel has them */
  uint32_t shared;    /* bytes of dynamic shared memory a block (0: none) */
} kiln_cuda_fn;

/* The opt-in profile ([<plugin>] profile = true, cuda_profile.c): CUDA
 * events before and after every node's launches, gathered per kind of node
 * (a label such as "mul_mat Q8_0 3584x18944 matvec [T=1]") and per step,
 * the host's time in run() and in transfers, logged as tables when the
 * backend closes. Events are read back only after a stream
 * synchronization (sync(), close), so timing adds two event records per
 * node and no waits. The first step of each kind (one token, several) is
 * left out: it carries one-time costs (cuBLAS's first call, first
 * launches of each kernel). */
typedef struct kiln_cuda_prof_kind {
  char label[80];
  uint64_t runs;  /* node runs timed */
  double ms;      /* their GPU time, summed */
  uint64_t bytes; /* weight bytes one run reads (MUL_MAT), for GB/s; 0: none */
  int multi;      /* 0: steps of one token, 1: steps of several */
} kiln_cuda_prof_kind;

typedef struct kiln_cuda_prof {
  bool on;
  kiln_cuda_prof_kind *kinds;
  uint32_t n_kinds, cap_kinds;
  CUevent *ev;    /* 2 per pending record: before, after */
  uint32_t *what; /* per pending record: its kind, or UINT32_MAX: not counted */
  uint32_t n_pending, cap_pending, n_events;
  bool open;          /* a begin without its end */
  CUevent step_ev[2]; /* around the last run(); NULL until the first */
  int step_running;   /* the kind of step in run() now, or -1 */
  int step_done;      /* the kind of an ended step not yet read back, or -1 */
  bool skip;          /* this step is the first of its kind: not counted */
  bool seen[2];       /* a step of that kind has run */
  struct {
    uint64_t steps, tokens;
    double gpu_ms;  /* first event of run() to its last */
    double host_ms; /* run() on the host: checks and launches */
  } step[2];        /* [0]: steps of one token, [1]: of several */
  struct {
    uint64_t n, bytes;
    double ms; /* on the host, synchronization included */
  } xfer[2];   /* [0]: uploads, [1]: downloads */
} kiln_cuda_prof;

/* The captured decode step (cuda_graph.c): the launches of one pass of
 * one token over a step's nodes, captured from the stream into a CUDA
 * graph on the second such step and replayed for every later one. What
 * it was captured from is kept to compare with each step before a replay:
 * the node list, every node's buffers' device addresses, and the
 * backend's generation (any prepare(), buffer_alloc() or buffer_free()
 * advances it and drops every graph: a graph belongs to the plan it was
 * captured from). Positions reach the replayed kernels only through the
 * step block, written before each launch. */
#define KILN_CUDA_MAX_GRAPHS 2
typedef struct kiln_cuda_graph_entry {
  CUgraph graph; /* NULL: empty */
  CUgraphExec exec;
  const kiln_node **nodes; /* the step's node list, copied */
  uint32_t n_nodes;
  CUdeviceptr *ptrs; /* per node: its sources' and dst's buffers, 5 each (0: none) */
  int64_t max_pos;   /* the last position every cache of the step holds */
  uint64_t used;     /* for eviction: the replay counter when last used */
} kiln_cuda_graph_entry;

typedef struct kiln_cuda_graphs {
  bool on;        /* [<plugin>] graph */
  bool capturing; /* inside a capture: nothing may synchronize or time */
  uint64_t gen;   /* the backend's generation */
  /* The last one-token step run uncaptured: captured when it comes again. */
  const kiln_node *const *seen_nodes;
  uint32_t seen_n;
  uint64_t seen_gen;
  kiln_cuda_graph_entry e[KILN_CUDA_MAX_GRAPHS];
  uint64_t replays, captures, clock;
} kiln_cuda_graphs;

/* [<plugin>] gemm: how a batched MUL_MAT multiplies (cuda_gemm.c). */
typedef enum kiln_cuda_gemm_mode {
  KILN_CUDA_GEMM_F32 = 0,   /* CUBLAS_COMPUTE_32F on f32 tiles: IEEE f32 (parity's) */
  KILN_CUDA_GEMM_TF32 = 1,  /* CUBLAS_COMPUTE_32F_FAST_TF32 on f32 tiles: ~4e-4 relative */
  KILN_CUDA_GEMM_BF16 = 2,  /* bf16 tiles and activations, f32 sums: ~2e-3 relative */
  KILN_CUDA_GEMM_BF16X3 = 3, /* bf16 hi/lo terms, 3 K terms, f32 sums: ~5e-6 relative
                               (gemm_operand.cuh) */
  KILN_CUDA_GEMM_Q16MMA = 4, /* block weights read directly by mmq.cu on int8 tensor cores,
                               activations q16 as two int8 halves: the decode matvec_q's
                               arithmetic; other weights take bf16x3 */
  KILN_CUDA_GEMM_FP8 = 5,    /* e4m3 with a scale a weight row and a token, cuBLASLt, f32
                                sums (cuda_gemm_fp8.c): ~3e-2 relative; compute capability
                                9.0 */
  KILN_CUDA_GEMM_TF32X3 = 6  /* TF32 hi/lo terms, 3 K terms, f32 sums (gemm_operand.cuh):
                                ~2^-21 relative, f32's grade at TF32 tensor-core rate;
                                compute capability 8.0 */
} kiln_cuda_gemm_mode;

/* What prepare() resolved for one node, found again by run(). */
typedef struct kiln_cuda_node_state {
  const kiln_node *node; /* NULL: empty slot */
  kiln_node snap;        /* the node as prepared: run() refuses a changed one */
  kiln_cuda_fn decode;   /* one-token path, or the op's only kernel */
  kiln_cuda_fn prefill;  /* batched path of several tokens (RMSNorm, attention: flash_attention
                            when per_block, its bq, is set, else one block per (head, token)) */
  kiln_cuda_fn bias;     /* MUL_MAT bias: bias_add, where the matvec does not add it */
  bool bias_fused;       /* MUL_MAT: the matvec adds the bias */
  kiln_cuda_fn dequant;  /* MUL_MAT weight -> the GEMM's tile (f32 or bf16 terms) */
  kiln_cuda_fn gemm_input; /* MUL_MAT, 16-bit gemm modes: x -> the GEMM's bf16 operand */
  kiln_cuda_fn mmq;        /* MUL_MAT, gemm = q16mma: the integer tensor-core GEMM (mmq.cu),
                              per_block its tile_m (fn NULL: the node takes bf16x3) */
  uint32_t mmq_tile_n;     /* mmq's tokens per block */
  kiln_cuda_fn mmq_input;  /* MUL_MAT, gemm = q16mma: x -> q16 columns (quantize) */
  /* MUL_MAT of several tokens on a batched flavor (gemm_batched): the GEMM
   * prepare() gave it (kiln_cuda_gemm_of_node) and, where that is not the
   * backend's mode, why; describe_modes counts them. */
  bool gemm_batched;
  kiln_cuda_gemm_mode gemm;
  kiln_cuda_mmq_fit gemm_why;
  kiln_cuda_fn attn_merge; /* ATTENTION, one token: attention_merge after decode's attention_split
                              (fn NULL: decode merges itself or is the one-block-per-head kernel) */
  uint32_t attn_splits;    /* ATTENTION: attention_split's n_split, its grid's x; 0: no split */
  bool attn_fused_merge;   /* ATTENTION: attention_split merges in its last blocks (merge = 1) */
  bool merge_quant;        /* ATTENTION: the merge also writes y quantized into the
                              xq scratch (activations q16 / q8), so the output projection's
                              matvec_q skips its quantize launch */
  int64_t rows_per_token; /* RMS_NORM: rows of the weight's length per column */
  uint32_t prof_kind[2];  /* profile kinds: [0] steps of one token, [1] of several */
  /* Quantized activations (activations = q16 / q8) and the fused kernels
   * (cuda_fuse.c). A kernel here is used only where run() finds the nodes
   * it stands for side by side in the step; otherwise each node runs
   * alone. */
  kiln_cuda_fn quantize;        /* MUL_MAT: its input to the xq scratch */
  kiln_cuda_fn mvq;             /* MUL_MAT: matvec_q of this matrix alone */
  kiln_cuda_mvq_member mvq_self; /* MUL_MAT: this matrix, for grouping */
  kiln_cuda_fn mvq_group;       /* MUL_MAT leader: matvec_q of the whole group */
  const kiln_node *group[3];    /* leader: the group's nodes, in step order (compared by
                                   address only; the leader is group[0]) */
  uint32_t n_group;             /* leader: 2 or 3; 0: no group */
  uint32_t grid_group;          /* leader: blocks of the group launch */
  kiln_cuda_fn add_norm;        /* RMS_NORM: add_rmsnorm with the producing ADD folded in */
  kiln_cuda_fn add_norm_q;      /* RMS_NORM: the same, quantizing the normed row */
  kiln_cuda_fn norm_q;          /* RMS_NORM: add_rmsnorm without the add, quantizing */
  kiln_cuda_fn swiglu_q;        /* SWIGLU: with its output quantized */
  kiln_cuda_fn rope_store;      /* ROPE of Q: with the K RoPE after it and both cache stores */
  const kiln_node *rope_k;      /* ROPE of Q: that K RoPE (compared by address only) */
  kiln_type rope_store_kv;      /* ROPE of Q: the caches' type rope_store was made for */
  /* Profile kinds of the launches above (steps of one token): MUL_MAT:
   * [0] quantize, [1] mvq, [2] the group; RMS_NORM: [0] add_norm, [1]
   * add_norm_q, [2] norm_q; SWIGLU: [0] swiglu_q; ROPE: [0] rope_store. */
  uint32_t prof_fused[3];
} kiln_cuda_node_state;

/* A device buffer for one tensor. The padding contract: none. The
 * allocation is the tensor's nbytes exactly (1 byte for an empty tensor),
 * from cuMemAlloc's 256-byte aligned base, and every kernel reads only
 * inside the bytes its tensors define; a kernel that needed readable bytes
 * past a tensor would have to ask for them by name here and have its
 * describe function check them. tools/device/sanitize.sh proves it: under
 * compute-sanitizer a read one byte past a tensor is a memcheck error. */
typedef struct kiln_cuda_buffer {
  CUdeviceptr ptr;
  uint64_t nbytes; /* the tensor's */
  uint64_t alloc;  /* allocated: nbytes (1 when nbytes is 0) */
  kiln_tensor_role role;
  int32_t *host_ids; /* INPUT I32 tensors: what was uploaded, to check ids on the host */
} kiln_cuda_buffer;

/* ---- the gemm modes: their names and operands, which GEMM a batched
 * MUL_MAT takes, and the line that says so (gemm_choice.c: no CUDA call,
 * so test_cuda_gemm_modes checks it for any device without one) ---- */

/* The mode's name as [<plugin>] gemm spells it. */
const char *kiln_cuda_gemm_name(kiln_cuda_gemm_mode g);
/* The operand form of mode g's tiles ("f32", "bf16", "bf16x3", "tf32x3";
 * q16mma's fallback for the weights mmq does not take is bf16x3), the
 * terms a value takes in them (0: f32 values), and the bytes of one term
 * (2 for bf16, 4 for tf32x3's f32 words). */
const char *kiln_cuda_gemm_operand(kiln_cuda_gemm_mode g);
unsigned kiln_cuda_gemm_terms(kiln_cuda_gemm_mode g);
unsigned kiln_cuda_gemm_term_bytes(kiln_cuda_gemm_mode g);

#define KILN_CUDA_GEMM_MODES 7 /* one past KILN_CUDA_GEMM_TF32X3 */

/* A list-valued key's value, "N,N,...": up to n_max decimal numbers of
 * at most KILN_CUDA_LIST_MAX each, separated by single commas, nothing
 * else (no sign, space or trailing text: the config reader has trimmed the
 * value). Returns how many were read into out, or -1 for anything else
 * (config_list.c). */
#define KILN_CUDA_LIST_MAX 1000000u
int kiln_cuda_parse_uints(const char *s, uint32_t *out, int n_max);

/* The compute capability (major) mode g's tensor-core path needs: 9 for
 * fp8 (cuBLASLt's per-row FP8 scale vectors), 8 for tf32, bf16, bf16x3
 * and q16mma (TF32, bf16 and int8 mma; below 8.0 cuBLAS would run tf32 on
 * CUDA cores in f32, so it is reported as f32), 0 for f32; the tensor
 * cores' name for a warning ("" for 0); and the mode g takes on a device
 * below it: fp8 -> bf16x3, the others -> f32. */
int kiln_cuda_gemm_cc_needed(kiln_cuda_gemm_mode g);
const char *kiln_cuda_gemm_cc_what(kiln_cuda_gemm_mode g);
kiln_cuda_gemm_mode kiln_cuda_gemm_below(kiln_cuda_gemm_mode g);
/* The mode a device of compute capability cc_major runs for `asked`:
 * kiln_cuda_gemm_below until the device has what the mode needs (fp8 on
 * 7.5: bf16x3, then f32). open() takes it as the backend's mode. */
kiln_cuda_gemm_mode kiln_cuda_gemm_on_device(kiln_cuda_gemm_mode asked, int cc_major);
/* The GEMM a batched MUL_MAT node takes under g, the mode in effect on the
 * device: f32 for a node whose output feeds a recurrent state
 * (node->p.mul_mat.feeds_recurrent) when recurrent_guard is set, in every
 * mode (*out_why KILN_CUDA_GEMM_GUARDED; Qwen3.5's Gated DeltaNet
 * amplifies bf16x3's 2^-17 into parity failures, README "Qwen3.5"); else
 * under q16mma, mmq (q16mma) for a weight it takes, else bf16x3, and
 * *out_why (may be NULL) says why not (kiln_cuda_mmq_fit_of); g itself in
 * every other mode (*out_why KILN_CUDA_MMQ_FITS). prepare() follows it
 * and keeps the answer in the node's state. */
kiln_cuda_gemm_mode kiln_cuda_gemm_of_node(kiln_cuda_gemm_mode g, bool recurrent_guard,
                                           const kiln_node *node, kiln_cuda_mmq_fit *out_why);

/* The batched GEMMs of a backend's prepared nodes, counted by the mode
 * each takes and its weight's type, and mmq's refusals under q16mma by
 * cause and type (their sum is by_type[KILN_CUDA_GEMM_BF16X3]). */
typedef struct kiln_cuda_gemm_tally {
  uint32_t total;
  uint32_t by_mode[KILN_CUDA_GEMM_MODES];
  uint32_t by_type[KILN_CUDA_GEMM_MODES][KILN_TYPE_COUNT];
  uint32_t mmq_type[KILN_TYPE_COUNT]; /* KILN_CUDA_MMQ_TYPE: no mmq decoder for the type */
  uint32_t mmq_k[KILN_TYPE_COUNT];    /* KILN_CUDA_MMQ_K: K not whole 128s */
  uint32_t guarded;                   /* KILN_CUDA_GEMM_GUARDED: f32 by recurrent_guard */
} kiln_cuda_gemm_tally;
/* Counts one node that took mode g for reason why, its weight of type w. */
void kiln_cuda_gemm_tally_add(kiln_cuda_gemm_tally *t, kiln_cuda_gemm_mode g, kiln_cuda_mmq_fit why,
                              kiln_type w);
/* describe_modes' gemm item (kiln/plugin.h) into out (cap bytes with its
 * NUL; a longer line is cut): the configured mode `asked`, the device's
 * (`on_device`, with the compute capability cc_major.cc_minor that made
 * it differ), then the tally, each count named by the mode it ran, the
 * device's mode first, with its weight types; under q16mma the bf16x3
 * fallback always (0 too), with each type's cause:
 *   "gemm q16mma: 198 batched GEMMs: 196 q16mma (Q4_K 168, Q6_K 28),
 *    2 bf16x3 fallback (F16 2: no mmq decoder)"   (one line)
 *   "gemm fp8 -> bf16x3 (compute capability 8.6 < 9.0): 198 batched GEMMs:
 *    198 bf16x3 (Q4_K 170, Q6_K 28)"               (one line)
 *   "gemm bf16x3: no batched GEMMs prepared" */
void kiln_cuda_gemm_line(kiln_cuda_gemm_mode asked, kiln_cuda_gemm_mode on_device, int cc_major,
                         int cc_minor, const kiln_cuda_gemm_tally *t, char *out, size_t cap);

/* Loaded functions a backend remembers as safe to launch programmatically. */
#define KILN_CUDA_MAX_PDL_FNS 512

/* A backend instance (open .. close). */
typedef struct kiln_cuda_backend {
  const kiln_host_api *host;
  const kiln_cuda_flavor *fl;
  const kiln_cu *cu;
  int device;
  CUdevice dev;
  CUcontext ctx; /* the primary context, retained */
  CUstream stream;
  CUdeviceptr step_dev; /* the per-step parameter block (cuda_step.h) */
  int cc_major, cc_minor;
  int sm_count; /* streaming multiprocessors: the split decode attention's grid */
  char arch[16];
  kiln_nvrtc nv;
  kiln_kcompiler *compiler;
  int poison; /* -1, or the byte every new buffer and scratch is filled with */
  kiln_cuda_quant act; /* [<plugin>] activations: NONE (f32), Q16 or Q8 */
  /* [<plugin>] recurrent_guard = f32: a MUL_MAT whose output feeds a
   * recurrent state (node->p.mul_mat.feeds_recurrent) takes the f32
   * matvec whatever act says (no matvec_q, so no quantized input either),
   * and the f32 GEMM whatever gemm says (kiln_cuda_gemm_of_node). */
  bool recurrent_guard;
  bool fuse;           /* [<plugin>] fuse: run side-by-side nodes as one kernel */
  int mvq_load;        /* [<plugin>] matvec_load: 0 auto, 1 direct, 2 staged */
  kiln_cuda_matvec_shape mvq_forced; /* [<plugin>] matvec_shape; warps 0: auto */
  uint32_t attn_splits_forced;       /* [<plugin>] attention_splits; 0: auto */
  bool attn_merge_kernel;            /* [<plugin>] attention_merge = kernel (not fused) */
  bool attn_mma;                     /* [<plugin>] decode_attention = mma */
  bool prefill_flash;                /* [<plugin>] prefill_attention = flash (not rows) */
  /* Programmatic dependent launch ([<plugin>] pdl, compute capability >=
   * 9.0): the functions whose PTX waits on its grid dependency
   * (grid_dep.cuh) launch with the programmatic-serialization attribute,
   * so they are scheduled while the kernel before them finishes; any
   * other launches plainly. Functions past the table's end launch plainly
   * too. */
  bool pdl;
  uint32_t n_pdl_fns;
  CUfunction pdl_fns[KILN_CUDA_MAX_PDL_FNS];
  int smem_optin; /* the most dynamic shared memory a block may ask for (opt-in), bytes */
  /* The split decode attention's partial results (attention_part.cuh):
   * n_head * n_split records of head_dim + 2 floats for the largest
   * ATTENTION node prepared, grown in prepare(), freed in close() with
   * the rest of the plan's memory. Every launch pair writes the records
   * it reads (a split without keys writes only m, and the merge reads
   * only m of it), in stream order, so the layers share it. */
  CUdeviceptr attn_part;
  uint64_t attn_part_bytes;
  /* The fused merge's tickets (attention_split with merge = 1): one u32
   * a KV head, zeroed when allocated; each launch counts them up to
   * n_split and its last block of each KV head sets its one back to 0,
   * so in stream order every launch finds them 0. */
  CUdeviceptr attn_tickets;
  uint64_t attn_tickets_bytes;
  void *nvtx_domain; /* kiln_cuda_mark_written's NVTX domain, made at its first call */
  /* The quantized-activation scratch: one column of the widest matvec_q
   * input, grown in prepare(); xq_of is the tensor it holds now, valid
   * for the pass numbered xq_pass (each pass over a step's nodes takes
   * the next number in `pass`). */
  CUdeviceptr xq;
  uint64_t xq_bytes;
  const kiln_tensor *xq_of;
  uint64_t xq_pass, pass;
  /* cuBLAS (batched prefill), created in open() when the flavor has it. */
  cublasHandle_t blas;
  /* gemm = fp8: cuBLASLt (cuda_gemm_fp8.c), created in open(), and its
   * workspace, allocated in prepare(). cublasLtHandle_t, spelled without
   * cublasLt.h (whose prototypes -Wstrict-prototypes rejects) here. */
  struct cublasLtContext *lt;
  CUdeviceptr lt_ws;
  uint64_t lt_ws_bytes;
  /* gemm = fp8 for a weight of N rows, N no multiple of 16: each tile's
   * output goes here first, its leading dimension rounded up to 16
   * (cuBLASLt's FP8 kernels want aligned ones), then to Y. */
  CUdeviceptr lt_out;
  uint64_t lt_out_bytes;
  kiln_cuda_gemm_mode gemm;       /* in effect on the device (kiln_cuda_gemm_on_device) */
  kiln_cuda_gemm_mode gemm_asked; /* [<plugin>] gemm as configured */
  kiln_cuda_mmq_shape mmq_shape;  /* [<plugin>] mmq_shape (auto: 128,64,4,0) */
  uint64_t scratch_cap; /* most bytes the weight tile may take */
  CUdeviceptr scratch;  /* the tile, grown in prepare() */
  uint64_t scratch_bytes;
  /* 16-bit gemm modes: the activations' operand (gemm_input), grown in
   * prepare(); x16_of is the tensor whose first x16_cols columns it holds,
   * valid for the pass numbered x16_pass (the Q/K/V and gate/up GEMMs of
   * a layer share their input: one conversion). */
  CUdeviceptr x16;
  uint64_t x16_bytes;
  const kiln_tensor *x16_of;
  int32_t x16_cols;
  uint64_t x16_pass;
  bool x16_q16; /* gemm = q16mma: x16 holds x16_of's columns quantized (act_quant.cuh) for
                   mmq, not the bf16x3 operand; the two never stand in for each other */
  kiln_cuda_node_state *states; /* by node id */
  uint32_t n_states;
  /* Pinned host memory that downloads pass through (cuda_buffers.c). */
  void *staging;
  uint64_t staging_bytes;
  /* Pinned host memory small uploads (a step's token ids) are copied into,
   * so the upload returns without waiting for the device: up_ev marks when
   * the last copy out of it has run (cuda_buffers.c). */
  void *up_staging;
  CUevent up_ev;
  bool up_pending;
  kiln_cuda_prof prof;
  kiln_cuda_graphs graph;
} kiln_cuda_backend;

/* ---- the ops table (cuda_plugin.c, cuda_buffers.c, cuda_prepare.c,
 * cuda_run.c): the functions an entry table names ---- */

/* init for a flavor: each plugin's init() calls it with its own. */
kiln_status kiln_cuda_init(const kiln_cuda_flavor *fl, const kiln_host_api *host,
                           void **out_plugin);
void kiln_cuda_fini(void *plugin);
kiln_status kiln_cuda_probe(void *plugin, kiln_probe_info *out_info);
kiln_status kiln_cuda_open(void *plugin, const kiln_config_section *cfg, void **out_backend);
void kiln_cuda_close(void *backend);
kiln_status kiln_cuda_supports(void *backend, const kiln_node *node);
kiln_status kiln_cuda_buffer_alloc(void *backend, const kiln_tensor *t, void **out_buf);
void kiln_cuda_buffer_free(void *backend, void *buf);
kiln_status kiln_cuda_buffer_upload(void *backend, void *buf, uint64_t offset, const void *src,
                                    uint64_t nbytes);
kiln_status kiln_cuda_buffer_download(void *backend, void *buf, uint64_t offset, void *dst,
                                      uint64_t nbytes);
kiln_status kiln_cuda_prepare(void *backend, const kiln_node *node);
kiln_status kiln_cuda_run(void *backend, const kiln_step *step);
kiln_status kiln_cuda_sync(void *backend);
/* describe_modes (ABI 2.3): the gemm item of the batched flavors
 * (kiln_cuda_gemm_line over the prepared nodes); "" on cuda-serial. */
kiln_status kiln_cuda_describe_modes(void *backend, char *out_line, size_t cap);

/* ---- the entry table ---- */

/* Defines a CUDA plugin's entry (kiln/plugin.h) at file scope: its flavor,
 * its init() (kiln_cuda_init with that flavor) and the exported
 * kiln_backend_entry, whose every op is the cuda-common function above.
 *   NAME, DESCRIPTION  string literals: the plugin (kiln-NAME.so, config
 *                      section [NAME], the flavor's name) and its line in
 *                      `kiln backends`;
 *   KEYS               an array (not a pointer) of the kiln_config_key the
 *                      plugin declares (cuda_config_keys.h), agreeing with
 *                      the flavor's has_gemm_keys / has_allow_lower_cc;
 *   ...                the kiln_cuda_flavor's designated initializers
 *                      beyond .name; a field left out is 0 / false (any
 *                      compute capability, no gemm or allow_lower_cc keys).
 * Each plugin's entry file is one use of it, so the entry files hold only
 * how the plugins differ. */
#define KILN_CUDA_PLUGIN_ENTRY(NAME, DESCRIPTION, KEYS, ...)                  \
  static const kiln_cuda_flavor kiln_cuda_entry_flavor = {.name = NAME,       \
                                                          __VA_ARGS__};       \
  static kiln_status kiln_cuda_entry_init(const kiln_host_api *host,          \
                                          void **out_plugin) {                \
    return kiln_cuda_init(&kiln_cuda_entry_flavor, host, out_plugin);         \
  }                                                                           \
  const kiln_backend_ops kiln_backend_entry = {                               \
      .abi_major = KILN_PLUGIN_ABI_MAJOR,                                     \
      .abi_minor = KILN_PLUGIN_ABI_MINOR,                                     \
      .struct_size = sizeof(kiln_backend_ops),                                \
      .name = NAME,                                                           \
      .description = DESCRIPTION,                                             \
      .config_keys = KEYS,                                                    \
      .n_config_keys = sizeof KEYS / sizeof KEYS[0],                          \
      .init = kiln_cuda_entry_init,                                           \
      .fini = kiln_cuda_fini,                                                 \
      .probe = kiln_cuda_probe,                                               \
      .open = kiln_cuda_open,                                                 \
      .close = kiln_cuda_close,                                               \
      .supports = kiln_cuda_supports,                                         \
      .buffer_alloc = kiln_cuda_buffer_alloc,                                 \
      .buffer_map_weight = NULL, /* device memory: weights are copied */      \
      .buffer_free = kiln_cuda_buffer_free,                                   \
      .buffer_upload = kiln_cuda_buffer_upload,                               \
      .buffer_download = kiln_cuda_buffer_download,                           \
      .prepare = kiln_cuda_prepare,                                           \
      .run = kiln_cuda_run,                                                   \
      .sync = kiln_cuda_sync,                                                 \
      .probe_parallel = kiln_cuda_probe_parallel,                             \
      .describe_modes = kiln_cuda_describe_modes,                             \
  }

/* ---- internals ---- */

/* Makes the backend's context current on the calling thread. */
kiln_status kiln_cuda_enter(kiln_cuda_backend *be);

/* The loaded function of kernel k (loading its PTX into a module kept in
 * k->slot on first use). Errors name the node and the JIT log. */
kiln_status kiln_cuda_kernel_fn(kiln_cuda_backend *be, kiln_kernel *k, const kiln_node *node,
                                CUfunction *out_fn);

/* The compiler's release_slot: unloads a kiln_cuda_module. */
void kiln_cuda_release_slot(void *backend, void *slot);

/* cuLaunchKernel on the backend's stream, checked; a function whose PTX
 * waits on its grid dependency (grid_dep.cuh) through cuLaunchKernelEx
 * with programmatic stream serialization when be->pdl. */
kiln_status kiln_cuda_launch(kiln_cuda_backend *be, const kiln_node *node, const char *what,
                             CUfunction fn, uint32_t gx, uint32_t gy, uint32_t block,
                             void **args);
/* The same with shared_bytes of dynamic shared memory a block (above 48
 * KiB the function must have been allowed it: cuFuncSetAttribute). */
kiln_status kiln_cuda_launch_shared(kiln_cuda_backend *be, const kiln_node *node,
                                    const char *what, CUfunction fn, uint32_t gx, uint32_t gy,
                                    uint32_t block, uint32_t shared_bytes, void **args);

/* Device memory: cuMemAlloc of `bytes`, filled with be->poison when set. */
kiln_status kiln_cuda_mem_alloc(kiln_cuda_backend *be, uint64_t bytes, const kiln_node *node,
                                CUdeviceptr *out_ptr);
/* Makes the plan-time device buffer *p of *have bytes (0, 0: none yet)
 * hold at least `bytes`: a smaller one is freed (after the stream's work,
 * which may still read it) and allocated anew with kiln_cuda_mem_alloc,
 * *grown then true (also when that fails: *p is 0 then). Errors from the
 * driver, annotated "<what> of N bytes" and naming node. */
kiln_status kiln_cuda_mem_reserve(kiln_cuda_backend *be, CUdeviceptr *p, uint64_t *have,
                                  uint64_t bytes, const kiln_node *node, const char *what,
                                  bool *grown);

/* cuBLAS: handle (in open) and its teardown; the f32 GEMM of a MUL_MAT
 * step of n_tokens > 1 (cuda_gemm.c). */
kiln_status kiln_cuda_blas_open(kiln_cuda_backend *be);
void kiln_cuda_blas_close(kiln_cuda_backend *be);

/* Tells compute-sanitizer (initcheck) that n ranges of `bytes` bytes, from
 * base every `pitch` bytes, were written by the work queued on the
 * backend's stream so far: for the outputs of cuBLAS and cuBLASLt
 * kernels, whose stores the tool does not see (cuda_sanitize.c says how
 * that was found). NVTX's memory API; nothing without a tool attached or
 * without the header. */
void kiln_cuda_mark_written(kiln_cuda_backend *be, CUdeviceptr base, size_t bytes, size_t pitch,
                            int64_t n);
/* Releases what kiln_cuda_mark_written made (close()). */
void kiln_cuda_sanitize_close(kiln_cuda_backend *be);
kiln_status kiln_cuda_mul_mat_gemm(kiln_cuda_backend *be, const kiln_node *node,
                                   const kiln_cuda_node_state *ns, CUdeviceptr w, CUdeviceptr x,
                                   CUdeviceptr y, int32_t n_tokens);
/* gemm = fp8 (cuda_gemm_fp8.c): the cuBLASLt handle (from blas_open),
 * a MUL_MAT's operand kernels, tile and workspace (from prepare), and its
 * GEMM (from mul_mat_gemm). */
kiln_status kiln_cuda_fp8_open(kiln_cuda_backend *be);
void kiln_cuda_fp8_close(kiln_cuda_backend *be);
kiln_status kiln_cuda_fp8_prepare(kiln_cuda_backend *be, const kiln_node *node,
                                  kiln_cuda_node_state *ns);
kiln_status kiln_cuda_mul_mat_fp8(kiln_cuda_backend *be, const kiln_node *node,
                                  const kiln_cuda_node_state *ns, CUdeviceptr w, CUdeviceptr x,
                                  CUdeviceptr y, int32_t n_tokens);
/* Makes the weight tile hold at least `bytes` (at most be->scratch_cap). */
kiln_status kiln_cuda_scratch_reserve(kiln_cuda_backend *be, uint64_t bytes,
                                      const kiln_node *node);
/* gemm = q16mma, a node prepare() gave mmq (ns->mmq.fn): its input
 * quantized to q16 into be->x16 (once per input and pass, as bf16x3's
 * operand), then mmq (cuda_mmq.c). */
kiln_status kiln_cuda_mul_mat_mmq(kiln_cuda_backend *be, const kiln_node *node,
                                  const kiln_cuda_node_state *ns, CUdeviceptr w, CUdeviceptr x,
                                  CUdeviceptr y, int32_t n_tokens);
/* Makes the activations' operand (16-bit, or q16mma's quantized columns)
 * hold at least `bytes`. */
kiln_status kiln_cuda_x16_reserve(kiln_cuda_backend *be, uint64_t bytes, const kiln_node *node);
/* Whether be->x16 holds x's first cols columns in this pass, quantized
 * (q16: mmq's input) or converted (the 16-bit modes' and fp8's operand;
 * the gemm mode fixes which), so a GEMM of the same input reuses them. */
bool kiln_cuda_x16_holds(const kiln_cuda_backend *be, const kiln_tensor *x, int32_t cols, bool q16);
/* Records that be->x16 now holds them (after the kernel that wrote them). */
void kiln_cuda_x16_mark(kiln_cuda_backend *be, const kiln_tensor *x, int32_t cols, bool q16);
/* Bytes of one tile row of a K-wide weight in the operand form of gemm
 * mode g (the node's: kiln_cuda_gemm_of_node). */
uint64_t kiln_cuda_tile_row_bytes(kiln_cuda_gemm_mode g, int64_t k);
/* Rows of a K-wide, N-row weight one tile of mode g holds. */
int64_t kiln_cuda_tile_rows(const kiln_cuda_backend *be, kiln_cuda_gemm_mode g, int64_t k, int64_t n);

/* ---- a pass over a step's nodes (cuda_node_run.c, cuda_fuse.c,
 * cuda_run.c): a pass is n tokens from column col at position pos; one per
 * step, or one per token on cuda-serial's token loop ---- */

/* A node bound for a pass: its state and buffers (b[0..3]: sources,
 * b[4]: dst), all checked. */
typedef struct kiln_cuda_bound {
  const kiln_node *node;
  const kiln_cuda_node_state *ns;
  const kiln_cuda_buffer *b[KILN_MAX_SRC + 1];
} kiln_cuda_bound;

/* The node's prepared state; KILN_STATUS_INVALID_ARGUMENT naming the node
 * when it was not prepared or has changed since. */
kiln_status kiln_cuda_node_state_of(const kiln_cuda_backend *be, const kiln_node *node,
                                    const kiln_cuda_node_state **out);
/* Every check before a node's launch (cuda_node_run.c's header), into *out. */
kiln_status kiln_cuda_bind(const kiln_cuda_backend *be, const kiln_step *step,
                           const kiln_node *node, int32_t n, int32_t col, int32_t pos,
                           kiln_cuda_bound *out);
/* The bound node's own launches for the pass; a matvec_q (n == 1 with
 * quantized activations) finds its input in the scratch already
 * (kiln_cuda_quantize_input), else KILN_STATUS_INTERNAL. */
kiln_status kiln_cuda_node_launch(kiln_cuda_backend *be, const kiln_cuda_bound *nb, int32_t n,
                                  int32_t col, int32_t pos);
/* Device address of tensor t's column `col` (activations and inputs; other
 * roles are addressed whole). */
CUdeviceptr kiln_cuda_col_ptr(const kiln_cuda_buffer *b, const kiln_tensor *t, int32_t col);
/* Grid of a grid-stride kernel over n items (1 .. 4096 blocks). */
uint32_t kiln_cuda_stride_grid(long long n, uint32_t block);
/* Whether the quantized-activation scratch holds t for this pass; which
 * tensor it holds now. */
bool kiln_cuda_xq_holds(const kiln_cuda_backend *be, const kiln_tensor *t);
void kiln_cuda_xq_set(kiln_cuda_backend *be, const kiln_tensor *t);
/* quantize of MUL_MAT nb's input column col into the scratch. */
kiln_status kiln_cuda_quantize_input(kiln_cuda_backend *be, const kiln_cuda_bound *nb,
                                     int32_t col);
/* The fused launch (cuda_fuse.c) that begins at step->nodes[i] in a pass
 * of one token, if its nodes are there side by side: *out_used nodes run,
 * 0 when none applies (then nothing was launched). */
kiln_status kiln_cuda_fuse_at(kiln_cuda_backend *be, const kiln_step *step, uint32_t i,
                              int32_t col, int32_t pos, uint32_t *out_used);

/* ---- the captured decode step (cuda_graph.c) ---- */

/* Runs a step of one token from its captured graph when one matches it
 * (*out_done = true), capturing it first when this is the second time
 * this node list comes; otherwise leaves *out_done false (run it as
 * usual). run_pass runs the pass's launches for a capture. */
typedef kiln_status (*kiln_cuda_pass_fn)(kiln_cuda_backend *be, const kiln_step *step);
kiln_status kiln_cuda_graph_run(kiln_cuda_backend *be, const kiln_step *step,
                                kiln_cuda_pass_fn run_pass, bool *out_done);
/* Advances the generation and destroys every graph (prepare, buffer
 * alloc and free call it). */
void kiln_cuda_graph_drop_all(kiln_cuda_backend *be);

/* ---- the profile (cuda_profile.c); every function is a no-op returning
 * NULL when be->prof.on is false ---- */

/* The kinds a prepared node's runs count under, into ns->prof_kind. */
kiln_status kiln_cuda_prof_prepare(kiln_cuda_backend *be, const kiln_node *node,
                                   kiln_cuda_node_state *ns);
/* An event before the launches of one node; when too many records are
 * pending, synchronizes and reads them back first. */
kiln_status kiln_cuda_prof_begin(kiln_cuda_backend *be);
/* The event after them: the record counts under `kind` (the node's
 * ns->prof_kind[multi]). */
kiln_status kiln_cuda_prof_end(kiln_cuda_backend *be, uint32_t kind);
/* Events around a whole run() (multi: a step of several tokens); a
 * previous step not yet read back is read first (synchronizing, which only
 * an unusual caller that runs twice without sync() makes wait). step_end
 * also counts the step's tokens and the host milliseconds run() took;
 * step_abort forgets a step that failed. */
kiln_status kiln_cuda_prof_step_begin(kiln_cuda_backend *be, int multi);
kiln_status kiln_cuda_prof_step_end(kiln_cuda_backend *be, int32_t tokens, double host_ms);
void kiln_cuda_prof_step_abort(kiln_cuda_backend *be);
/* A host transfer (download: 1, upload: 0) of `bytes` that took `ms`;
 * counted once a step has run (so not the plan's weight uploads). */
void kiln_cuda_prof_xfer(kiln_cuda_backend *be, int download, uint64_t bytes, double ms);
/* CLOCK_MONOTONIC in milliseconds. */
double kiln_cuda_now_ms(void);
/* The kind labelled `label` (steps of one token when multi is 0), made
 * when new; bytes: weight bytes one run reads, for GB/s (0: none). */
kiln_status kiln_cuda_prof_kind_of(kiln_cuda_backend *be, const char *label, uint64_t bytes,
                                int multi, uint32_t *out_kind);
/* Reads back every pending record; the stream must be synchronized. */
kiln_status kiln_cuda_prof_collect(kiln_cuda_backend *be);
/* Logs the table (host->log, info) and frees the events; for close. */
void kiln_cuda_prof_finish(kiln_cuda_backend *be);

/* "cublasGemmEx: CUBLAS_STATUS_... (text) in node X". */
kiln_status kiln_cuda_blas_error(const kiln_cuda_backend *be, cublasStatus_t s, const char *call,
                                 const kiln_node *node);

#endif
