#!/usr/bin/env python3
"""Writes qwen2_special_hf.ids: ChatML prompts typed by hand, tokenized by
Hugging Face `tokenizers` from Qwen's tokenizer.json, with its special
tokens parsed (what kiln's raw prompts do by default, as llama.cpp's tools)
and kept as text (kiln's --no-special).

Run from the repository root:

    pip install tokenizers        # 0.23.3 made the committed file
    python3 tests/data/tokenizer/gen_special_ids.py \\
        --tokenizers ../shared/tokenizers --out tests/data/tokenizer

Format: that of gen_ids.py (FLAGS<TAB>INPUT-HEX<TAB>IDS<TAB>DECODED-HEX<TAB>#
NOTE). FLAGS "s": Tokenizer.encode(text, add_special_tokens=False), which
cuts the added tokens (<|im_start|> ...) out of the text; "-": the same
with Tokenizer.encode_special_tokens = True, which keeps them text.
DECODED-HEX: Tokenizer.decode(ids, skip_special_tokens=False). Qwen adds
no BOS, so no case has one.
"""
import argparse
import hashlib
import os

import tokenizers

PROMPTS = [
    # the prompt of the seed defect's runs (tools/device/acceptance.sh)
    ("seed", "<|im_start|>user\nWhat is the capital of France? Answer briefly.<|im_end|>\n"
             "<|im_start|>assistant\n"),
    # issue 11's example
    ("issue", "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"),
    ("system", "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
               "Count to three.<|im_end|>\n<|im_start|>assistant\nOne, two, three.<|im_end|>\n"),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokenizers", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    path = os.path.join(a.tokenizers, "qwen", "tokenizer.json")
    sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
    tok = tokenizers.Tokenizer.from_file(path)
    lines = [
        "# qwen2_special_hf.ids",
        "# ChatML prompts typed by hand: ids with special tokens parsed (s) and kept as text (-)",
        "# Made by: python3 tests/data/tokenizer/gen_special_ids.py --tokenizers ../shared/tokenizers "
        "--out tests/data/tokenizer",
        "# Reference: Hugging Face tokenizers %s, Tokenizer.from_file(tokenizer.json).encode(text, "
        "add_special_tokens=False).ids; '-' with encode_special_tokens = True" % tokenizers.__version__,
        "# tokenizer.json sha256 %s" % sha,
        "# Decoded: Tokenizer.decode(ids, skip_special_tokens=False)",
        "# Format: FLAGS<TAB>INPUT-HEX<TAB>IDS<TAB>DECODED-HEX<TAB># NOTE (see gen_ids.py)",
    ]
    for name, text in PROMPTS:
        for flags, as_text in (("s", False), ("-", True)):
            tok.encode_special_tokens = as_text
            ids = tok.encode(text, add_special_tokens=False).ids
            decoded = tok.decode(ids, skip_special_tokens=False).encode("utf-8")
            lines.append("%s\t%s\t%s\t%s\t# %s %r" % (flags, text.encode().hex(), " ".join(map(str, ids)),
                                                     decoded.hex(), name, text))
    tok.encode_special_tokens = False
    out = os.path.join(a.out, "qwen2_special_hf.ids")
    with open(out, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines) + "\n")
    print("%s: %d cases" % (out, 2 * len(PROMPTS)))


if __name__ == "__main__":
    main()
