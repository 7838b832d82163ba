#!/usr/bin/env python3
"""Writes a kiln golden file: greedy continuations computed by llama.cpp.

How the committed files were made (CPU, this exact command):
    python3 -m venv /opt/refvenv
    /opt/refvenv/bin/pip install llama-cpp-python==0.3.36 numpy
      (pip builds llama.cpp from source; CMAKE_ARGS="-DGGML_NATIVE=OFF")
    /opt/refvenv/bin/python tests/golden/make_golden.py \
        ../shared/models/stories260K.gguf 64 > tests/golden/stories260K.golden

The reference runs with an f32 KV cache (type_k = type_v = F32):
llama.cpp's default f16 cache moves these logits by ~1e-3.

Greedy decoding is done here, not by llama.cpp's sampler: after each eval
the argmax of the last position's logits is the next token, so nothing but
llama.cpp's forward pass and tokenizer decides the ids. `top` records the
five largest logits after the prompt, for a numeric check with tolerance.
"""
import sys

import llama_cpp
import numpy as np

PROMPTS = [
    ("once-upon", "Once upon a time"),
    ("little-dog", "The little dog"),
    ("lily-wanted", "Lily wanted to"),
]


def esc(s):
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")


def wrapped(key, pieces):
    """key = first piece, the rest on indented continuation lines: inih
    reads lines of at most 199 bytes, and kiln's golden reader appends
    continuation lines to the value."""
    lines = [f"{key} = {pieces[0]}"] + [f"    {p}" for p in pieces[1:]]
    return "\n".join(lines)


def str_pieces(s, width=60):
    return ['"' + esc(s[i:i + width]) + '"' for i in range(0, max(len(s), 1), width)] or ['""']


def id_pieces(ids, per_line=16):
    return [" ".join(map(str, ids[i:i + per_line])) for i in range(0, len(ids), per_line)]


def main():
    model, n = sys.argv[1], int(sys.argv[2])
    llm = llama_cpp.Llama(model_path=model, n_ctx=512, n_batch=512, logits_all=True, verbose=False, n_threads=1,
                          type_k=0, type_v=0)  # f32 KV cache (llama.cpp defaults to f16)
    name = model.rsplit("/", 1)[-1]
    print(f"; kiln golden set for {name}: greedy continuations by llama.cpp")
    print(f"; made by tests/golden/make_golden.py with llama-cpp-python {llama_cpp.__version__}")
    print("; (llama.cpp built from source by pip, CPU, n_threads=1, f32 KV cache); see that script.")
    print("; Each [case]: the prompt, raw (no chat template), BOS added as the model says;")
    print("; prompt_ids and ids are llama.cpp's; top = the 5 largest logits after the prompt.")
    for key, prompt in PROMPTS:
        toks = llm.tokenize(prompt.encode(), add_bos=True, special=False)
        llm.reset()
        llm.eval(toks)
        first = np.array(llm.eval_logits[-1], dtype=np.float32)
        top = np.argsort(-first, kind="stable")[:5]
        out = []
        for _ in range(n):
            logits = np.array(llm.eval_logits[-1], dtype=np.float32)
            t = int(np.argmax(logits))
            out.append(t)
            if t == llm.token_eos():
                break
            llm.eval([t])
        text = llm.detokenize(out).decode("utf-8", "replace")
        print()
        print(f"[{key}]")
        print(wrapped("prompt", str_pieces(prompt)))
        print("chat = false")
        print(f"n = {n}")
        print(wrapped("prompt_ids", id_pieces(toks)))
        print(wrapped("ids", id_pieces(out)))
        print(wrapped("text", str_pieces(text)))
        print("top = " + " ".join(f"{int(i)}:{float(first[i]):.9g}" for i in top))


if __name__ == "__main__":
    main()
