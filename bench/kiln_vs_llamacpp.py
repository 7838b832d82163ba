#!/usr/bin/env python3
"""kiln against llama.cpp on the same GGUF, side by side: prefill and decode
tokens/s and their ratio (kiln / llama.cpp). Speed is compared here, never
asserted in tests.

    python3 -m venv /opt/refvenv
    /opt/refvenv/bin/pip install llama-cpp-python==0.3.36 numpy   # CPU build
    /opt/refvenv/bin/python bench/kiln_vs_llamacpp.py --kiln ./cli/kiln \
        --model ../shared/models/stories260K.gguf --backend cpu -p 128 -n 64

Both sides get the same token ids (1 + 7919 i mod n_vocab, as `kiln bench`
uses), the same prompt length and decode count, an f32 KV cache, and the
same thread count; each is run after a warm-up, and the median of --reps
repetitions is reported. For a GPU backend, give llama.cpp the same GPU
(a CUDA build of llama-cpp-python) and --n-gpu-layers.
"""
import argparse
import csv
import io
import os
import statistics
import subprocess
import time

import llama_cpp
import numpy as np


def kiln_bench(args):
    cmd = [args.kiln, "bench", "-m", args.model, "-b", args.backend, "-p", str(args.p), "-n", str(args.n),
           "-r", str(args.reps), "--csv"]
    env = dict(os.environ)
    if args.threads:
        # the cpu backend reads [cpu] threads; pass it through a config file
        path = "/tmp/kiln-bench-threads.ini"
        with open(path, "w") as f:
            f.write(f"[cpu]\nthreads = {args.threads}\n")
        cmd += ["-c", path]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    rows = list(csv.DictReader(io.StringIO(out)))
    return (statistics.median(float(r["prefill_tok_s"]) for r in rows),
            statistics.median(float(r["decode_tok_s"]) for r in rows))


def llamacpp_bench(args):
    llm = llama_cpp.Llama(model_path=args.model, n_ctx=args.p + args.n + 8, n_batch=max(args.p, 8),
                          n_threads=args.threads or os.cpu_count(), n_gpu_layers=args.n_gpu_layers,
                          type_k=0, type_v=0, verbose=False)
    n_vocab = llm.n_vocab()
    ids = [(1 + i * 7919) % n_vocab for i in range(args.p)]

    def once():
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(ids)
        t1 = time.perf_counter()
        for _ in range(args.n):
            last = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
            tok = int(np.argmax(np.ctypeslib.as_array(last, shape=(n_vocab,))))
            llm.eval([tok])
        return t1 - t0, time.perf_counter() - t1

    once()
    runs = [once() for _ in range(args.reps)]
    return (statistics.median(args.p / r[0] for r in runs),
            statistics.median(args.n / r[1] for r in runs) if args.n else 0.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", default="./cli/kiln")
    ap.add_argument("--model", required=True)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("-p", type=int, default=128)
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--n-gpu-layers", type=int, default=0)
    args = ap.parse_args()
    kp, kd = kiln_bench(args)
    lp, ld = llamacpp_bench(args)
    print(f"model {args.model}, {args.p} prompt tokens, {args.n} decoded, median of {args.reps}")
    print(f"{'':10} {'prefill tok/s':>14} {'decode tok/s':>14}")
    print(f"{'kiln/' + args.backend:10} {kp:14.1f} {kd:14.1f}")
    print(f"{'llama.cpp':10} {lp:14.1f} {ld:14.1f}")
    print(f"{'ratio':10} {kp / lp:14.3f} {kd / ld if ld else 0:14.3f}   (kiln / llama.cpp)")


if __name__ == "__main__":
    main()
