/* Internal to libkiln: the tensor-parallel plan as the shard builder and
 * the emulator read it (kiln/tp.h). */
#ifndef KILN_TP_INTERNAL_H
#define KILN_TP_INTERNAL_H

#include "kiln/tp.h"

struct kiln_tp_plan {
  const kiln_graph *g;
  int32_t n;
  kiln_tp_layout *layout;            /* per node */
  kiln_tp_collective *collective;    /* per node */
  kiln_tp_split (*src_split)[KILN_MAX_SRC]; /* per node and source */
  kiln_tp_split *dst_split;          /* per node */
  kiln_tp_layout *tensor_layout;     /* per tensor, as the walk reaches it (after any all-reduce) */
  uint32_t n_all_reduce;
};

/* t's ne0 and ne1 in one of n shards under `split`. */
void kiln__tp_split_shape(const kiln_tensor *t, kiln_tp_split split, int32_t n, int64_t *ne0, int64_t *ne1);

#endif
