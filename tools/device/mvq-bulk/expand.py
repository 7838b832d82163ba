#!/usr/bin/env python3
"""One CUDA file with kiln's matvec_q template expanded for one configuration
(tools/device/mvq-bulk/run.sh calls it): expand.py KERNELS_DIR NAME GROUP
PARAM=VALUE ...; the kernel is renamed kiln_matvec_q_NAME and a NAME_info()
tells the harness its launch shape and matrices."""
import os
import re
import sys

kd, name, group = sys.argv[1], sys.argv[2], sys.argv[3]
p = dict(a.split('=', 1) for a in sys.argv[4:])
d = dict(quant='q16', k='3584', warps='4', k_split='4', rows_per_group='2', groups_per_block='1',
         stages='0', type0='Q4_K', rows0='0', bias0='none', load0='direct',
         type1='none', rows1='0', bias1='none', load1='direct',
         type2='none', rows2='0', bias2='none', load2='direct',
         norm='none', add='0', eps='0.0f', w_type='F32')  # the harness passes no norm arguments: keep norm none
# tree=NAME: the templates of another tree, $MVH_TREES/NAME (two versions
# of the kernels side by side in one run)
tree = p.pop('tree', None)
if tree:
    kd = os.path.join(os.environ['MVH_TREES'], tree)
d.update(p)
# kernel_templates.c's order for matvec_q
parts = ['grid_dep.cuh', 'quant_mode.cuh', 'act_quant.cuh', 'rmsnorm_common.cuh', 'matvec_q_prims.cuh',
         'matvec_q_types.cuh', 'matvec_q_stage.cuh', 'matvec_q.cu']
src = ''.join(open(f'{kd}/{f}.tmpl').read() + '\n' for f in parts)
src = re.sub(r'\{\{(\w+)\}\}', lambda m: d[m.group(1)], src)
# several expansions link into one program: no shared out-of-line symbols
src = src.replace('__device__ __noinline__', 'static __device__ __noinline__')
src = src.replace('kiln_matvec_q(', f'kiln_matvec_q_{name}(')
desc = ' '.join(f'{k}={v}' for k, v in p.items()) + (f' tree={tree}' if tree else '')
src = '#include "mvh.h"\n' + src + f'''
extern "C" void {name}_info(mvh_cfg *c) {{
  c->name = "{name}"; c->group = "{group}"; c->desc = "{desc}";
  c->k = KILN_K; c->block = 32 * KILN_WARPS; c->fn = (const void *)kiln_matvec_q_{name};
  c->t[0] = KILN_T0; c->t[1] = KILN_T1; c->t[2] = KILN_T2;
  c->rows[0] = KILN_ROWS_0; c->rows[1] = KILN_ROWS_1; c->rows[2] = KILN_ROWS_2;
  c->bias[0] = KILN_B0; c->bias[1] = KILN_B1; c->bias[2] = KILN_B2;
#if KILN_BULK
  c->bulk = 1; c->smem = KILN_STAGES * KILN_MB_STAGE; c->units = KILN_MB_SETS;
#else
  c->bulk = 0; c->smem = 0; c->units = KILN_NB(KILN_ROWS_0) + KILN_NB(KILN_ROWS_1) + KILN_NB(KILN_ROWS_2);
#endif
}}
'''
open(f'{name}.cu', 'w').write(src)
