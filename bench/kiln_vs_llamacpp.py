#!/usr/bin/env python3
"""kiln against llama.cpp on the same GGUF, side by side: prefill and decode
tokens/s and their ratio (kiln / llama.cpp). Speed is compared here, never
asserted in tests.

    python3 -m venv /opt/refvenv
    /opt/refvenv/bin/pip install llama-cpp-python==0.3.36   # CPU build
    /opt/refvenv/bin/python bench/kiln_vs_llamacpp.py --kiln ./cli/kiln \
        --model ../shared/models/stories260K.gguf --backend cpu -p 128 -n 64

Both sides run llama-bench's two tests, as `kiln bench` does: ppN, the
time to prefill N prompt tokens, and tgN, N single-token decode steps, each
from an empty KV cache (after -d tokens of depth when given, not timed).
They get the same token ids (1 + 7919 i mod n_vocab, as `kiln bench`
uses), an f32 KV cache and the same thread count; each test runs after a
warm-up, and the median of --reps repetitions is reported. For a GPU
backend, give llama.cpp the same GPU (a CUDA build of llama-cpp-python)
and --n-gpu-layers.
"""
import argparse
import json
import os
import statistics
import subprocess
import time

import llama_cpp


def kiln_bench(args):
    cmd = [args.kiln, "bench", "-m", args.model, "-B", args.backend, "-p", str(args.p), "-n", str(args.n),
           "-d", str(args.d), "-r", str(args.reps), "-o", "json"]
    if args.threads:
        cmd += ["-t", str(args.threads)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    tests = {t["n_prompt"] and "pp" or "tg": t for t in json.loads(out)}
    median = lambda t: statistics.median(t["samples_ts"])
    return (median(tests["pp"]) if "pp" in tests else 0.0, median(tests["tg"]) if "tg" in tests else 0.0)


def llamacpp_bench(args):
    longest = args.d + max(args.p, args.n)
    llm = llama_cpp.Llama(model_path=args.model, n_ctx=longest + 8, n_batch=max(args.p, args.d, 8),
                          n_threads=args.threads or os.cpu_count(), n_gpu_layers=args.n_gpu_layers,
                          type_k=0, type_v=0, verbose=False)
    n_vocab = llm.n_vocab()
    ids = [(1 + i * 7919) % n_vocab for i in range(longest)]

    def depth():
        llm.reset()
        if args.d:
            llm.eval(ids[:args.d])

    def pp():
        depth()
        t0 = time.perf_counter()
        llm.eval(ids[args.d:args.d + args.p])
        return time.perf_counter() - t0

    def tg():
        depth()
        t0 = time.perf_counter()
        for i in range(args.n):
            llm.eval([ids[args.d + i]])
        return time.perf_counter() - t0

    result = []
    for test, n in ((pp, args.p), (tg, args.n)):
        if not n:
            result.append(0.0)
            continue
        test()
        result.append(statistics.median(n / test() for _ in range(args.reps)))
    return tuple(result)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", default="./cli/kiln")
    ap.add_argument("--model", required=True)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("-p", type=int, default=128)
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("-d", type=int, default=0, help="tokens in the KV cache before each test (not timed)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--n-gpu-layers", type=int, default=0)
    args = ap.parse_args()
    kp, kd = kiln_bench(args)
    lp, ld = llamacpp_bench(args)
    print(f"model {args.model}, pp{args.p} and tg{args.n} at depth {args.d}, median of {args.reps}")
    print(f"{'':10} {'pp t/s':>14} {'tg t/s':>14}")
    print(f"{'kiln/' + args.backend:10} {kp:14.1f} {kd:14.1f}")
    print(f"{'llama.cpp':10} {lp:14.1f} {ld:14.1f}")
    print(f"{'ratio':10} {kp / lp if lp else 0:14.3f} {kd / ld if ld else 0:14.3f}   (kiln / llama.cpp)")


if __name__ == "__main__":
    main()
