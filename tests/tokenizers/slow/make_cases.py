#!/usr/bin/env python3
"""Copies the slow-format tokenizers of the multimodal parity fixtures and
writes cases.jsonl: the exact text each HF processor tokenized (placeholders
expanded) with the input_ids the reference stored.

usage: make_cases.py FIXTURES_DIR (e.g. ../shared/fixtures) [OUT_DIR]

Byte-level BPE fixtures: the text is the byte-level inverse of the reference
ids (lossless: each token is bytes, each added token its content), checked to
be the fixture's prompt_text up to added tokens and newlines.
SentencePiece fixtures: prompt_text with the placeholder expanded by the
processor's rule (README of the fixtures). Standard library only."""
import json, os, shutil, struct, sys

FILES = ["tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "vocab.json", "merges.txt", "tokenizer.model"]
BPE = ["whisper", "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "internvl", "glm4v", "idefics3", "smolvlm", "aya_vision"]
SPM = ["llava", "mistral3", "paligemma", "gemma3"]


def st_i64(path, name):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])[name]
    s, e = h["data_offsets"]
    raw = b[8 + n + s:8 + n + e]
    return list(struct.unpack("<%dq" % (len(raw) // 8), raw))


def byte_decoder():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def added(fx):
    cfg = json.load(open(os.path.join(fx, "tokenizer_config.json")))
    return {int(k): v["content"] for k, v in cfg["added_tokens_decoder"].items()}


def bpe_text(fx, ids):
    vocab = json.load(open(os.path.join(fx, "vocab.json")))
    inv = {v: k for k, v in vocab.items()}
    add = added(fx)
    bd = byte_decoder()
    out = b""
    for i in ids:
        out += add[i].encode() if i in add else bytes(bd[c] for c in inv[i])
    return out.decode("utf-8")


def in_order(prompt, text, add):
    """every piece of the prompt between added tokens, placeholders and newlines is in the text, in order"""
    for tok in sorted(set(add.values()) | {"<image>"}, key=len, reverse=True):
        prompt = prompt.replace(tok, "\n")
    at = 0
    for piece in prompt.split("\n"):
        at = text.find(piece, at)
        if at < 0:
            return False
        at += len(piece)
    return True


def main():
    src = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(os.path.abspath(__file__))
    for name in BPE + SPM:
        fx = os.path.join(src, name)
        ref = json.load(open(os.path.join(fx, "reference.json")))
        if name == "whisper":
            ids = st_i64(os.path.join(fx, "reference.safetensors"), "decoder_input_ids")
            text, special = "".join(ref["decoder_prompt_tokens"]), False
        else:
            ids = st_i64(os.path.join(fx, "reference.safetensors"), "input_ids")
            prompt = ref["prompt_text"]
            add = added(fx)
            if name in BPE:
                cfg = json.load(open(os.path.join(fx, "tokenizer_config.json")))
                special = bool(cfg.get("add_bos_token")) and add.get(ids[0]) == cfg.get("bos_token")
                text = bpe_text(fx, ids[1:] if special else ids)  # GPT2Tokenizer's add_bos_token adds the first
                assert in_order(prompt, text, add), name
            elif name == "llava":
                img = [k for k, v in add.items() if v == "<image>"][0]
                text, special = prompt.replace("<image>", "<image>" * ids.count(img)), True
            elif name == "mistral3":  # [IMG] rows, [IMG_BREAK] between rows, [IMG_END]
                inv = {v: k for k, v in add.items()}
                a, b = ids.index(inv["[IMG]"]), ids.index(inv["[IMG_END]"]) + 1
                text, special = prompt.replace("[IMG]", "".join(add[i] for i in ids[a:b])), True
            elif name == "paligemma":
                n = ids.count(400)
                text, special = "<image>" * n + "<bos>" + prompt + "\n", False
            elif name == "gemma3":
                n = ids.count(ids[ids.index(401) + 1])
                soft = add[ids[ids.index(401) + 1]]
                text = prompt.replace("<start_of_image>", "\n\n<start_of_image>" + soft * n + "<end_of_image>\n\n")
                special = True
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        for f in FILES:
            if os.path.exists(os.path.join(fx, f)):
                shutil.copyfile(os.path.join(fx, f), os.path.join(d, f))
        with open(os.path.join(d, "cases.jsonl"), "w") as f:
            f.write(json.dumps({"text": text, "add_special_tokens": special, "ids": ids}, ensure_ascii=False) + "\n")


main()
