#!/usr/bin/env python3
"""llama-server's routes against two mlxcel servers (tests/cli/server_llama.sh):
argv[1] serves a tokenizer with FIM tokens (started with LLAMA_ARG_* variables),
argv[2] a plain one (--alias gpt-x,other -a third). Prints ok/FAIL lines."""
import json
import sys
import time
import urllib.error
import urllib.request

FIM = "http://127.0.0.1:%s" % sys.argv[1]
PLAIN = "http://127.0.0.1:%s" % sys.argv[2]
failed = 0


def check(name, cond, why=""):
    global failed
    if cond:
        print("ok llama/" + name)
    else:
        failed += 1
        print("FAIL llama/%s: %s" % (name, why))


def call(base, path, body=None, raw=False, key="k3y"):
    """(status, parsed JSON or the raw text); the FIM server wants the key (LLAMA_ARG_API_KEY)"""
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    req = urllib.request.Request(base + path, data=data, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            text = r.read().decode()
            return r.status, text if raw else json.loads(text)
    except urllib.error.HTTPError as e:
        text = e.read().decode()
        try:
            return e.code, json.loads(text)
        except ValueError:
            return e.code, text


def attempt(name, fn):
    try:
        fn()
    except Exception as e:  # one failure named after the group
        check(name, False, "threw %r" % e)


def wait_up():
    for _ in range(150):
        try:
            if call(FIM, "/health")[0] == 200 and call(PLAIN, "/health")[0] == 200:
                return True
        except Exception:
            pass
        time.sleep(0.1)
    return False


def err_msg(r):
    return r.get("error", {}).get("message", "") if isinstance(r, dict) else str(r)


def tokenize(base, text):
    return call(base, "/tokenize", {"content": text})[1]["tokens"]


def detok(base, toks):
    return call(base, "/detokenize", {"tokens": toks})[1]["content"]


def flags_and_env():
    st, props = call(FIM, "/props")
    dgs = props["default_generation_settings"]
    check("env_parallel", props["total_slots"] == 2, props)
    check("cmdline_wins_over_env", dgs["n_ctx"] == 4096, dgs)
    check("env_alias", props["model_alias"] == "envname" and call(FIM, "/v1/models")[1]["data"][0]["id"] == "envname", props)
    check("props_shape", all(k in props for k in ("model_path", "chat_template", "modalities", "build_info", "bos_token", "eos_token"))
          and dgs["params"]["n_predict"] == -1 and dgs["params"]["seed"] == 4294967295, props)
    check("env_api_key", call(FIM, "/props", key=None)[0] == 401 and call(FIM, "/props", key="wrong")[0] == 401, "no 401 without the key")
    ids = [m["id"] for m in call(PLAIN, "/v1/models")[1]["data"]]
    check("aliases_listed", ids == ["gpt-x", "other", "third"], ids)
    st, r = call(PLAIN, "/v1/chat/completions", {"model": "some-agent-model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
    check("any_model_name", st == 200 and r["model"] == "gpt-x", r)


def completion():
    prompt = "Hello there"
    st, r = call(PLAIN, "/completion", {"prompt": prompt, "n_predict": 8, "temperature": 0, "return_tokens": True, "model": "x"})
    check("completion_status", st == 200, r)
    check("completion_shape", r["stop"] is True and r["tokens_predicted"] == 8 and r["stop_type"] == "limit" and r["stopping_word"] == ""
          and r["generation_settings"]["n_predict"] == 8 and r["model"] == "gpt-x" and r["prompt"] == prompt
          and r["truncated"] is False and r["tokens_cached"] >= 0, r)
    t = r["timings"]
    check("completion_timings", t["predicted_n"] == 8 and t["prompt_n"] + t["cache_n"] == r["tokens_evaluated"]
          and t["prompt_ms"] > 0 and t["predicted_ms"] > 0 and t["predicted_per_second"] > 0, t)
    ptoks = tokenize(PLAIN, prompt)
    check("completion_tokens_evaluated", r["tokens_evaluated"] == len(ptoks), (r["tokens_evaluated"], ptoks))
    check("return_tokens", len(r["tokens"]) == 8 and detok(PLAIN, r["tokens"]) == r["content"], r["tokens"])
    # the same greedy text as the OpenAI route, from text, ids and a mixed list
    st, o = call(PLAIN, "/v1/completions", {"prompt": prompt, "max_tokens": 8, "temperature": 0})
    check("same_as_v1_completions", o["choices"][0]["text"] == r["content"], (o, r["content"]))
    st, r2 = call(PLAIN, "/completion", {"prompt": ptoks, "n_predict": 8, "temperature": 0})
    check("prompt_token_ids", st == 200 and r2["content"] == r["content"], r2)
    split = len(ptoks) // 2
    mixed = [detok(PLAIN, ptoks[:split])] + ptoks[split:]
    st, r3 = call(PLAIN, "/completion", {"prompt": mixed, "n_predict": 8, "temperature": 0})
    check("prompt_mixed", st == 200 and r3["content"] == r["content"] and r3["tokens_evaluated"] == len(ptoks), (mixed, r3))
    # n_probs: the chosen greedy token is the most likely one
    st, r4 = call(PLAIN, "/completion", {"prompt": prompt, "n_predict": 4, "temperature": 0, "n_probs": 3})
    cp = r4.get("completion_probabilities", [])
    check("n_probs", st == 200 and len(cp) == 4 and all(len(p["top_logprobs"]) == 3 and p["id"] == p["top_logprobs"][0]["id"]
                                                            and p["logprob"] <= 0 and "bytes" in p for p in cp), r4)
    # logit_bias [id, false] bans the greedy first token
    first = r["tokens"][0]
    st, r5 = call(PLAIN, "/completion", {"prompt": prompt, "n_predict": 2, "temperature": 0, "return_tokens": True,
                                         "logit_bias": [[first, False]]})
    check("logit_bias_ban", st == 200 and r5["tokens"][0] != first, r5)
    # a stop word: the text up to it, stop_type word
    text = r["content"]
    k = next((i for i in range(1, len(text)) if text[i] not in "\ufffd"), None)
    if k is not None:
        stop = text[k]
        st, r6 = call(PLAIN, "/completion", {"prompt": prompt, "n_predict": 8, "temperature": 0, "stop": [stop]})
        check("stop_word", r6["stop_type"] == "word" and r6["stopping_word"] == stop and r6["content"] == text[:text.index(stop)], (stop, text, r6))
    # the same seed, the same sample; -1 is a random seed
    body = {"prompt": prompt, "n_predict": 8, "temperature": 1.0, "seed": 1234}
    a, b = call(PLAIN, "/completion", body)[1], call(PLAIN, "/completion", body)[1]
    check("seed_repeats", a["content"] == b["content"] and a["generation_settings"]["seed"] == 1234, (a, b))
    st, c = call(PLAIN, "/completion", dict(body, seed=-1))
    check("seed_random", st == 200 and c["generation_settings"]["seed"] != 4294967295, c)
    # JSON schema: the shared structured-output path
    st, j = call(PLAIN, "/completion", {"prompt": prompt, "n_predict": 64, "json_schema": {"type": "object", "properties": {"a": {"type": "integer"}},
                                                                                        "required": ["a"], "additionalProperties": False}})
    try:
        ok = isinstance(json.loads(j["content"])["a"], int)
    except Exception:
        ok = False
    check("json_schema", st == 200 and ok, j)


def stream():
    body = {"prompt": "Hello there", "n_predict": 8, "temperature": 0}
    whole = call(PLAIN, "/completion", body)[1]["content"]
    st, text = call(PLAIN, "/completion", dict(body, stream=True), raw=True)
    events = [json.loads(l[6:]) for l in text.split("\n") if l.startswith("data: ")]
    check("stream_events", st == 200 and events and all(e["stop"] is False for e in events[:-1]) and events[-1]["stop"] is True
          and "timings" in events[-1] and events[-1]["tokens_predicted"] == 8 and "[DONE]" not in text, text[-400:])
    check("stream_content", "".join(e["content"] for e in events) == whole, (whole, events))
    check("stream_tokens", sum(len(e.get("tokens", [])) for e in events) == 8, events)


def refused():
    cases = [({"mirostat": 2}, "'mirostat'"), ({"typical_p": 0.5}, "'typical_p'"), ({"samplers": ["top_k"]}, "'samplers'"),
             ({"cache_prompt": False}, "'cache_prompt'"), ({"n_predict": 0}, "'n_predict'"), ({"bogus": 1}, "'bogus'"),
             ({"prompt": [[1], [2]]}, "several prompts"), ({"prompt": [999999]}, "'prompt[0]'"), ({"id_slot": 1}, "'id_slot'"),
             ({"lora": [{"id": 0, "scale": 1}]}, "'lora'"), ({"logit_bias": [[1]]}, "'logit_bias[0]'")]
    bad = []
    for extra, word in cases:
        body = dict({"prompt": "hi", "n_predict": 1}, **extra)
        st, r = call(PLAIN, "/completion", body)
        if st != 400 or word not in err_msg(r):
            bad.append((extra, st, r))
    check("unsupported_fields_400", not bad, bad)
    # the "off" values of those features are accepted
    st, r = call(PLAIN, "/completion", {"prompt": "hi", "n_predict": 1, "typical_p": 1, "mirostat": 0, "mirostat_tau": 5, "dry_multiplier": 0,
                                        "dry_base": 1.75, "xtc_probability": 0, "xtc_threshold": 0.1, "cache_prompt": True, "id_slot": -1,
                                        "n_keep": 0, "min_keep": 0, "lora": [], "repeat_penalty": 1.1, "repeat_last_n": 64, "top_k": 40,
                                        "top_p": 0.95, "min_p": 0.05, "temperature": 0.8, "ignore_eos": False})
    check("off_values_accepted", st == 200 and abs(r["generation_settings"]["repeat_penalty"] - 1.1) < 1e-6, r)


def infill():
    body = {"input_prefix": "def f(", "input_suffix": "):\n  pass", "input_extra": [{"filename": "a.py", "text": "x=1"}], "prompt": "z",
            "n_predict": 3, "temperature": 0}
    st, r = call(FIM, "/infill", body)
    want = "<|repo_name|>myproject\n<|file_sep|>a.py\nx=1<|file_sep|>filename\n<|fim_prefix|>def f(z<|fim_suffix|>):\n  pass<|fim_middle|>"
    check("infill_fim_order", st == 200 and r["prompt"] == want and r["tokens_predicted"] == 3, r)
    # the parts are text: a FIM token written in the prefix is not the token
    st, a = call(FIM, "/infill", {"input_prefix": "<|fim_suffix|>", "input_suffix": "", "n_predict": 1})
    st2, b = call(FIM, "/infill", {"input_prefix": "", "input_suffix": "", "n_predict": 1})
    check("infill_parts_are_text", st == 200 and st2 == 200 and a["tokens_evaluated"] - b["tokens_evaluated"] > 1, (a, b))
    st, r = call(PLAIN, "/infill", {"input_prefix": "a", "input_suffix": "b"})
    check("infill_needs_fim_tokens", st == 400 and "fill-in-the-middle" in err_msg(r), r)
    st, r = call(FIM, "/infill", {"input_suffix": "b"})
    check("infill_needs_prefix", st == 400 and "input_prefix" in err_msg(r), r)


def misc():
    st, slots = call(PLAIN, "/slots")
    check("slots", st == 200 and [s["id"] for s in slots] == [0, 1] and all(s["is_processing"] is False and s["n_ctx"] == 512 for s in slots), slots)
    st, r = call(PLAIN, "/apply-template", {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]})
    check("apply_template", st == 200 and r["prompt"] == "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", r)
    st, r = call(PLAIN, "/apply-template", {"messages": [{"role": "user", "content": "hi"}], "temperature": 1})
    check("apply_template_refuses_fields", st == 400 and "'temperature'" in err_msg(r), r)


check("servers_up", wait_up(), "no 200 from /health")
for name, fn in [("flags_and_env", flags_and_env), ("completion", completion), ("stream", stream), ("refused", refused), ("infill", infill),
                 ("misc", misc)]:
    attempt(name, fn)
sys.exit(1 if failed else 0)
