#!/usr/bin/env python3
"""Writes tests/golden/qwen35-tiny.golden: greedy continuations of a tiny
random Qwen3.5 computed by transformers in float64.

The model. `kiln synth` writes it from the flags in qwen35-tiny.synth
(seeded weights, the vocabulary of ../shared/models/ggml-vocab-qwen35.gguf),
so `make check` regenerates the identical file and nothing large is
committed. This script then
  1. turns that GGUF into a transformers checkpoint: a Qwen3_5ForCausalLM
     built from a Qwen3_5TextConfig of the same shape, with the weights
     mapped back through the inverse of llama.cpp's conversion (offset
     norms w - 1, A_log = log(-ssm_a), value heads from tiled to grouped,
     the conv kernel unsqueezed);
  2. converts that checkpoint with llama.cpp's own convert_hf_to_gguf.py
     (llama-cpp-python 0.3.36's sdist, vendor/llama.cpp) and requires the
     result to equal kiln's file: every qwen35.* and tokenizer.* key, and
     every tensor's name, type, shape and bytes. So the file the test runs
     is, bit for bit, what llama.cpp's converter makes of a transformers
     Qwen3.5. (The converter's vocabulary step is given
     ggml-vocab-qwen35.gguf's tokenizer.* keys: Qwen3.5's HF tokenizer files
     are not in this workplace; that GGUF is llama.cpp's own conversion of
     them, pre-tokenizer qwen35.)
  3. runs the checkpoint in transformers in float64 (every float32 cast in
     modeling_qwen3_5 made float64, A_log = log(-ssm_a) in double; eager
     attention; no cache: each step recomputes the whole sequence with the
     chunked delta rule), greedy, for each prompt;
  4. tokenizes the prompts and detokenizes the outputs with llama.cpp
     (llama-cpp-python, vocab-only), and, as a cross-check printed to
     stderr, runs llama.cpp's own forward on the converted file.

How the committed file was made (CPU; this workplace, 2 cores):
    python3 -m venv /tmp/q35venv
    /tmp/q35venv/bin/pip install torch transformers safetensors numpy sentencepiece
      (torch 2.15.0, transformers 5.24.0 from PyPI)
    pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36   # the sdist, unpacked in /tmp/q35src
    python3 -m pip install llama-cpp-python==0.3.36                      # system python3: tokenizer, cross-check
    /tmp/q35venv/bin/python tests/golden/make_golden_qwen35.py \\
        --kiln ./cli/kiln --vocab ../shared/models/ggml-vocab-qwen35.gguf \\
        --llama-cpp /tmp/q35src/llama_cpp_python-0.3.36/vendor/llama.cpp \\
        --work /tmp/q35golden > tests/golden/qwen35-tiny.golden
"""
import argparse
import json
import math
import os
import runpy
import subprocess
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))

# (name, text, chat): ChatML, plain English, mixed scripts, and one longer
# than the delta rule's 64-token chunk.
PROMPTS = [
    ("chatml-capital", "What is the capital of France? Answer briefly.", True),
    ("plain-english", "The quick brown fox jumps over the lazy dog because", False),
    ("mixed-scripts", "Déjà vu: 東京タワー, Привет мир, مرحبا بالعالم, x² + 1 = 0 🙂", False),
    ("long-prompt",
     "In the old harbour town the fishermen rose before dawn, mended their nets by lamplight, "
     "and argued about the weather, the price of herring, the new lighthouse keeper, and whether "
     "the winter storms would come early this year as the almanac had warned. Meanwhile the "
     "children gathered shells along the grey shore and", False),
]
N_GEN = 24


def chatml(user):
    return f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"


# ---- llama.cpp helpers (run by the system python3, which has llama_cpp) ----

def llamacpp_helper():
    import llama_cpp
    import numpy as np
    req = json.load(sys.stdin)
    out = {"version": llama_cpp.__version__, "prompts": [], "texts": [], "greedy": []}
    voc = llama_cpp.Llama(model_path=req["vocab"], vocab_only=True, verbose=False)
    out["eot"] = int(llama_cpp.llama_vocab_eot(llama_cpp.llama_model_get_vocab(voc.model)))
    for text, special in req["prompts"]:
        out["prompts"].append(voc.tokenize(text.encode(), add_bos=False, special=special))
    for ids in req["detok"]:
        out["texts"].append(voc.detokenize(ids).hex())  # bytes: a random model need not emit UTF-8
    if req.get("model"):
        llm = llama_cpp.Llama(model_path=req["model"], n_ctx=512, n_batch=512, logits_all=True, verbose=False,
                              n_threads=2, type_k=0, type_v=0)  # f32 KV cache
        for ids in out["prompts"]:
            llm.reset()
            llm.eval(ids)
            gen = []
            for _ in range(req["n"]):
                t = int(np.argmax(np.array(llm.eval_logits[-1], dtype=np.float32)))
                gen.append(t)
                llm.eval([t])
            out["greedy"].append(gen)
    json.dump(out, sys.stdout)


def llamacpp(vocab, prompts, detok, model=None, n=0):
    req = {"vocab": vocab, "prompts": prompts, "detok": detok, "model": model, "n": n}
    r = subprocess.run(["python3", os.path.abspath(__file__), "--llamacpp-helper"], input=json.dumps(req),
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


# ---- llama.cpp's converter, its vocabulary step fed from a GGUF ----

def convert_helper(llama_dir, vocab, hf_dir, out):
    sys.path.insert(0, llama_dir)
    sys.path.insert(0, os.path.join(llama_dir, "gguf-py"))
    import gguf
    from conversion import qwen

    def set_vocab(self):
        r = gguf.GGUFReader(vocab)
        for f in r.fields.values():
            if not f.name.startswith("tokenizer."):
                continue
            t = f.types[0]
            if t == gguf.GGUFValueType.ARRAY:
                self.gguf_writer.add_array(f.name, f.contents())
            elif t == gguf.GGUFValueType.STRING:
                self.gguf_writer.add_string(f.name, f.contents())
            elif t == gguf.GGUFValueType.UINT32:
                self.gguf_writer.add_uint32(f.name, f.contents())
            elif t == gguf.GGUFValueType.BOOL:
                self.gguf_writer.add_bool(f.name, f.contents())
            else:
                raise SystemExit(f"{f.name}: value type {t} not copied")

    qwen.Qwen3_5TextModel.set_vocab = set_vocab
    script = os.path.join(llama_dir, "convert_hf_to_gguf.py")
    sys.argv = [script, hf_dir, "--outtype", "f32", "--no-mtp", "--outfile", out]
    runpy.run_path(script, run_name="__main__")


# ---- kiln's GGUF -> a transformers checkpoint ----

def read_gguf(path, llama_dir):
    sys.path.insert(0, os.path.join(llama_dir, "gguf-py"))
    import gguf
    import numpy as np
    r = gguf.GGUFReader(path)
    kv = {}
    for f in r.fields.values():
        if f.name.startswith("GGUF."):
            continue
        v = f.contents()
        kv[f.name] = (tuple(t.name for t in f.types), v)
    tensors = {}
    for t in r.tensors:
        shape = [int(x) for x in t.shape]  # ne0 first
        tensors[t.name] = (t.tensor_type.name, shape, np.array(t.data).reshape(list(reversed(shape))))
    return kv, tensors


def val(kv, key):
    return kv[key][1]


def grouped(x, dim, n_k, n_per_k, head):
    """Value heads from llama.cpp's tiled order (h = i*n_k + g) back to
    transformers' grouped order (h = g*n_per_k + i), along `dim`."""
    import torch
    shape = list(x.shape)
    y = x.reshape(shape[:dim] + [n_per_k, n_k, head] + shape[dim + 1:])
    return y.transpose(dim, dim + 1).reshape(shape)


def exact_a_log(a):
    """A float32 A_log with float32 -exp(A_log) == a for every head, as the
    converter's torch.exp on the whole vector computes it."""
    import torch
    target = torch.tensor(a, dtype=torch.float32)
    x = torch.log(-target.double()).float()
    for _ in range(64):
        bad = (-torch.exp(x)) != target
        if not bad.any():
            return x
        up = (-torch.exp(x)) > target  # -exp too large: exp too small, raise x
        step = torch.where(up, torch.full_like(x, math.inf), torch.full_like(x, -math.inf))
        x = torch.where(bad, torch.nextafter(x, step), x)
    raise SystemExit("no float32 A_log reproduces ssm_a exactly (the synth keeps |log(-a)| <= 0.9 for this)")


def to_hf(kv, tensors):
    """The config and float32 state dict whose llama.cpp conversion is the
    GGUF, and the A_log values in double for the float64 reference."""
    import torch
    from transformers import Qwen3_5TextConfig
    p = "qwen35."
    n_layer = int(val(kv, p + "block_count"))
    rec = [bool(x) for x in val(kv, p + "attention.recurrent_layers")]
    hd = int(val(kv, p + "attention.key_length"))
    n_k, n_v = int(val(kv, p + "ssm.group_count")), int(val(kv, p + "ssm.time_step_rank"))
    dk = int(val(kv, p + "ssm.state_size"))
    dv = int(val(kv, p + "ssm.inner_size")) // n_v
    sections = [int(x) for x in val(kv, p + "rope.dimension_sections")]
    tied = "output.weight" not in tensors
    cfg = Qwen3_5TextConfig(
        vocab_size=tensors["token_embd.weight"][1][1], hidden_size=int(val(kv, p + "embedding_length")),
        intermediate_size=int(val(kv, p + "feed_forward_length")), num_hidden_layers=n_layer,
        num_attention_heads=int(val(kv, p + "attention.head_count")),
        num_key_value_heads=int(val(kv, p + "attention.head_count_kv")), head_dim=hd,
        linear_conv_kernel_dim=int(val(kv, p + "ssm.conv_kernel")), linear_key_head_dim=dk,
        linear_value_head_dim=dv, linear_num_key_heads=n_k, linear_num_value_heads=n_v,
        layer_types=["linear_attention" if r else "full_attention" for r in rec],
        rms_norm_eps=float(val(kv, p + "attention.layer_norm_rms_epsilon")),
        max_position_embeddings=int(val(kv, p + "context_length")), tie_word_embeddings=tied,
        rope_parameters={"rope_type": "default", "rope_theta": float(val(kv, p + "rope.freq_base")),
                         "partial_rotary_factor": int(val(kv, p + "rope.dimension_count")) / hd,
                         "mrope_section": sections[:3], "mrope_interleaved": True})

    def t(name):
        return torch.from_numpy(tensors[name][2].copy())

    def offset(name):  # transformers keeps 1 + w; the file holds it already added
        return t(name) - 1.0

    r = n_v // n_k
    sd, a_log64 = {"model.embed_tokens.weight": t("token_embd.weight"), "model.norm.weight": offset("output_norm.weight")}, {}
    if not tied:
        sd["lm_head.weight"] = t("output.weight")
    for l in range(n_layer):
        b, h = f"blk.{l}.", f"model.layers.{l}."
        sd[h + "input_layernorm.weight"] = offset(b + "attn_norm.weight")
        sd[h + "post_attention_layernorm.weight"] = offset(b + "post_attention_norm.weight")
        for hf, gg in (("gate_proj", "ffn_gate"), ("up_proj", "ffn_up"), ("down_proj", "ffn_down")):
            sd[h + f"mlp.{hf}.weight"] = t(b + gg + ".weight")
        if rec[l]:
            la, kd = h + "linear_attn.", n_k * dk
            qkv = t(b + "attn_qkv.weight")
            sd[la + "in_proj_qkv.weight"] = torch.cat([qkv[:2 * kd], grouped(qkv[2 * kd:], 0, n_k, r, dv)])
            sd[la + "in_proj_z.weight"] = grouped(t(b + "attn_gate.weight"), 0, n_k, r, dv)
            sd[la + "in_proj_b.weight"] = grouped(t(b + "ssm_beta.weight"), 0, n_k, r, 1)
            sd[la + "in_proj_a.weight"] = grouped(t(b + "ssm_alpha.weight"), 0, n_k, r, 1)
            sd[la + "dt_bias"] = grouped(t(b + "ssm_dt.bias").unsqueeze(-1), 0, n_k, r, 1).squeeze(-1)
            a = grouped(t(b + "ssm_a").unsqueeze(-1), 0, n_k, r, 1).squeeze(-1)
            sd[la + "A_log"] = exact_a_log(a.numpy())
            a_log64[la + "A_log"] = torch.log(-a.double())
            conv = t(b + "ssm_conv1d.weight")  # [channels, K]
            sd[la + "conv1d.weight"] = torch.cat([conv[:2 * kd], grouped(conv[2 * kd:], 0, n_k, r, dv)]).unsqueeze(1)
            sd[la + "norm.weight"] = t(b + "ssm_norm.weight")  # the gated norm is not offset
            sd[la + "out_proj.weight"] = grouped(t(b + "ssm_out.weight"), 1, n_k, r, dv)
        else:
            sa = h + "self_attn."
            for hf, gg in (("q_proj", "attn_q"), ("k_proj", "attn_k"), ("v_proj", "attn_v"), ("o_proj", "attn_output")):
                sd[sa + hf + ".weight"] = t(b + gg + ".weight")
            sd[sa + "q_norm.weight"] = offset(b + "attn_q_norm.weight")
            sd[sa + "k_norm.weight"] = offset(b + "attn_k_norm.weight")
    return cfg, sd, a_log64


def compare_files(kiln_kv, kiln_t, conv_kv, conv_t):
    bad = []
    keys = {k for k in list(kiln_kv) + list(conv_kv) if k.startswith(("qwen35.", "tokenizer."))}
    for k in sorted(keys):
        a, b = kiln_kv.get(k), conv_kv.get(k)
        if a is None or b is None or a[0] != b[0] or a[1] != b[1]:
            bad.append(f"key {k}: kiln {str(a)[:80]} / converter {str(b)[:80]}")
    for name in sorted(set(kiln_t) | set(conv_t)):
        a, b = kiln_t.get(name), conv_t.get(name)
        if a is None or b is None:
            bad.append(f"tensor {name}: only in {'the converter' if a is None else 'kiln'}'s file")
        elif a[0] != b[0] or a[1] != b[1] or a[2].tobytes() != b[2].tobytes():
            bad.append(f"tensor {name}: kiln {a[0]} {a[1]} / converter {b[0]} {b[1]}, bytes differ: "
                       f"{a[2].tobytes() != b[2].tobytes()}")
    return bad


# ---- transformers in float64 ----

def make_modeling_f64():
    """modeling_qwen3_5 computes norms, rotary tables, the delta rule and
    softmax in float32 whatever the model's dtype: give it a `torch` whose
    float32 is float64, and Tensor.float() that keeps double."""
    import torch
    import transformers.models.qwen3_5.modeling_qwen3_5 as mq

    class TorchF64(types.ModuleType):
        def __getattr__(self, name):
            return torch.float64 if name in ("float32", "float") else getattr(torch, name)

    mq.torch = TorchF64("torch")
    torch.Tensor.float = lambda self, *a, **k: self.to(torch.float64)


def greedy(model, ids, n, stop):
    """n greedy tokens, stopping after one in `stop` (EOS, end of turn) as
    kiln's golden replay does."""
    import torch
    seq, gaps, first = list(ids), [], None
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([seq]), use_cache=False).logits[0, -1].to(torch.float64)
            top = torch.topk(logits, 2)
            gaps.append(float(top.values[0] - top.values[1]))
            if first is None:
                first = logits.clone()
            seq.append(int(top.indices[0]))
            if seq[-1] in stop:
                break
    return seq[len(ids):], gaps, first


def esc(s):
    """C escapes for kiln's golden reader; bytes that are not UTF-8 (kept
    by surrogateescape) as \\xNN."""
    out = []
    for ch in s:
        o = ord(ch)
        if 0xDC80 <= o <= 0xDCFF:
            out.append(f"\\x{o - 0xDC00:02x}")
        elif ch in '\\"':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif o < 0x20:
            out.append(f"\\x{o:02x}")
        else:
            out.append(ch)
    return "".join(out)


def pieces(s, width=32):
    """Quoted pieces short enough for inih's 199-byte lines."""
    return ['"' + esc(s[i:i + width]) + '"' for i in range(0, max(len(s), 1), width)] or ['""']


def wrapped(key, parts):
    return "\n".join([f"{key} = {parts[0]}"] + [f"    {p}" for p in parts[1:]])


def id_lines(ids, per=16):
    return [" ".join(map(str, ids[i:i + per])) for i in range(0, len(ids), per)]


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--llamacpp-helper":
        return llamacpp_helper()
    if len(sys.argv) > 1 and sys.argv[1] == "--convert-helper":
        return convert_helper(*sys.argv[2:6])
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--vocab", required=True)
    ap.add_argument("--llama-cpp", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--flags", default=os.path.join(HERE, "qwen35-tiny.synth"))
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    kiln_gguf, hf_dir, conv_gguf = (os.path.join(a.work, x) for x in ("kiln.gguf", "hf", "converted.gguf"))
    flags = [w for line in open(a.flags) if not line.startswith("#") for w in line.split()]
    subprocess.run([a.kiln, "synth", *flags, "--vocab-from", a.vocab, "-o", kiln_gguf], check=True)

    import torch
    from transformers import Qwen3_5ForCausalLM
    kiln_kv, kiln_t = read_gguf(kiln_gguf, a.llama_cpp)
    cfg, sd, a_log64 = to_hf(kiln_kv, kiln_t)
    model = Qwen3_5ForCausalLM(cfg)
    model.load_state_dict(sd, strict=True)
    model.save_pretrained(hf_dir)
    subprocess.run([sys.executable, os.path.abspath(__file__), "--convert-helper", a.llama_cpp, a.vocab, hf_dir,
                    conv_gguf], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    conv_kv, conv_t = read_gguf(conv_gguf, a.llama_cpp)
    bad = compare_files(kiln_kv, kiln_t, conv_kv, conv_t)
    if bad:
        raise SystemExit("kiln's file and llama.cpp's conversion differ:\n  " + "\n  ".join(bad))
    print(f"llama.cpp's converter reproduces kiln's file: {len(kiln_t)} tensors and every qwen35.*/tokenizer.* "
          "key identical", file=sys.stderr)

    texts = [(chatml(p) if chat else p, chat) for _, p, chat in PROMPTS]
    tok = llamacpp(a.vocab, texts, [])
    make_modeling_f64()
    ref = Qwen3_5ForCausalLM.from_pretrained(hf_dir, dtype=torch.float64, attn_implementation="eager").eval()
    with torch.no_grad():
        for name, v in a_log64.items():  # exactly the file's ssm_a, in double
            ref.get_parameter(name).copy_(v)
    stop = {int(val(kiln_kv, "tokenizer.ggml.eos_token_id")), tok["eot"]}
    results = [greedy(ref, ids, N_GEN, stop) for ids in tok["prompts"]]
    outs = [r[0] for r in results]
    detok = [bytes.fromhex(h).decode("utf-8", "surrogateescape") for h in llamacpp(a.vocab, [], outs)["texts"]]
    cross = llamacpp(a.vocab, texts, [], model=conv_gguf, n=N_GEN)
    for (name, _, _), mine, theirs in zip(PROMPTS, outs, cross["greedy"]):
        same = next((i for i, (x, y) in enumerate(zip(mine, theirs)) if x != y), None)
        print(f"{name}: llama.cpp {cross['version']} greedy on the converted file "
              f"{'agrees on all' if same is None else 'first differs at token ' + str(same) + ' of'} {N_GEN}",
              file=sys.stderr)

    import transformers
    synth_line = " ".join(flags)
    print("; kiln golden set for a tiny random Qwen3.5 (qwen35): greedy continuations by transformers")
    print(f"; {transformers.__version__} (torch {torch.__version__}) in float64, made by")
    print("; tests/golden/make_golden_qwen35.py (its docstring says exactly how). The model is")
    words, line = synth_line.split() + ["--vocab-from", "ggml-vocab-qwen35.gguf"], ";   kiln synth"
    for w in words:  # comment lines short enough for inih too
        if len(line) + 1 + len(w) > 96:
            print(line)
            line = ";    "
        line += " " + w
    print(line)
    print("; which that script checked to be, bit for bit, llama.cpp's convert_hf_to_gguf.py")
    print(f"; (llama-cpp-python {tok['version']}) output for the transformers checkpoint it ran.")
    print("; Prompts tokenized and outputs detokenized by llama.cpp; chat = true cases are ChatML")
    print("; (<|im_start|>user ... <|im_end|> <|im_start|>assistant, no system message).")
    print("; top = the 5 largest logits after the prompt; gap = the smallest top-1 minus top-2")
    print("; logit margin over the generated tokens (how far greedy is from a tie).")
    for (name, text, chat), ids, (gen, gaps, first), txt in zip(PROMPTS, tok["prompts"], results, detok):
        top = torch.topk(first, 5)
        print()
        print(f"; gap {min(gaps):.3g}")
        print(f"[{name}]")
        print(wrapped("prompt", pieces(text)))
        print(f"chat = {'true' if chat else 'false'}")
        print(f"n = {N_GEN}")
        print(wrapped("prompt_ids", id_lines(ids)))
        print(wrapped("ids", id_lines(gen)))
        print(wrapped("text", pieces(txt)))
        print("top = " + " ".join(f"{int(i)}:{float(v):.9g}" for v, i in zip(top.values, top.indices)))


if __name__ == "__main__":
    main()
