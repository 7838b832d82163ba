#!/bin/bash
# matvec_q's launch shapes and grids timed outside kiln, on the GPU machine:
# every configuration in configs.txt (the template expanded by expand.py,
# renamed, linked into one program with mvh_main.cu) on weights several
# times the L2 (copies cycled), each launch timed plain and with
# programmatic dependent launch (as kiln's decode step runs them), its
# output checked bit for bit against its group's first configuration
# where both split rows alike; the plain read of the same bytes is each
# group's ceiling. What cuda_prepare.c's bulk shapes come from (README,
# "Speed"). From the repository root:
#
#   bash tools/device/mvq-bulk/run.sh [NAME|GROUP[,...]]
#
# It builds in /tmp/mvq-bulk with the machine's nvcc (sm_90a) and writes
# $OUT/mvq-bulk.txt; NCU_CFGS="name ..." adds Nsight Compute's view of
# those configurations' first launch ($OUT/ncu-NAME.txt). MVH_CONFIGS names
# another list than configs.txt; a line's tree=NAME takes its templates
# from $MVH_TREES/NAME instead of the repository's.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kd=$here/../../../backends/cuda-common/kernels
out=${OUT:-/tmp}
b=/tmp/mvq-bulk
export PATH=/usr/local/cuda/bin:$PATH
rm -rf "$b" && mkdir -p "$b" && cp "$here/mvh.h" "$here/mvh_main.cu" "$b/" && cd "$b" || exit 1
objs="" decl="" body=""
while read -r name group rest; do
  case "$name" in '' | '#'*) continue ;; esac
  python3 "$here/expand.py" "$kd" "$name" "$group" $rest || exit 1
  objs="$objs $name.o"
  decl="$decl extern \"C\" void ${name}_info(mvh_cfg *);"
  body="$body { mvh_cfg c; ${name}_info(&c); v.push_back(c); }"
done < "${MVH_CONFIGS:-$here/configs.txt}"
printf '#include "mvh.h"\n#include <vector>\n%s\nvoid mvh_all(std::vector<mvh_cfg> &v) {%s }\n' "$decl" "$body" > reg.cu
{
  echo "OBJS = $objs reg.o mvh_main.o"
  echo "mvh: \$(OBJS)"
  printf '\tnvcc -arch=sm_90a -o $@ $(OBJS)\n'
  echo "%.o: %.cu mvh.h"
  printf '\tnvcc -arch=sm_90a -O3 -c $< -o $@\n'
} > Makefile
make -j"$(nproc)" -s 2>&1 | grep -E 'error' && exit 1
./mvh "$@" 2>&1 | tee "$out/mvq-bulk.txt"
for c in ${NCU_CFGS:-}; do
  MVH_REPS=3 timeout 120 ncu --clock-control none -k regex:kiln_matvec_q -c 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
    --section WarpStateStats --section LaunchStats -o "$out/ncu-$c" -f ./mvh "$c" > /dev/null 2>&1
  ncu --import "$out/ncu-$c.ncu-rep" --page details > "$out/ncu-$c.txt" 2>&1
  echo "== ncu $c"
  grep -E 'DRAM Throughput|Duration|Registers Per|Achieved Occupancy|Warp Cycles Per Issued' "$out/ncu-$c.txt"
  rm -f "$out/ncu-$c.ncu-rep"
done
