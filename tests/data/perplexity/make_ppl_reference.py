#!/usr/bin/env python3
"""Writes stories260K.ppl: llama.cpp's perplexity of stories260K over
stories.txt, as llama-perplexity computes it (tools/perplexity/
perplexity.cpp, perplexity() without --ppl-stride), through
llama-cpp-python, which carries llama.cpp's library:

    pip install llama-cpp-python==0.3.36     # CPU build from PyPI
    python3 tests/data/perplexity/make_ppl_reference.py \\
        --model ../shared/models/stories260K.gguf --out tests/data/perplexity

The method, step by step as llama-perplexity does it:
  - tokens = tokenize(text, add_bos=True, special=False), which is
    common_tokenize(ctx, text, add_special=true, parse_special=false): BOS
    when the vocabulary adds it, special-token texts left as text;
  - n_chunk = len(tokens) // n_ctx chunks of n_ctx tokens; each evaluated
    from an empty KV cache (Llama.reset) with logits for every position
    (logits_all=True), its first token replaced by BOS when add_bos;
  - in each chunk the positions j in [n_ctx // 2, n_ctx - 1) score token
    j + 1: nll = max + log(sum exp(logit - max)) - logit[token], the max in
    float, the exp in float summed in double (llama.cpp's log_softmax);
  - after each chunk, the running perplexity exp(sum nll / count) (its
    "[i]x," output); at the end PPL = exp(mean nll) and its uncertainty
    PPL * sqrt((mean(nll^2) - mean(nll)^2) / (count - 1)) ("+/-").

Two runs: llama-cpp-python's defaults (KV cache in f16, as llama-perplexity
by default; flash attention off), and the same with an f32 KV cache
(type_k = type_v = 0, GGML_TYPE_F32), which is what kiln keeps.
"""
import argparse
import hashlib
import os

import llama_cpp
import numpy as np

N_CTX = 256


def sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def perplexity(model, tokens, n_ctx, **kv):
    llm = llama_cpp.Llama(model_path=model, n_ctx=n_ctx, n_batch=n_ctx, n_ubatch=n_ctx, logits_all=True,
                          n_threads=2, verbose=False, **kv)
    vocab = llm._model.vocab
    add_bos = llama_cpp.llama_vocab_get_add_bos(vocab)
    bos = llama_cpp.llama_vocab_bos(vocab)
    n_chunk = len(tokens) // n_ctx
    first = n_ctx // 2
    nll = nll2 = 0.0
    count = 0
    running = []
    for c in range(n_chunk):
        chunk = list(tokens[c * n_ctx:(c + 1) * n_ctx])
        if add_bos:
            chunk[0] = bos
        llm.reset()
        llm.eval(chunk)
        logits = np.array(llm.scores[:n_ctx], dtype=np.float32)
        for j in range(first, n_ctx - 1):
            row = logits[j]
            m = row.max()
            s = np.sum(np.exp(row - m), dtype=np.float64)
            v = float(m) + np.log(s) - float(row[tokens[c * n_ctx + j + 1]])
            nll += v
            nll2 += v * v
            count += 1
        running.append(np.exp(nll / count))
    mean, mean2 = nll / count, nll2 / count
    ppl = np.exp(mean)
    err = ppl * np.sqrt((mean2 - mean * mean) / (count - 1))
    return n_chunk, count, ppl, err, running


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    text_path = os.path.join(a.out, "stories.txt")
    text = open(text_path, "rb").read()
    tok = llama_cpp.Llama(model_path=a.model, vocab_only=True, verbose=False)
    tokens = tok.tokenize(text, add_bos=True, special=False)
    n_chunk, count, ppl, err, running = perplexity(a.model, tokens, N_CTX)
    _, _, ppl32, err32, running32 = perplexity(a.model, tokens, N_CTX, type_k=0, type_v=0)
    lines = [
        "# stories260K.ppl: llama.cpp's perplexity of stories260K over stories.txt",
        "# Made by: python3 tests/data/perplexity/make_ppl_reference.py --model ../shared/models/stories260K.gguf "
        "--out tests/data/perplexity",
        "# with llama-cpp-python %s (PyPI, CPU build); the method is in the script's docstring" % llama_cpp.__version__,
        "# model: %s sha256 %s" % (os.path.basename(a.model), sha256(a.model)),
        "# text: stories.txt sha256 %s" % sha256(text_path),
        "n_ctx = %d" % N_CTX,
        "n_tokens = %d" % len(tokens),
        "n_chunk = %d" % n_chunk,
        "n_scored = %d" % count,
        "# llama-cpp-python's defaults: f16 KV cache (llama-perplexity's default), flash attention off",
        "ppl = %.10f" % ppl,
        "ppl_err = %.10f" % err,
        "chunks = " + " ".join("%.10f" % x for x in running),
        "# the same with an f32 KV cache (type_k = type_v = GGML_TYPE_F32), like kiln's",
        "ppl_f32kv = %.10f" % ppl32,
        "ppl_err_f32kv = %.10f" % err32,
        "chunks_f32kv = " + " ".join("%.10f" % x for x in running32),
    ]
    out = os.path.join(a.out, "stories260K.ppl")
    with open(out, "w", newline="\n") as f:
        f.write("\n".join(lines) + "\n")
    print("%s: PPL = %.4f +/- %.5f (f16 KV), %.4f +/- %.5f (f32 KV)" % (out, ppl, err, ppl32, err32))


if __name__ == "__main__":
    main()
