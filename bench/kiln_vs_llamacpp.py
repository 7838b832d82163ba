#!/usr/bin/env python3
"""kiln against llama.cpp on the same GGUF files, side by side: prefill and
decode tokens/s and their ratio (kiln / llama.cpp). Speed is compared here,
never asserted in tests.

    pip install llama-cpp-python==0.3.36 numpy        # its CPU build
    # the Qwen2.5-0.5B-shaped models (F16 from kiln synth, Q8_0 and Q4_K_M
    # from llama.cpp's quantizer), written to DIR, never to the repository:
    python3 bench/kiln_vs_llamacpp.py --make-models /tmp/kiln-bench \\
        --kiln ./cli/kiln --vocab ../shared/models/ggml-vocab-qwen2.gguf
    python3 bench/kiln_vs_llamacpp.py --kiln ./cli/kiln --threads 2 -p 128 -n 64 --pairs 5 \\
        --model /tmp/kiln-bench/q05b-q8_0.gguf --model /tmp/kiln-bench/q05b-q4_k_m.gguf \\
        --model ../shared/models/stories260K.gguf

Both sides run llama-bench's two tests, as `kiln bench` does: ppN, the
time to prefill N prompt tokens (llama.cpp in one batch; kiln in
micro-batches of --batch, default N, so one as well), and tgN, N
single-token decode steps, each from an empty KV cache (after -d tokens of
depth when given, not timed); every timed eval computes the logits of its
last token. They get the same token ids (1 + 7919 i mod n_vocab, as `kiln
bench` uses), an f32 KV cache and the same thread count (kiln [cpu]
threads; llama.cpp n_threads and n_threads_batch).

How it runs: for each model, --pairs times, one `kiln bench` process and
then one llama.cpp process (this script with --llama-side), each doing a
warm-up and then --reps timed runs of each test, alternately, so that a
change in the machine's speed during the comparison (it may be shared)
reaches both sides alike. Each pair gives a ratio per test; the median of
the pairs' ratios is reported with their range, beside the median tokens/s
of each side and the load average when the model's pairs ended. For a GPU
backend give llama.cpp the same GPU (a CUDA build of llama-cpp-python) and
--n-gpu-layers.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def bench_ids(n_vocab, n):
    return [(1 + i * 7919) % n_vocab for i in range(n)]


def llama_side(args):
    """One llama.cpp process: each test after a warm-up, --reps times; prints JSON."""
    import llama_cpp

    longest = args.d + max(args.p, args.n)
    n_threads = args.threads or os.cpu_count()
    llm = llama_cpp.Llama(model_path=args.model[0], n_ctx=longest + 8, n_batch=max(args.p, args.d, 8),
                          n_ubatch=max(args.p, args.d, 8), n_threads=n_threads, n_threads_batch=n_threads,
                          n_gpu_layers=args.n_gpu_layers, type_k=0, type_v=0, verbose=False)
    ids = bench_ids(llm.n_vocab(), longest)

    def depth():
        llm.reset()
        if args.d:
            llm.eval(ids[:args.d])

    def pp():  # Llama.eval asks for the last token's logits only
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

    out = {}
    for name, test, n in (("pp", pp, args.p), ("tg", tg, args.n)):
        if n:
            test()
            out[name] = [n / test() for _ in range(args.reps)]
    print(json.dumps(out))


def kiln_once(args, model):
    cmd = [args.kiln, "bench", "-m", model, "-B", args.backend, "-p", str(args.p), "-n", str(args.n),
           "-d", str(args.d), "-r", str(args.reps), "-b", str(args.batch or max(args.p, 1)), "-o", "json"]
    if args.threads:
        cmd += ["-t", str(args.threads)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return {("pp" if t["n_prompt"] else "tg"): t["samples_ts"] for t in json.loads(out)}


def llama_once(args, model):
    cmd = [sys.executable, os.path.abspath(__file__), "--llama-side", "--model", model, "-p", str(args.p),
           "-n", str(args.n), "-d", str(args.d), "--reps", str(args.reps), "--threads", str(args.threads),
           "--n-gpu-layers", str(args.n_gpu_layers)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def summary(xs):
    return f"{statistics.median(xs):9.2f} ({min(xs):.2f}..{max(xs):.2f})" if xs else ""


def compare(args, model):
    tests = [t for t, n in (("pp", args.p), ("tg", args.n)) if n]
    kiln = {t: [] for t in tests}
    llama = {t: [] for t in tests}
    ratio = {t: [] for t in tests}
    for _ in range(args.pairs):
        a = kiln_once(args, model)
        b = llama_once(args, model)
        for t in tests:
            kiln[t] += a[t]
            llama[t] += b[t]
            ratio[t].append(statistics.median(a[t]) / statistics.median(b[t]))
    names = {"pp": f"pp{args.p}", "tg": f"tg{args.n}"}
    depth = f" at depth {args.d}" if args.d else ""
    print(f"model {model}: {' and '.join(names[t] for t in tests)}{depth}, "
          f"{args.threads or os.cpu_count()} threads, {args.pairs} pairs of processes x {args.reps} run(s); "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"  {'':16}" + "".join(f" {names[t] + ' t/s, median (min..max)':>34}" for t in tests))
    for label, d in ((f"kiln/{args.backend}", kiln), ("llama.cpp", llama), ("ratio, per pair", ratio)):
        print(f"  {label:16}" + "".join(f" {summary(d[t]):>34}" for t in tests))
    print("  (ratio = kiln / llama.cpp)")
    sys.stdout.flush()


def make_models(args):
    """The Qwen2.5-0.5B shape: 24 layers, hidden 896, 14/2 heads of 64, ff 4864,
    the real Qwen2 vocabulary (151936), tied output; F16 from kiln synth, then
    Q8_0 and Q4_K_M with llama.cpp's quantizer (llama_model_quantize)."""
    import llama_cpp

    os.makedirs(args.make_models, exist_ok=True)
    f16 = os.path.join(args.make_models, "q05b-f16.gguf")
    if not os.path.exists(f16):
        subprocess.run([args.kiln, "synth", "--arch", "qwen2", "--layers", "24", "--embd", "896", "--ff", "4864",
                        "--heads", "14", "--heads-kv", "2", "--ctx", "4096", "--type", "F16", "--embd-type", "F16",
                        "--tied", "--vocab-from", args.vocab, "--seed", "1", "-o", f16], check=True)
    for name, ftype in (("q8_0", llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0), ("q4_k_m", llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M)):
        out = os.path.join(args.make_models, f"q05b-{name}.gguf")
        if os.path.exists(out):
            continue
        p = llama_cpp.llama_model_quantize_default_params()
        p.ftype = ftype
        if llama_cpp.llama_model_quantize(f16.encode(), out.encode(), p) != 0:
            sys.exit(f"llama_model_quantize failed for {out}")
    print(f"models in {args.make_models}: q05b-f16.gguf, q05b-q8_0.gguf, q05b-q4_k_m.gguf")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", default="./cli/kiln")
    ap.add_argument("--model", action="append", default=[], help="a GGUF file; repeat for several")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("-p", type=int, default=128)
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("-d", type=int, default=0, help="tokens in the KV cache before each test (not timed)")
    ap.add_argument("--batch", type=int, default=0, help="kiln's prefill micro-batch (default: -p, one batch)")
    ap.add_argument("--reps", type=int, default=3, help="timed runs of each test per process, after a warm-up")
    ap.add_argument("--pairs", type=int, default=5, help="kiln / llama.cpp process pairs per model")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--n-gpu-layers", type=int, default=0)
    ap.add_argument("--make-models", metavar="DIR", help="write the 0.5B-shaped models to DIR and exit")
    ap.add_argument("--vocab", default="../shared/models/ggml-vocab-qwen2.gguf")
    ap.add_argument("--llama-side", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.llama_side:
        return llama_side(args)
    if args.make_models:
        return make_models(args)
    if not args.model:
        ap.error("give --model (or --make-models DIR)")
    for m in args.model:
        compare(args, m)


if __name__ == "__main__":
    main()
