#!/usr/bin/env python3
"""Writes the expected-id files in this folder from reference tokenizers.

Run from the repository root with the reference venv:

    /opt/refvenv/bin/python tests/data/tokenizer/gen_ids.py \
        --models ../shared/models --tokenizers ../shared/tokenizers \
        --out tests/data/tokenizer

References: llama.cpp through llama-cpp-python (Llama(model_path=...,
vocab_only=True).tokenize(text_bytes, add_bos=..., special=...)), and for
Qwen also Hugging Face `tokenizers` loading tokenizer.json. Every output
file starts with a comment block saying which file, which command and
which versions produced it.

File format (read by tests/unit/tokenizer_cases.c), one case per line:

    FLAGS <TAB> INPUT-HEX <TAB> IDS <TAB> DECODED-HEX <TAB> # NOTE

FLAGS is "-" or letters: b = add BOS (kiln: KILN_TOKENIZE_ADD_BOS;
llama.cpp: add_bos=True), s = parse special tokens (kiln:
KILN_TOKENIZE_PARSE_SPECIAL; llama.cpp: special=True). INPUT-HEX is the
input's bytes in hex (empty for the empty text). IDS is llama.cpp's ids,
space-separated (empty when none). DECODED-HEX is llama.cpp's
llama_detokenize(vocab, IDS, remove_special=False, unparse_special='s' in
FLAGS) in hex. NOTE is the input's Python repr and,
for Qwen, where Hugging Face gives other ids, what it gives. Lines
starting with '#' are comments.
"""
import argparse
import ctypes
import hashlib
import os
import struct
import sys
import tempfile

import llama_cpp
import tokenizers

try:
    from importlib.metadata import version as _pkg_version
except ImportError:  # pragma: no cover
    _pkg_version = None


def pkg_version(name):
    try:
        return _pkg_version(name) if _pkg_version else "?"
    except Exception:
        return "?"


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# ---- inputs -------------------------------------------------------------

LONG_EN = (
    "Tokenizers turn text into numbers. A byte-level BPE tokenizer first cuts the text "
    "into words with a regular expression, then merges bytes pairwise by rank. "
    "Numbers like 1234567 are split digit by digit in Qwen, while words such as "
    "\"internationalization\" become a handful of pieces. Whitespace matters:  two spaces,\n"
    "\tand tabs,\r\nand Windows line endings all tokenize differently. "
)

STORIES = [
    ("b", "Once upon a time"),
    ("-", "Once upon a time"),
    ("b", "Once upon a time, there was a little girl named Lily."),
    ("b", "Tom and Lily were friends. They liked to play in the park."),
    ("b", "She said, \"Let's play!\" He said, \"No.\""),
    ("-", ""),
    ("b", ""),
    ("-", " "),
    ("-", "  "),
    ("-", "   "),
    ("-", "\n"),
    ("-", "\n\n"),
    ("-", "\t"),
    ("-", " Hello"),
    ("-", "Hello world"),
    ("-", "The cat sat on the mat."),
    ("-", "123"),
    ("-", "2024-06-01 3.14"),
    ("-", "a  b   c    d"),
    ("-", "line one\nline two\n\nline four"),
    ("-", "\t tab"),
    ("-", "ALL CAPS AND under_score"),
    ("-", "It's a dog's life, isn't it?"),
    ("-", "!!!???..."),
    ("-", "naïve café"),
    ("-", "Ünïcödé"),
    ("-", "日本語"),
    ("-", "🙂🦙"),
    ("-", "Привет"),
    ("-", "<s>"),
    ("-", "</s> and <unk>"),
    ("s", "<s>Once upon"),
    ("s", "Once</s>upon<unk>a"),
    ("bs", "<s>"),
    ("-", "trailing space "),
    ("-", "x\x00y"),
    ("-", b"bad \xff\xfe bytes \xc3("),
    ("-", b"\x80\x80"),
]

LLAMA_SPM_EXTRA = [
    ("b", "Hello world"),
    ("b", ""),
    ("b", " Hello"),
    ("s", "<s>Hello</s>"),
    ("s", "[INST] Hi [/INST]"),
    ("bs", "<unk><s></s>"),
    ("-", "<s>"),
    ("-", "<0x0A>"),
    ("-", "A\u00a0B\u3000C"),
    ("-", "e\u0301 vs \u00e9"),
    ("-", "\u0085\u2028\u2029"),
    ("-", "x\x00y\x01z"),
    ("-", b"invalid \xff\xfe\xfd utf8 \xe2\x82"),
    ("-", b"\xc3"),
    ("-", "    def f(x):\n        return x\n"),
    ("-", LONG_EN),
]

QWEN = [
    # English and whitespace
    ("-", "Hello world"),
    ("-", "Hello, world!"),
    ("-", "The quick brown fox jumps over the lazy dog."),
    ("-", " leading space"),
    ("-", "trailing space "),
    ("-", "  two leading spaces"),
    ("-", "multiple   spaces   inside"),
    ("-", "tabs\tand\t\ttabs"),
    ("-", "line1\nline2"),
    ("-", "para1\n\npara2\n\n\n"),
    ("-", "\n"),
    ("-", "\n\n\n"),
    ("-", " "),
    ("-", "   "),
    ("-", "\r\n windows\r\n"),
    ("-", " \n "),
    ("-", "a \t \n b"),
    ("-", "    indented code"),
    # contractions
    ("-", "I'm sure you're right, it's what we've done and they'll say he'd go."),
    ("-", "I'M SURE YOU'RE RIGHT, IT'S DONE"),
    ("-", "don't won't can't shouldn't've"),
    ("-", "'s 're 've 'm 'll 'd 't"),
    ("-", "rock 'n' roll"),
    # numbers
    ("-", "12345"),
    ("-", "3.14159"),
    ("-", "1,234,567.89"),
    ("-", "2024-06-01T12:30:00Z"),
    ("-", "phone: +1 (555) 010-9999"),
    ("-", "x = 10**9 + 7"),
    ("-", "0x1F 0b1010 1e-6"),
    ("-", "٣٤٥ ໓໔ ①②③ Ⅻ"),
    # code
    ("-", "def f(x):\n    return x * 2\n"),
    ("-", "for (int i = 0; i < n; ++i) { sum += a[i]; }"),
    ("-", "{\"key\": [1, 2, 3], \"ok\": true, \"none\": null}"),
    ("-", "<div class=\"a\">Hi &amp; bye</div>"),
    ("-", "SELECT * FROM users WHERE id = 42;"),
    ("-", "#include <stdio.h>\nint main(void) { return 0; }"),
    ("-", "https://example.com/path?q=1&r=two#frag"),
    ("-", "a_b-c.d/e\\f|g~h^i"),
    # CJK
    ("-", "我想在apple工作1314151天～"),
    ("-", "你好，世界！"),
    ("-", "日本語のテキストです。カタカナ"),
    ("-", "한국어 텍스트입니다"),
    ("-", "混合English和中文text"),
    # emoji
    ("-", "🦙🚀✅"),
    ("-", "👨\u200d👩\u200d👧\u200d👦 family"),
    ("-", "🇺🇸🇯🇵"),
    ("-", "👍🏽 ok ❤️"),
    ("-", "🚀 (normal) 😶\u200d🌫️ (multiple emojis concatenated) ✅"),
    # accented Latin
    ("-", "café naïve résumé"),
    ("-", "Ångström Øresund Łódź"),
    ("-", "Crème brûlée, Straße, groß"),
    ("-", "e\u0301 and a\u0308 (decomposed)"),
    ("-", "Tiếng Việt có dấu"),
    ("-", "ﬁ ligature ﬀ"),
    # other scripts
    ("-", "Привет, мир!"),
    ("-", "Γειά σου Κόσμε"),
    ("-", "مرحبا بالعالم"),
    ("-", "שלום עולם"),
    ("-", "नमस्ते दुनिया"),
    ("-", "สวัสดีชาวโลก"),
    ("-", "ქართული ენა"),
    ("-", "ⴰⵣⵓⵍ ᚠᚢᚦ"),
    # unusual whitespace and controls
    ("-", "a\u00a0b"),
    ("-", "a\u3000b"),
    ("-", "a\u2009b\u202fc"),
    ("-", "a\u0085b"),
    ("-", "a \u0085 b"),
    ("-", "\u200b zero width"),
    ("-", "x\x00y\x1fz"),
    ("-", "\ufeffBOM"),
    # punctuation and symbols
    ("-", "!!!???...,,,"),
    ("-", "\u2014\u2013-\u2010"),
    ("-", "\u201cquotes\u201d \u2018single\u2019"),
    ("-", "\u2211\u222b\u221a\u221e\u2260\u2264"),
    ("-", "\u2115 \u2124 \u211a \u211d"),
    # chat markup
    ("s", "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"),
    ("s", "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"),
    ("s", "<|endoftext|>"),
    ("s", "text<|im_end|>more<|im_start|>"),
    ("s", "no special tokens here"),
    ("-", "<|im_start|>user"),
    # "</s>" is an ordinary BPE token in Qwen2's vocabulary, but llama.cpp
    # treats it as an end-of-generation token (CONTROL) by its text
    ("s", "end</s>of text"),
    ("-", "end</s>of text"),
    # longer text
    ("-", LONG_EN),
    ("-", LONG_EN * 3),
]

QWEN35 = [
    ("-", "Hello world"),
    ("-", "12345 1,234.5"),
    ("-", "I'm sure you're right"),
    ("-", "e\u0301 and a\u0308 (decomposed)"),
    ("-", "नमस्ते दुनिया"),
    ("-", "สวัสดีชาวโลก"),
    ("-", "Tiếng Việt có dấu"),
    ("-", "我想在apple工作1314151天～"),
    ("-", "def f(x):\n    return x * 2\n"),
    ("-", "multiple   spaces\n\n\nnewlines"),
    ("-", "🚀 (normal) 😶\u200d🌫️ ✅"),
    ("s", "<|im_start|>user\nHi<|im_end|>\n"),
    ("-", LONG_EN),
]


def as_bytes(t):
    return t if isinstance(t, bytes) else t.encode("utf-8")


def fmt_line(flags, data, ids, decoded, note):
    return "%s\t%s\t%s\t%s\t# %s" % (flags, data.hex(), " ".join(str(i) for i in ids), decoded.hex(), note)


def detokenize(tok, ids, special):
    """llama.cpp's own llama_detokenize (not llama-cpp-python's wrapper)."""
    arr = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
    cap = 64 + 16 * len(ids)
    while True:
        buf = ctypes.create_string_buffer(cap)
        n = llama_cpp.llama_detokenize(tok._model.vocab, arr, len(ids), buf, cap, False, special)
        if n >= 0:
            return buf.raw[:n]
        cap = -n + 1


def patch_pre(src, dst, pre):
    """Copies a GGUF with no tensors, giving tokenizer.ggml.pre another value
    (the file ends after its key/values, so the rest may shift)."""
    data = open(src, "rb").read()
    key = b"tokenizer.ggml.pre"
    at = data.index(struct.pack("<Q", len(key)) + key) + 8 + len(key)
    assert struct.unpack_from("<I", data, at)[0] == 8  # GGUF string
    n = struct.unpack_from("<Q", data, at + 4)[0]
    value = pre.encode()
    data = data[: at + 4] + struct.pack("<Q", len(value)) + value + data[at + 12 + n :]
    open(dst, "wb").write(data)


def header(path_out, what, model_path, extra):
    lines = [
        "# %s" % os.path.basename(path_out),
        "# %s" % what,
        "# Made by: /opt/refvenv/bin/python tests/data/tokenizer/gen_ids.py "
        "--models ../shared/models --tokenizers ../shared/tokenizers --out tests/data/tokenizer",
        "# Reference: llama-cpp-python %s (llama.cpp built into it), "
        "Llama(model_path, vocab_only=True).tokenize(bytes, add_bos='b' in FLAGS, special='s' in FLAGS)"
        % llama_cpp.__version__,
        "# Decoded: llama_cpp.llama_detokenize(vocab, IDS, remove_special=False, unparse_special='s' in FLAGS)",
        "# Model: %s sha256 %s" % (os.path.basename(model_path), sha256(model_path)),
    ]
    lines += ["# " + e for e in extra]
    lines.append("# Format: FLAGS<TAB>INPUT-HEX<TAB>IDS<TAB>DECODED-HEX<TAB># NOTE (see gen_ids.py)")
    return lines


def llama(model_path):
    return llama_cpp.Llama(model_path=model_path, vocab_only=True, verbose=False)


def gen_llama_file(out_path, what, model_path, cases, extra=()):
    tok = llama(model_path)
    lines = header(out_path, what, model_path, list(extra))
    for flags, text in cases:
        data = as_bytes(text)
        ids = tok.tokenize(data, add_bos="b" in flags, special="s" in flags)
        lines.append(fmt_line(flags, data, ids, detokenize(tok, ids, "s" in flags), repr(text)))
    with open(out_path, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines) + "\n")
    return len(cases)


def gen_qwen(out_path, model_path, tokenizer_json):
    tok = llama(model_path)
    hf = tokenizers.Tokenizer.from_file(tokenizer_json)
    extra = [
        "Cross-check: Hugging Face tokenizers %s, Tokenizer.from_file(%s).encode(text, "
        "add_special_tokens=False).ids" % (tokenizers.__version__, os.path.basename(tokenizer_json)),
        "tokenizer.json sha256 %s" % sha256(tokenizer_json),
        "IDS are llama.cpp's. Where Hugging Face differs the NOTE says 'HF differs' and gives its",
        "ids: Hugging Face applies NFC first (llama.cpp does not), it cuts added tokens such",
        "as <|im_start|> out of any text (llama.cpp only with special=True), and llama.cpp treats",
        "the ordinary token \"</s>\" as a special one (it is on its end-of-generation list).",
    ]
    lines = header(out_path, "Qwen2 byte-level BPE (tokenizer.ggml.pre = qwen2)", model_path, extra)
    n_diff = 0
    for flags, text in QWEN:
        data = as_bytes(text)
        ids = tok.tokenize(data, add_bos="b" in flags, special="s" in flags)
        hf_ids = hf.encode(text, add_special_tokens=False).ids
        note = repr(text)
        if list(ids) != list(hf_ids):
            n_diff += 1
            note += " ; HF differs: " + " ".join(str(i) for i in hf_ids)
        lines.append(fmt_line(flags, data, ids, detokenize(tok, ids, "s" in flags), note))
    with open(out_path, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines) + "\n")
    return len(QWEN), n_diff


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", required=True)
    ap.add_argument("--tokenizers", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    m = lambda name: os.path.join(a.models, name)
    n = gen_llama_file(os.path.join(a.out, "stories260k.ids"),
                       "SentencePiece, 512-token TinyStories vocabulary", m("stories260K.gguf"), STORIES)
    print("stories260k.ids: %d cases" % n)
    n = gen_llama_file(os.path.join(a.out, "llama_spm_extra.ids"),
                       "SentencePiece, Llama 2 vocabulary: cases beyond llama.cpp's own .inp/.out "
                       "(BOS, special tokens, invalid UTF-8)", m("ggml-vocab-llama-spm.gguf"), LLAMA_SPM_EXTRA)
    print("llama_spm_extra.ids: %d cases" % n)
    n, d = gen_qwen(os.path.join(a.out, "qwen2.ids"), m("ggml-vocab-qwen2.gguf"),
                    os.path.join(a.tokenizers, "qwen", "tokenizer.json"))
    print("qwen2.ids: %d cases, %d where Hugging Face differs" % (n, d))
    n = gen_llama_file(os.path.join(a.out, "qwen35.ids"), "Qwen3.5 byte-level BPE (tokenizer.ggml.pre = qwen35)",
                       m("ggml-vocab-qwen35.gguf"), QWEN35)
    print("qwen35.ids: %d cases" % n)
    # The other pre-tokenizers, on Qwen2's vocabulary and merges: the model
    # file with only tokenizer.ggml.pre changed (the C tests make the same
    # file with kiln_gguf_writer).
    with tempfile.TemporaryDirectory() as tmp:
        for pre, name in (("gpt-2", "qwen2_as_gpt2.ids"), ("llama-bpe", "qwen2_as_llama3.ids"),
                          ("default", "qwen2_as_default.ids")):
            path = os.path.join(tmp, "ggml-vocab-qwen2-%s.gguf" % pre)
            patch_pre(m("ggml-vocab-qwen2.gguf"), path, pre)
            n = gen_llama_file(os.path.join(a.out, name),
                               "Qwen2's vocabulary with tokenizer.ggml.pre = %s: the %s pre-tokenizer" % (pre, pre),
                               path, QWEN,
                               extra=["Model file: ggml-vocab-qwen2.gguf (sha256 %s) with tokenizer.ggml.pre "
                                      "rewritten to \"%s\" by patch_pre() in gen_ids.py" % (sha256(m("ggml-vocab-qwen2.gguf")), pre)])
            print("%s: %d cases" % (name, n))


if __name__ == "__main__":
    sys.exit(main())
