#!/usr/bin/env python3
"""Writes llama-3.1-8b-q4_k_m.header.gguf: the GGUF header of a Llama-3.1-8B-Instruct Q4_K_M file
(as llama.cpp's convert_hf_to_gguf.py + llama-quantize write it) without the 4.9 GB of tensor data.

The metadata keys and values are the model's (config.json: 32 layers, hidden 4096, 32 heads, 8 KV
heads, FFN 14336, vocabulary 128256, context 131072, rope theta 500000); the tensor list is the
one llama.cpp writes for Llama 3.1 (rope_freqs, token_embd, 32 blocks of 9 tensors, output_norm,
output) with Q4_K_M's types (llama_tensor_get_type in src/llama-quant.cpp: Q6_K for output and for
attn_v / ffn_down on the layers use_more_bits picks, Q4_K elsewhere, F32 norms). The tokenizer's
128256-entry token/merge arrays are left out to keep the fixture small (llama.vocab_size carries
the count); the reader's tests cover long arrays with generated files.

Run from the repository root: python3 tests/data/model/make_gguf_header_fixture.py
"""
import os
import struct

GGUF_VERSION = 3
ALIGN = 32
F32, Q4_K, Q6_K = 0, 12, 14
BLOCK = {F32: (1, 4), Q4_K: (256, 144), Q6_K: (256, 210)}  # elements, bytes per block (ggml.c)

N_LAYER, HIDDEN, KV, FF, VOCAB, HEAD_DIM = 32, 4096, 1024, 14336, 128256, 128


def s(text):
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, typ, payload):
    return s(key) + struct.pack("<I", typ) + payload


def u32(key, v): return kv(key, 4, struct.pack("<I", v))
def f32(key, v): return kv(key, 6, struct.pack("<f", v))
def string(key, v): return kv(key, 8, s(v))


def use_more_bits(i, n):
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def tensors():
    out = [("rope_freqs.weight", [HEAD_DIM // 2], F32), ("token_embd.weight", [HIDDEN, VOCAB], Q4_K)]
    for i in range(N_LAYER):
        more = Q6_K if use_more_bits(i, N_LAYER) else Q4_K
        b = f"blk.{i}."
        out += [(b + "attn_norm.weight", [HIDDEN], F32), (b + "ffn_down.weight", [FF, HIDDEN], more),
                (b + "ffn_gate.weight", [HIDDEN, FF], Q4_K), (b + "ffn_up.weight", [HIDDEN, FF], Q4_K),
                (b + "ffn_norm.weight", [HIDDEN], F32), (b + "attn_k.weight", [HIDDEN, KV], Q4_K),
                (b + "attn_output.weight", [HIDDEN, HIDDEN], Q4_K), (b + "attn_q.weight", [HIDDEN, HIDDEN], Q4_K),
                (b + "attn_v.weight", [HIDDEN, KV], more)]
    out += [("output_norm.weight", [HIDDEN], F32), ("output.weight", [HIDDEN, VOCAB], Q6_K)]
    return out


def main():
    meta = [
        string("general.architecture", "llama"), string("general.type", "model"),
        string("general.name", "Meta Llama 3.1 8B Instruct"), string("general.finetune", "Instruct"),
        string("general.basename", "Meta-Llama-3.1"), string("general.size_label", "8B"),
        string("general.license", "llama3.1"),
        u32("llama.block_count", N_LAYER), u32("llama.context_length", 131072),
        u32("llama.embedding_length", HIDDEN), u32("llama.feed_forward_length", FF),
        u32("llama.attention.head_count", 32), u32("llama.attention.head_count_kv", 8),
        f32("llama.rope.freq_base", 500000.0), f32("llama.attention.layer_norm_rms_epsilon", 1e-5),
        u32("general.file_type", 15), u32("llama.vocab_size", VOCAB), u32("llama.rope.dimension_count", HEAD_DIM),
        string("tokenizer.ggml.model", "gpt2"), string("tokenizer.ggml.pre", "llama-bpe"),
        u32("tokenizer.ggml.bos_token_id", 128000), u32("tokenizer.ggml.eos_token_id", 128009),
        u32("general.quantization_version", 2),
    ]
    infos, offset = [], 0
    for name, dims, typ in tensors():
        elems = 1
        for d in dims:
            elems *= d
        be, bb = BLOCK[typ]
        nbytes = elems // be * bb
        infos.append(s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims) +
                     struct.pack("<IQ", typ, offset))
        offset += (nbytes + ALIGN - 1) // ALIGN * ALIGN
    head = b"GGUF" + struct.pack("<IQQ", GGUF_VERSION, len(infos), len(meta))
    body = head + b"".join(meta) + b"".join(infos)
    body += b"\0" * ((-len(body)) % ALIGN)  # the data section would start here
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "llama-3.1-8b-q4_k_m.header.gguf")
    with open(path, "wb") as f:
        f.write(body)
    print(f"{path}: {len(body)} bytes, {len(infos)} tensors, {offset} bytes of tensor data left out")


if __name__ == "__main__":
    main()
