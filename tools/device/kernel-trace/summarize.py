#!/usr/bin/env python3
"""Where a decode step's time goes, from trace.c's kernel timeline
(tools/device/kernel-trace/summarize.py TRACE.csv [SKIP_STEPS]).

A step is one execution of a captured CUDA graph: the kernels of one
graph, in start order, until one of its nodes comes again (each of
kiln's captured steps is a graph of its own, and each graph is reported
alone). Per step, kernel i "adds" end_i - end_(i-1) (the first: its whole
run), the time by which it moves the step's end: with programmatic launch
a kernel starts (and waits) before the one ahead of it ends, so durations
overlap while the adds sum to the step. Per graph: the mean step, then
per kind of kernel (entry name, grid, block) its launches a step, mean
duration, mean adds and mean gap (start_i - end_(i-1): negative where it
was already resident), the kinds ordered by their share of the step. Kernels outside graphs (prefill,
warm-up, other streams) are counted apart. SKIP_STEPS (default 2) drops
the first runs of each graph (the capture's own run, the first
replays)."""
import collections
import sys


def main():
    path = sys.argv[1]
    skip = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    rows = []
    with open(path) as f:
        for line in f:
            p = line.rstrip('\n').split(',', 9)
            if len(p) != 10:
                continue
            rows.append((int(p[0]), int(p[1]), int(p[2]), int(p[3]), int(p[4]), int(p[5]),
                         int(p[6]), int(p[7]), int(p[8]), p[9]))
    rows.sort()
    # Runs of each graph: its kernels in start order until a node comes
    # again. Kernels outside graphs (prefill, another stream) are counted
    # apart and split nothing.
    runs = collections.defaultdict(list)
    outside = 0
    for r in rows:
        if r[3] == 0:
            outside += 1
            continue
        g = runs[r[3]]
        if not g or any(x[4] == r[4] for x in g[-1]):
            g.append([])
        g[-1].append(r)
    if not any(len(g) > skip for g in runs.values()):
        print(f'{path}: no graph replays past the first {skip} ({len(rows)} kernels, '
              f'{outside} outside graphs)')
        return 1
    print(f'{path}: {len(runs)} graph(s), {outside} kernels outside graphs; per graph, '
          f'its first {skip} runs skipped')
    for gid, g in sorted(runs.items()):
        if len(g) > skip:
            report(gid, g[skip:])
    return 0


def report(gid, steps):
    """One graph's steps: the mean step, then its kinds of kernel."""
    n = len(steps)
    spans = [s[-1][1] - s[0][0] for s in steps]
    sizes = [len(s) for s in steps]
    print(f'graph {gid}: {n} steps, {min(sizes)}..{max(sizes)} kernels a step; step mean '
          f'{sum(spans) / n / 1e3:.1f} us, min {min(spans) / 1e3:.1f}, max {max(spans) / 1e3:.1f}')
    kinds = collections.OrderedDict()
    for s in steps:
        prev_end = None
        for r in s:
            k = (r[9][:48], r[5], r[6], r[7])
            d = kinds.setdefault(k, [0, 0, 0, 0, r[8]])
            d[0] += 1
            d[1] += r[1] - r[0]
            d[2] += r[1] - (prev_end if prev_end is not None else r[0])
            d[3] += r[0] - prev_end if prev_end is not None else 0
            prev_end = r[1]
    total = sum(d[2] for d in kinds.values())
    print(f'  {"kernel":48} {"grid":>11} {"blk":>4} {"reg":>3} {"a step":>6} {"dur us":>7} '
          f'{"adds us":>7} {"gap us":>7} {"share":>6}')
    for k, d in sorted(kinds.items(), key=lambda kv: -kv[1][2]):
        c = d[0]
        print(f'  {k[0]:48} {k[1]:>6}x{k[2]:<4} {k[3]:>4} {d[4]:>3} {c / n:6.1f} '
              f'{d[1] / c / 1e3:7.2f} {d[2] / c / 1e3:7.2f} {d[3] / c / 1e3:7.2f} '
              f'{100 * d[2] / total:5.1f}%')


if __name__ == '__main__':
    sys.exit(main())
