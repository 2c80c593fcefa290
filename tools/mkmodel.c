/* mkmodel: writes a random-weight checkpoint for benchmarking.
 *   mkmodel --config tools/configs/llama-3.2-1b.json -o DIR [--dtype f32|bf16|f16] [--seed S]
 * DIR gets config.json (copied verbatim), generation_config.json (bos/eos
 * from the config, greedy) and model.safetensors with the Hugging Face tensor
 * names of the family: llama/mistral/qwen2/qwen3 decoders, BERT encoders,
 * mixtral (llama attention + block_sparse_moe: router gate, per expert
 * w1/w3/w2), deepseek_v3 (MLA with q lora or plain q_proj, dense MLPs in
 * the first first_k_dense_replace layers, then MoE: router with
 * e_score_correction_bias, per expert gate/up/down, fused shared experts),
 * deepseek_v32 (that plus the sparse attention's indexer per layer),
 * deepseek (DeepSeek-MoE: Llama attention with that MoE, softmax router
 * without bias, moe_layer_freq) and glm4_moe (GLM-4.5: q/k/v biases, q/k
 * norms, that MoE), qwen3_5_text (DeltaNet / gated attention) and gemma4_text
 * (sliding / full layers, per-layer inputs); vision-language models:
 * qwen2_vl (Qwen2 text + its ViT and merger), qwen2_5_vl (the same with
 * Qwen2.5-VL's RMSNorm / SwiGLU tower), qwen3_vl (Qwen3 text + its
 * tower with DeepStack mergers), gemma3 (Gemma 3 text +
 * SigLIP + pool/norm projector) and mistral3 (Mistral text + the Pixtral tower and
 * patch-merger projector), convolutions written as [out, in * kernel]
 * matrices (the loader reads them either way).
 * --bits B [--group G] writes the language model's matrices as MLX affine
 * quantized tensors (random codes; scales and biases giving N(0, SD)'s
 * spread) and says so in config.json, as mlx-lm / mlx-vlm conversions do:
 * a model too large to write and convert in bf16 on a small disk.
 * whisper: the encoder-decoder (conv stem, sinusoidal-position table, encoder
 * and decoder stacks with cross-attention) plus what a hub folder holds beside
 * it: generation_config.json (the token ids, lang_to_id, task_to_id, the
 * suppress lists, max_length 448), preprocessor_config.json and a slow
 * byte-level tokenizer (vocab.json, merges.txt, tokenizer_config.json) with
 * Whisper's special, language and timestamp tokens at their real ids.
 * Matrices and embeddings are N(0, SD) (--std, default 0.02), biases
 * likewise, norm weights 1 and norm biases 0. Tensors are generated and written in chunks, so a 1B
 * model needs a few MB of memory, not the model's size. */
#define _GNU_SOURCE
#include "base/base.h"
#include "base/half.h"
#include "format/json.h"
#include "format/safetensors.h"
#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* INIT_Q*: the three tensors of an MLX affine-quantized matrix (--bits):
 * random packed codes, and the scales and biases that give its values the
 * spread of N(0, SD) (codes uniform over [0, 2^bits)). */
typedef enum { INIT_NORMAL, INIT_ONES, INIT_ZEROS, INIT_QCODES, INIT_QSCALES, INIT_QBIASES } init_kind;

typedef struct {
    char *name;
    int ndim;
    int64_t shape[3];
    init_kind init;
    int bits; /* INIT_Q*: the code width */
} spec;

static size_t numel_of(const spec *e) {
    size_t n = 1;
    for (int d = 0; d < e->ndim; d++) n *= (size_t)e->shape[d];
    return n;
}

typedef struct {
    spec *v;
    int n, cap;
} specs;

static int add(specs *s, init_kind init, int64_t d0, int64_t d1, const char *fmt, ...) MX_PRINTF(5, 6);
static int add(specs *s, init_kind init, int64_t d0, int64_t d1, const char *fmt, ...) {
    if (s->n == s->cap) {
        int nc = s->cap ? s->cap * 2 : 64;
        spec *nv = realloc(s->v, sizeof(spec) * (size_t)nc);
        if (!nv) return MX_ERR;
        s->v = nv;
        s->cap = nc;
    }
    va_list ap;
    va_start(ap, fmt);
    char *name = NULL;
    int len = vasprintf(&name, fmt, ap);
    va_end(ap);
    if (len < 0) return MX_ERR;
    spec *e = &s->v[s->n++];
    e->name = name;
    e->ndim = d1 > 0 ? 2 : 1;
    e->shape[0] = d0;
    e->shape[1] = d1;
    e->shape[2] = 0;
    e->init = init;
    return MX_OK;
}

/* ---- tensor lists ---- */

static int llama_specs(const mx_cfg *c, const char *mt, specs *s) {
    int H, I, L, nh, nkv, hd, V;
    bool tie, attn_bias, mlp_bias;
    if (mx_cfg_i32(c, "hidden_size", 0, 1, 1 << 16, &H) || mx_cfg_i32(c, "intermediate_size", 0, 1, 1 << 20, &I) ||
        mx_cfg_i32(c, "num_hidden_layers", 0, 1, 1024, &L) || mx_cfg_i32(c, "num_attention_heads", 0, 1, 1024, &nh) ||
        mx_cfg_i32(c, "vocab_size", 0, 1, 1 << 22, &V))
        return MX_ERR;
    if (!H || !I || !L || !nh || !V) return mx_set_err("%s: hidden_size, intermediate_size, num_hidden_layers, num_attention_heads and vocab_size are required", c->file);
    if (mx_cfg_i32(c, "num_key_value_heads", nh, 1, 1024, &nkv) || mx_cfg_i32(c, "head_dim", H / nh, 1, 1 << 14, &hd) ||
        mx_cfg_bool(c, "tie_word_embeddings", false, &tie) || mx_cfg_bool(c, "attention_bias", false, &attn_bias) ||
        mx_cfg_bool(c, "mlp_bias", false, &mlp_bias))
        return MX_ERR;
    bool qwen2 = !strcmp(mt, "qwen2"), qwen3 = !strcmp(mt, "qwen3"), mixtral = !strcmp(mt, "mixtral");
    int E = 0;
    if (mixtral && mx_cfg_i32(c, "num_local_experts", 8, 1, 1 << 12, &E)) return MX_ERR;
    int ok = add(s, INIT_NORMAL, V, H, "model.embed_tokens.weight") == MX_OK;
    for (int l = 0; l < L && ok; l++) {
        const char *a = "self_attn", *m = "mlp";
        ok &= add(s, INIT_ONES, H, 0, "model.layers.%d.input_layernorm.weight", l) == MX_OK;
        ok &= add(s, INIT_NORMAL, (int64_t)nh * hd, H, "model.layers.%d.%s.q_proj.weight", l, a) == MX_OK;
        ok &= add(s, INIT_NORMAL, (int64_t)nkv * hd, H, "model.layers.%d.%s.k_proj.weight", l, a) == MX_OK;
        ok &= add(s, INIT_NORMAL, (int64_t)nkv * hd, H, "model.layers.%d.%s.v_proj.weight", l, a) == MX_OK;
        ok &= add(s, INIT_NORMAL, H, (int64_t)nh * hd, "model.layers.%d.%s.o_proj.weight", l, a) == MX_OK;
        if (qwen2 || attn_bias) {
            ok &= add(s, INIT_NORMAL, (int64_t)nh * hd, 0, "model.layers.%d.%s.q_proj.bias", l, a) == MX_OK;
            ok &= add(s, INIT_NORMAL, (int64_t)nkv * hd, 0, "model.layers.%d.%s.k_proj.bias", l, a) == MX_OK;
            ok &= add(s, INIT_NORMAL, (int64_t)nkv * hd, 0, "model.layers.%d.%s.v_proj.bias", l, a) == MX_OK;
            if (attn_bias && !qwen2) ok &= add(s, INIT_NORMAL, H, 0, "model.layers.%d.%s.o_proj.bias", l, a) == MX_OK;
        }
        if (qwen3) {
            ok &= add(s, INIT_ONES, hd, 0, "model.layers.%d.%s.q_norm.weight", l, a) == MX_OK;
            ok &= add(s, INIT_ONES, hd, 0, "model.layers.%d.%s.k_norm.weight", l, a) == MX_OK;
        }
        ok &= add(s, INIT_ONES, H, 0, "model.layers.%d.post_attention_layernorm.weight", l) == MX_OK;
        if (mixtral) { /* intermediate_size is one expert's */
            ok &= add(s, INIT_NORMAL, E, H, "model.layers.%d.block_sparse_moe.gate.weight", l) == MX_OK;
            for (int e = 0; e < E && ok; e++) {
                ok &= add(s, INIT_NORMAL, I, H, "model.layers.%d.block_sparse_moe.experts.%d.w1.weight", l, e) == MX_OK;
                ok &= add(s, INIT_NORMAL, H, I, "model.layers.%d.block_sparse_moe.experts.%d.w2.weight", l, e) == MX_OK;
                ok &= add(s, INIT_NORMAL, I, H, "model.layers.%d.block_sparse_moe.experts.%d.w3.weight", l, e) == MX_OK;
            }
            continue;
        }
        ok &= add(s, INIT_NORMAL, I, H, "model.layers.%d.%s.gate_proj.weight", l, m) == MX_OK;
        ok &= add(s, INIT_NORMAL, I, H, "model.layers.%d.%s.up_proj.weight", l, m) == MX_OK;
        ok &= add(s, INIT_NORMAL, H, I, "model.layers.%d.%s.down_proj.weight", l, m) == MX_OK;
        if (mlp_bias) {
            ok &= add(s, INIT_NORMAL, I, 0, "model.layers.%d.%s.gate_proj.bias", l, m) == MX_OK;
            ok &= add(s, INIT_NORMAL, I, 0, "model.layers.%d.%s.up_proj.bias", l, m) == MX_OK;
            ok &= add(s, INIT_NORMAL, H, 0, "model.layers.%d.%s.down_proj.bias", l, m) == MX_OK;
        }
    }
    ok &= add(s, INIT_ONES, H, 0, "model.norm.weight") == MX_OK;
    if (!tie) ok &= add(s, INIT_NORMAL, V, H, "lm_head.weight") == MX_OK;
    return ok ? MX_OK : mx_set_err("out of memory");
}

/* Gated MLP gate/up/down under a module prefix. */
static int mlp_specs(specs *s, int H, int I, const char *prefix) {
    int ok = add(s, INIT_NORMAL, I, H, "%s.gate_proj.weight", prefix) == MX_OK;
    ok &= add(s, INIT_NORMAL, I, H, "%s.up_proj.weight", prefix) == MX_OK;
    ok &= add(s, INIT_NORMAL, H, I, "%s.down_proj.weight", prefix) == MX_OK;
    return ok ? MX_OK : MX_ERR;
}

/* DeepSeek-style MoE ffn of layer l (names as src/models/deepseek_v3.c binds
 * them): router with e_score_correction_bias when `bias`, per expert
 * gate/up/down, fused shared experts; a dense MLP of I for the layers before
 * first_k_dense_replace or off the moe_layer_freq grid. */
typedef struct { int I, E, moeI, nsh, dense, freq; bool bias; } ds_moe;

static int ds_moe_read(const mx_cfg *c, int I, const ds_moe *def, ds_moe *m) {
    *m = *def;
    m->I = I;
    if (mx_cfg_i32(c, "first_k_dense_replace", def->dense, 0, 1024, &m->dense) || mx_cfg_i32(c, "moe_layer_freq", 1, 1, 1024, &m->freq) ||
        mx_cfg_i32(c, "n_routed_experts", def->E, 0, 1 << 12, &m->E) || mx_cfg_i32(c, "moe_intermediate_size", def->moeI, 1, 1 << 20, &m->moeI) ||
        mx_cfg_i32(c, "n_shared_experts", def->nsh, 0, 1 << 10, &m->nsh))
        return MX_ERR;
    return MX_OK;
}

static int ds_moe_specs(specs *s, const ds_moe *m, int H, int l) {
    char pre[64];
    if (!m->E || l < m->dense || l % m->freq) {
        snprintf(pre, sizeof pre, "model.layers.%d.mlp", l);
        return mlp_specs(s, H, m->I, pre);
    }
    int ok = add(s, INIT_NORMAL, m->E, H, "model.layers.%d.mlp.gate.weight", l) == MX_OK;
    if (m->bias) ok &= add(s, INIT_ZEROS, m->E, 0, "model.layers.%d.mlp.gate.e_score_correction_bias", l) == MX_OK;
    for (int e = 0; e < m->E && ok; e++) {
        snprintf(pre, sizeof pre, "model.layers.%d.mlp.experts.%d", l, e);
        ok &= mlp_specs(s, H, m->moeI, pre) == MX_OK;
    }
    if (ok && m->nsh > 0) {
        snprintf(pre, sizeof pre, "model.layers.%d.mlp.shared_experts", l);
        ok &= mlp_specs(s, H, m->moeI * m->nsh, pre) == MX_OK;
    }
    return ok ? MX_OK : MX_ERR;
}

/* DeepSeek V3 (MLA; defaults as the HF config class); with `indexer`
 * (deepseek_v32) each layer also gets the sparse attention's lightning
 * indexer (self_attn.indexer: wq_b, wk, LayerNorm k_norm, weights_proj).
 * MTP layers are not written (the loader ignores them). */
static int deepseek_specs(const mx_cfg *c, bool indexer, specs *s) {
    int H, I, L, nh, V, qlr, kvr, nope, rope, vhd, ih = 0, id = 0;
    bool tie, attn_bias;
    ds_moe m;
    static const ds_moe def = {.E = 256, .moeI = 2048, .nsh = 1, .dense = 3, .bias = true};
    bool q_null = json_is_null(json_object_get(c->root, "q_lora_rank"));
    if (mx_cfg_i32(c, "hidden_size", 0, 1, 1 << 16, &H) || mx_cfg_i32(c, "intermediate_size", 0, 1, 1 << 20, &I) ||
        mx_cfg_i32(c, "num_hidden_layers", 0, 1, 1024, &L) || mx_cfg_i32(c, "num_attention_heads", 0, 1, 1024, &nh) ||
        mx_cfg_i32(c, "vocab_size", 0, 1, 1 << 22, &V) || mx_cfg_i32(c, "q_lora_rank", q_null ? 0 : 1536, 0, 1 << 20, &qlr) ||
        mx_cfg_i32(c, "kv_lora_rank", 512, 1, 1 << 20, &kvr) || mx_cfg_i32(c, "qk_nope_head_dim", 128, 0, 1 << 14, &nope) ||
        mx_cfg_i32(c, "qk_rope_head_dim", 64, 2, 1 << 14, &rope) || mx_cfg_i32(c, "v_head_dim", 128, 1, 1 << 14, &vhd) ||
        mx_cfg_bool(c, "tie_word_embeddings", false, &tie) || mx_cfg_bool(c, "attention_bias", false, &attn_bias) ||
        ds_moe_read(c, I, &def, &m))
        return MX_ERR;
    if (indexer && (mx_cfg_i32(c, "index_n_heads", 64, 1, 4096, &ih) || mx_cfg_i32(c, "index_head_dim", 128, 1, 1 << 14, &id)))
        return MX_ERR;
    if (indexer && qlr < 1) return mx_set_err("%s: q_lora_rank is required (the indexer reads the q LoRA latent)", c->file);
    if (!H || !I || !L || !nh || !V) return mx_set_err("%s: hidden_size, intermediate_size, num_hidden_layers, num_attention_heads and vocab_size are required", c->file);
    if (attn_bias) return mx_set_err("%s: attention_bias is not supported for deepseek_v3", c->file);
    int64_t qk = (int64_t)nope + rope;
    int ok = add(s, INIT_NORMAL, V, H, "model.embed_tokens.weight") == MX_OK;
    for (int l = 0; l < L && ok; l++) {
        ok &= add(s, INIT_ONES, H, 0, "model.layers.%d.input_layernorm.weight", l) == MX_OK;
        if (qlr > 0) {
            ok &= add(s, INIT_NORMAL, qlr, H, "model.layers.%d.self_attn.q_a_proj.weight", l) == MX_OK;
            ok &= add(s, INIT_ONES, qlr, 0, "model.layers.%d.self_attn.q_a_layernorm.weight", l) == MX_OK;
            ok &= add(s, INIT_NORMAL, nh * qk, qlr, "model.layers.%d.self_attn.q_b_proj.weight", l) == MX_OK;
        } else ok &= add(s, INIT_NORMAL, nh * qk, H, "model.layers.%d.self_attn.q_proj.weight", l) == MX_OK;
        ok &= add(s, INIT_NORMAL, (int64_t)kvr + rope, H, "model.layers.%d.self_attn.kv_a_proj_with_mqa.weight", l) == MX_OK;
        ok &= add(s, INIT_ONES, kvr, 0, "model.layers.%d.self_attn.kv_a_layernorm.weight", l) == MX_OK;
        ok &= add(s, INIT_NORMAL, (int64_t)nh * (nope + vhd), kvr, "model.layers.%d.self_attn.kv_b_proj.weight", l) == MX_OK;
        ok &= add(s, INIT_NORMAL, H, (int64_t)nh * vhd, "model.layers.%d.self_attn.o_proj.weight", l) == MX_OK;
        if (indexer) {
            ok &= add(s, INIT_NORMAL, (int64_t)ih * id, qlr, "model.layers.%d.self_attn.indexer.wq_b.weight", l) == MX_OK;
            ok &= add(s, INIT_NORMAL, id, H, "model.layers.%d.self_attn.indexer.wk.weight", l) == MX_OK;
            ok &= add(s, INIT_ONES, id, 0, "model.layers.%d.self_attn.indexer.k_norm.weight", l) == MX_OK;
            ok &= add(s, INIT_ZEROS, id, 0, "model.layers.%d.self_attn.indexer.k_norm.bias", l) == MX_OK;
            ok &= add(s, INIT_NORMAL, ih, H, "model.layers.%d.self_attn.indexer.weights_proj.weight", l) == MX_OK;
        }
        ok &= add(s, INIT_ONES, H, 0, "model.layers.%d.post_attention_layernorm.weight", l) == MX_OK;
        ok &= ds_moe_specs(s, &m, H, l) == MX_OK;
    }
    ok &= add(s, INIT_ONES, H, 0, "model.norm.weight") == MX_OK;
    if (!tie) ok &= add(s, INIT_NORMAL, V, H, "lm_head.weight") == MX_OK;
    return ok ? MX_OK : mx_set_err("out of memory");
}

/* GQA attention + DeepSeek-style MoE: deepseek (DeepSeek-MoE: Llama attention,
 * softmax router) and glm4_moe (GLM-4.5: q/k/v biases with attention_bias,
 * per-head q/k norms with use_qk_norm, router correction bias). Defaults as
 * each HF config class. */
static int gqa_moe_specs(const mx_cfg *c, const char *mt, specs *s) {
    int H, I, L, nh, nkv, hd, V;
    bool tie, bias, qk;
    bool glm = !strcmp(mt, "glm4_moe");
    ds_moe m;
    static const ds_moe def_ds = {.E = 0, .moeI = 1407, .nsh = 0, .dense = 0}, def_glm = {.E = 128, .moeI = 1408, .nsh = 1, .dense = 1, .bias = true};
    if (mx_cfg_i32(c, "hidden_size", 0, 1, 1 << 16, &H) || mx_cfg_i32(c, "intermediate_size", 0, 1, 1 << 20, &I) ||
        mx_cfg_i32(c, "num_hidden_layers", 0, 1, 1024, &L) || mx_cfg_i32(c, "num_attention_heads", 0, 1, 1024, &nh) ||
        mx_cfg_i32(c, "vocab_size", 0, 1, 1 << 22, &V) || ds_moe_read(c, I, glm ? &def_glm : &def_ds, &m))
        return MX_ERR;
    if (!H || !I || !L || !nh || !V) return mx_set_err("%s: hidden_size, intermediate_size, num_hidden_layers, num_attention_heads and vocab_size are required", c->file);
    if (mx_cfg_i32(c, "num_key_value_heads", nh, 1, 1024, &nkv) || mx_cfg_i32(c, "head_dim", H / nh, 1, 1 << 14, &hd) ||
        mx_cfg_bool(c, "tie_word_embeddings", false, &tie) || mx_cfg_bool(c, "attention_bias", false, &bias) ||
        mx_cfg_bool(c, "use_qk_norm", false, &qk))
        return MX_ERR;
    int ok = add(s, INIT_NORMAL, V, H, "model.embed_tokens.weight") == MX_OK;
    for (int l = 0; l < L && ok; l++) {
        const char *a = "self_attn";
        ok &= add(s, INIT_ONES, H, 0, "model.layers.%d.input_layernorm.weight", l) == MX_OK;
        ok &= add(s, INIT_NORMAL, (int64_t)nh * hd, H, "model.layers.%d.%s.q_proj.weight", l, a) == MX_OK;
        ok &= add(s, INIT_NORMAL, (int64_t)nkv * hd, H, "model.layers.%d.%s.k_proj.weight", l, a) == MX_OK;
        ok &= add(s, INIT_NORMAL, (int64_t)nkv * hd, H, "model.layers.%d.%s.v_proj.weight", l, a) == MX_OK;
        ok &= add(s, INIT_NORMAL, H, (int64_t)nh * hd, "model.layers.%d.%s.o_proj.weight", l, a) == MX_OK;
        if (bias) { /* GLM-4.5: q/k/v only; DeepSeek-MoE: o too */
            ok &= add(s, INIT_NORMAL, (int64_t)nh * hd, 0, "model.layers.%d.%s.q_proj.bias", l, a) == MX_OK;
            ok &= add(s, INIT_NORMAL, (int64_t)nkv * hd, 0, "model.layers.%d.%s.k_proj.bias", l, a) == MX_OK;
            ok &= add(s, INIT_NORMAL, (int64_t)nkv * hd, 0, "model.layers.%d.%s.v_proj.bias", l, a) == MX_OK;
            if (!glm) ok &= add(s, INIT_NORMAL, H, 0, "model.layers.%d.%s.o_proj.bias", l, a) == MX_OK;
        }
        if (glm && qk) {
            ok &= add(s, INIT_ONES, hd, 0, "model.layers.%d.%s.q_norm.weight", l, a) == MX_OK;
            ok &= add(s, INIT_ONES, hd, 0, "model.layers.%d.%s.k_norm.weight", l, a) == MX_OK;
        }
        ok &= add(s, INIT_ONES, H, 0, "model.layers.%d.post_attention_layernorm.weight", l) == MX_OK;
        ok &= ds_moe_specs(s, &m, H, l) == MX_OK;
    }
    ok &= add(s, INIT_ONES, H, 0, "model.norm.weight") == MX_OK;
    if (!tie) ok &= add(s, INIT_NORMAL, V, H, "lm_head.weight") == MX_OK;
    return ok ? MX_OK : mx_set_err("out of memory");
}

/* layer_types[i] when the config has it, else the family's default */
static int layer_type(const mx_cfg *c, int i, const char *def, const char **out) {
    json_t *lt = mx_cfg_get(c, "layer_types");
    *out = lt ? json_string_value(json_array_get(lt, (size_t)i)) : def;
    return *out ? MX_OK : mx_set_err("%s: layer_types[%d]: expected a string", c->file, i);
}

/* Qwen3.5 (text, dense): gated DeltaNet layers with split projections and
 * gated-attention layers (defaults as Qwen3_5TextConfig, the 9B shape). The
 * (1+w) norms are written as zeros, the DeltaNet output norm as ones. */
static int qwen3_5_specs(const mx_cfg *c, specs *s) {
    int H, I, L, nh, nkv, hd, V, nk, nv, dk, dv, K, interval;
    bool tie;
    if (mx_cfg_i32(c, "hidden_size", 4096, 1, 1 << 16, &H) || mx_cfg_i32(c, "intermediate_size", 12288, 1, 1 << 20, &I) ||
        mx_cfg_i32(c, "num_hidden_layers", 32, 1, 1024, &L) || mx_cfg_i32(c, "num_attention_heads", 16, 1, 1024, &nh) ||
        mx_cfg_i32(c, "num_key_value_heads", 4, 1, 1024, &nkv) || mx_cfg_i32(c, "head_dim", 256, 1, 1 << 14, &hd) ||
        mx_cfg_i32(c, "vocab_size", 248320, 1, 1 << 22, &V) || mx_cfg_i32(c, "linear_num_key_heads", 16, 1, 1024, &nk) ||
        mx_cfg_i32(c, "linear_num_value_heads", 32, 1, 1024, &nv) || mx_cfg_i32(c, "linear_key_head_dim", 128, 1, 4096, &dk) ||
        mx_cfg_i32(c, "linear_value_head_dim", 128, 1, 4096, &dv) || mx_cfg_i32(c, "linear_conv_kernel_dim", 4, 1, 64, &K) ||
        mx_cfg_i32(c, "full_attention_interval", 4, 1, 1024, &interval) || mx_cfg_bool(c, "tie_word_embeddings", false, &tie))
        return MX_ERR;
    int64_t C = 2 * (int64_t)nk * dk + (int64_t)nv * dv;
    int ok = add(s, INIT_NORMAL, V, H, "model.embed_tokens.weight") == MX_OK;
    for (int l = 0; l < L && ok; l++) {
        const char *t;
        if (layer_type(c, l, (l + 1) % interval ? "linear_attention" : "full_attention", &t)) return MX_ERR;
        ok &= add(s, INIT_ZEROS, H, 0, "model.layers.%d.input_layernorm.weight", l) == MX_OK;
        ok &= add(s, INIT_ZEROS, H, 0, "model.layers.%d.post_attention_layernorm.weight", l) == MX_OK;
        if (!strcmp(t, "linear_attention")) {
            const char *p = "linear_attn";
            ok &= add(s, INIT_NORMAL, C, H, "model.layers.%d.%s.in_proj_qkv.weight", l, p) == MX_OK;
            ok &= add(s, INIT_NORMAL, (int64_t)nv * dv, H, "model.layers.%d.%s.in_proj_z.weight", l, p) == MX_OK;
            ok &= add(s, INIT_NORMAL, nv, H, "model.layers.%d.%s.in_proj_b.weight", l, p) == MX_OK;
            ok &= add(s, INIT_NORMAL, nv, H, "model.layers.%d.%s.in_proj_a.weight", l, p) == MX_OK;
            ok &= add(s, INIT_NORMAL, C, K, "model.layers.%d.%s.conv1d.weight", l, p) == MX_OK;
            ok &= add(s, INIT_NORMAL, nv, 0, "model.layers.%d.%s.A_log", l, p) == MX_OK;
            ok &= add(s, INIT_NORMAL, nv, 0, "model.layers.%d.%s.dt_bias", l, p) == MX_OK;
            ok &= add(s, INIT_ONES, dv, 0, "model.layers.%d.%s.norm.weight", l, p) == MX_OK;
            ok &= add(s, INIT_NORMAL, H, (int64_t)nv * dv, "model.layers.%d.%s.out_proj.weight", l, p) == MX_OK;
        } else {
            ok &= add(s, INIT_NORMAL, 2 * (int64_t)nh * hd, H, "model.layers.%d.self_attn.q_proj.weight", l) == MX_OK;
            ok &= add(s, INIT_NORMAL, (int64_t)nkv * hd, H, "model.layers.%d.self_attn.k_proj.weight", l) == MX_OK;
            ok &= add(s, INIT_NORMAL, (int64_t)nkv * hd, H, "model.layers.%d.self_attn.v_proj.weight", l) == MX_OK;
            ok &= add(s, INIT_NORMAL, H, (int64_t)nh * hd, "model.layers.%d.self_attn.o_proj.weight", l) == MX_OK;
            ok &= add(s, INIT_ZEROS, hd, 0, "model.layers.%d.self_attn.q_norm.weight", l) == MX_OK;
            ok &= add(s, INIT_ZEROS, hd, 0, "model.layers.%d.self_attn.k_norm.weight", l) == MX_OK;
        }
        char pre[64];
        snprintf(pre, sizeof pre, "model.layers.%d.mlp", l);
        ok &= mlp_specs(s, H, I, pre) == MX_OK;
    }
    ok &= add(s, INIT_ZEROS, H, 0, "model.norm.weight") == MX_OK;
    if (!tie) ok &= add(s, INIT_NORMAL, V, H, "lm_head.weight") == MX_OK;
    return ok ? MX_OK : mx_set_err("out of memory");
}

/* Gemma 4 (text, dense): sliding / full layers (full ones with global_head_dim
 * and, with attention_k_eq_v, num_global_key_value_heads heads and no v_proj),
 * KV-shared last layers without k/v (double-wide MLP when asked), per-layer
 * inputs, layer scalars; defaults as Gemma4TextConfig. */
static int gemma4_specs(const mx_cfg *c, specs *s) {
    int H, I, L, nh, nkv, hd, V, ghd, gkv, shared, P, VP;
    bool tie, k_eq_v, wide;
    if (mx_cfg_i32(c, "hidden_size", 2304, 1, 1 << 16, &H) || mx_cfg_i32(c, "intermediate_size", 9216, 1, 1 << 20, &I) ||
        mx_cfg_i32(c, "num_hidden_layers", 30, 1, 1024, &L) || mx_cfg_i32(c, "num_attention_heads", 8, 1, 1024, &nh) ||
        mx_cfg_i32(c, "num_key_value_heads", 4, 1, 1024, &nkv) || mx_cfg_i32(c, "head_dim", 256, 1, 1 << 14, &hd) ||
        mx_cfg_i32(c, "vocab_size", 262144, 1, 1 << 22, &V) || mx_cfg_i32(c, "global_head_dim", 512, 0, 1 << 14, &ghd) ||
        mx_cfg_i32(c, "num_global_key_value_heads", nkv, 1, 1024, &gkv) || mx_cfg_i32(c, "num_kv_shared_layers", 0, 0, 1024, &shared) ||
        mx_cfg_i32(c, "hidden_size_per_layer_input", 256, 0, 1 << 16, &P) ||
        mx_cfg_i32(c, "vocab_size_per_layer_input", 262144, 1, 1 << 22, &VP) || mx_cfg_bool(c, "tie_word_embeddings", true, &tie) ||
        mx_cfg_bool(c, "attention_k_eq_v", false, &k_eq_v) || mx_cfg_bool(c, "use_double_wide_mlp", false, &wide))
        return MX_ERR;
    if (!ghd) ghd = hd;
    int ok = add(s, INIT_NORMAL, V, H, "model.embed_tokens.weight") == MX_OK;
    if (P) {
        ok &= add(s, INIT_NORMAL, VP, (int64_t)L * P, "model.embed_tokens_per_layer.weight") == MX_OK;
        ok &= add(s, INIT_NORMAL, (int64_t)L * P, H, "model.per_layer_model_projection.weight") == MX_OK;
        ok &= add(s, INIT_ONES, P, 0, "model.per_layer_projection_norm.weight") == MX_OK;
    }
    for (int l = 0; l < L && ok; l++) {
        const char *t;
        if (layer_type(c, l, (l + 1) % 6 ? "sliding_attention" : "full_attention", &t)) return MX_ERR;
        bool full = l == L - 1 || !strcmp(t, "full_attention"), kv_own = l < L - shared;
        int d = full ? ghd : hd, kv = full && k_eq_v ? gkv : nkv;
        static const char *norms[] = {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                                      "post_feedforward_layernorm"};
        for (int k = 0; k < 4; k++) ok &= add(s, INIT_ONES, H, 0, "model.layers.%d.%s.weight", l, norms[k]) == MX_OK;
        ok &= add(s, INIT_NORMAL, (int64_t)nh * d, H, "model.layers.%d.self_attn.q_proj.weight", l) == MX_OK;
        ok &= add(s, INIT_ONES, d, 0, "model.layers.%d.self_attn.q_norm.weight", l) == MX_OK;
        if (kv_own) {
            ok &= add(s, INIT_NORMAL, (int64_t)kv * d, H, "model.layers.%d.self_attn.k_proj.weight", l) == MX_OK;
            if (!(full && k_eq_v)) ok &= add(s, INIT_NORMAL, (int64_t)kv * d, H, "model.layers.%d.self_attn.v_proj.weight", l) == MX_OK;
            ok &= add(s, INIT_ONES, d, 0, "model.layers.%d.self_attn.k_norm.weight", l) == MX_OK;
        }
        ok &= add(s, INIT_NORMAL, H, (int64_t)nh * d, "model.layers.%d.self_attn.o_proj.weight", l) == MX_OK;
        char pre[64];
        snprintf(pre, sizeof pre, "model.layers.%d.mlp", l);
        ok &= mlp_specs(s, H, !kv_own && wide ? 2 * I : I, pre) == MX_OK;
        if (P) {
            ok &= add(s, INIT_NORMAL, P, H, "model.layers.%d.per_layer_input_gate.weight", l) == MX_OK;
            ok &= add(s, INIT_NORMAL, H, P, "model.layers.%d.per_layer_projection.weight", l) == MX_OK;
            ok &= add(s, INIT_ONES, H, 0, "model.layers.%d.post_per_layer_input_norm.weight", l) == MX_OK;
        }
        ok &= add(s, INIT_ONES, 1, 0, "model.layers.%d.layer_scalar", l) == MX_OK;
    }
    ok &= add(s, INIT_ONES, H, 0, "model.norm.weight") == MX_OK;
    if (!tie) ok &= add(s, INIT_NORMAL, V, H, "lm_head.weight") == MX_OK;
    return ok ? MX_OK : mx_set_err("out of memory");
}

/* sentence-transformers layout (all-MiniLM-L6-v2): no "bert." prefix. */
static int bert_specs(const mx_cfg *c, specs *s) {
    int H, I, L, V, P, T;
    if (mx_cfg_i32(c, "hidden_size", 0, 1, 1 << 16, &H) || mx_cfg_i32(c, "intermediate_size", 0, 1, 1 << 20, &I) ||
        mx_cfg_i32(c, "num_hidden_layers", 0, 1, 1024, &L) || mx_cfg_i32(c, "vocab_size", 0, 1, 1 << 22, &V) ||
        mx_cfg_i32(c, "max_position_embeddings", 512, 1, 1 << 20, &P) || mx_cfg_i32(c, "type_vocab_size", 2, 1, 1024, &T))
        return MX_ERR;
    if (!H || !I || !L || !V) return mx_set_err("%s: hidden_size, intermediate_size, num_hidden_layers and vocab_size are required", c->file);
    int ok = add(s, INIT_NORMAL, V, H, "embeddings.word_embeddings.weight") == MX_OK;
    ok &= add(s, INIT_NORMAL, P, H, "embeddings.position_embeddings.weight") == MX_OK;
    ok &= add(s, INIT_NORMAL, T, H, "embeddings.token_type_embeddings.weight") == MX_OK;
    ok &= add(s, INIT_ONES, H, 0, "embeddings.LayerNorm.weight") == MX_OK;
    ok &= add(s, INIT_ZEROS, H, 0, "embeddings.LayerNorm.bias") == MX_OK;
    for (int l = 0; l < L && ok; l++) {
        static const char *qkv[] = {"query", "key", "value"};
        for (int i = 0; i < 3; i++) {
            ok &= add(s, INIT_NORMAL, H, H, "encoder.layer.%d.attention.self.%s.weight", l, qkv[i]) == MX_OK;
            ok &= add(s, INIT_NORMAL, H, 0, "encoder.layer.%d.attention.self.%s.bias", l, qkv[i]) == MX_OK;
        }
        ok &= add(s, INIT_NORMAL, H, H, "encoder.layer.%d.attention.output.dense.weight", l) == MX_OK;
        ok &= add(s, INIT_NORMAL, H, 0, "encoder.layer.%d.attention.output.dense.bias", l) == MX_OK;
        ok &= add(s, INIT_ONES, H, 0, "encoder.layer.%d.attention.output.LayerNorm.weight", l) == MX_OK;
        ok &= add(s, INIT_ZEROS, H, 0, "encoder.layer.%d.attention.output.LayerNorm.bias", l) == MX_OK;
        ok &= add(s, INIT_NORMAL, I, H, "encoder.layer.%d.intermediate.dense.weight", l) == MX_OK;
        ok &= add(s, INIT_NORMAL, I, 0, "encoder.layer.%d.intermediate.dense.bias", l) == MX_OK;
        ok &= add(s, INIT_NORMAL, H, I, "encoder.layer.%d.output.dense.weight", l) == MX_OK;
        ok &= add(s, INIT_NORMAL, H, 0, "encoder.layer.%d.output.dense.bias", l) == MX_OK;
        ok &= add(s, INIT_ONES, H, 0, "encoder.layer.%d.output.LayerNorm.weight", l) == MX_OK;
        ok &= add(s, INIT_ZEROS, H, 0, "encoder.layer.%d.output.LayerNorm.bias", l) == MX_OK;
    }
    ok &= add(s, INIT_NORMAL, H, H, "pooler.dense.weight") == MX_OK;
    ok &= add(s, INIT_NORMAL, H, 0, "pooler.dense.bias") == MX_OK;
    return ok ? MX_OK : mx_set_err("out of memory");
}

/* ---- random numbers: splitmix64 + Box-Muller ---- */

static uint64_t g_rng;
static uint64_t rng64(void) {
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void normals(float *out, size_t n, float sd) {
    for (size_t i = 0; i < n; i += 2) {
        uint64_t r = rng64();
        float u1 = ((float)(r >> 40) + 0.5f) * (1.0f / 16777216.0f); /* (0, 1) */
        float u2 = (float)((r >> 16) & 0xffffff) * (1.0f / 16777216.0f);
        float m = sd * sqrtf(-2.0f * logf(u1));
        float a = 6.28318530717958647f * u2;
        out[i] = m * cosf(a);
        if (i + 1 < n) out[i + 1] = m * sinf(a);
    }
}

/* ---- writing ---- */

static int write_text(const char *dir, const char *name, const char *text, size_t len) {
    char *p = mx_path_join(dir, name);
    if (!p) return MX_ERR;
    FILE *f = fopen(p, "wb");
    int ok = f && fwrite(text, 1, len, f) == len;
    if (f) ok = (fclose(f) == 0) && ok;
    int rc = ok ? MX_OK : mx_set_err("%s: cannot write: %s", p, strerror(errno));
    free(p);
    return rc;
}

/* Codes are U32 words, an affine matrix's scales and biases bf16 (as mlx-lm
 * writes them from a bf16 model), everything else the chosen dtype. */
static mx_dtype spec_dtype(const spec *e, mx_dtype dt) {
    return e->init == INIT_QCODES ? MX_DT_U32 : e->init == INIT_QSCALES || e->init == INIT_QBIASES ? MX_DT_BF16 : dt;
}

static int write_safetensors(const char *path, const specs *s, mx_dtype dt, float sd) {
    mx_st_out *ts = calloc((size_t)s->n + 1, sizeof *ts);
    if (!ts) return mx_set_err("out of memory");
    for (int i = 0; i < s->n; i++) {
        const spec *e = &s->v[i];
        mx_dtype edt = spec_dtype(e, dt);
        ts[i] = (mx_st_out){e->name, edt, e->ndim, {e->shape[0], e->shape[1], e->shape[2]}, NULL, numel_of(e) * mx_dtype_size(edt)};
    }
    FILE *f = mx_st_create(path, ts, s->n, "{\"format\":\"pt\"}");
    free(ts);
    if (!f) return MX_ERR;
    int ok = 1;
    enum { CH = 1 << 20 };
    float *buf = malloc(sizeof(float) * CH);
    uint8_t *obuf = malloc((size_t)CH * 4);
    if (!buf || !obuf) ok = 0;
    for (int i = 0; ok && i < s->n; i++) {
        const spec *e = &s->v[i];
        size_t numel = numel_of(e);
        mx_dtype edt = spec_dtype(e, dt);
        size_t es = mx_dtype_size(edt);
        /* codes uniform over [0, L], L = 2^bits - 1: variance L(L+2)/12 */
        double L = e->bits ? (double)((1u << e->bits) - 1) : 0, qs = e->bits ? sd / sqrt(L * (L + 2) / 12) : 0;
        for (size_t done = 0; ok && done < numel; done += CH) {
            size_t m = MX_MIN((size_t)CH, numel - done);
            if (e->init == INIT_QCODES) {
                for (size_t j = 0; j < m; j++) {
                    uint32_t w = (uint32_t)rng64();
                    memcpy(obuf + 4 * j, &w, 4);
                }
                ok = fwrite(obuf, es, m, f) == m;
                continue;
            }
            if (e->init == INIT_NORMAL) normals(buf, m, sd);
            else {
                float v = e->init == INIT_ONES ? 1.0f : e->init == INIT_QSCALES ? (float)qs : e->init == INIT_QBIASES ? (float)(-qs * L / 2) : 0.0f;
                for (size_t j = 0; j < m; j++) buf[j] = v;
            }
            if (edt == MX_DT_F32) memcpy(obuf, buf, m * 4);
            else
                for (size_t j = 0; j < m; j++) {
                    uint16_t v = edt == MX_DT_F16 ? mx_f32_to_f16(buf[j]) : mx_f32_to_bf16(buf[j]);
                    memcpy(obuf + 2 * j, &v, 2);
                }
            ok = fwrite(obuf, es, m, f) == m;
        }
    }
    free(buf);
    free(obuf);
    ok = (fclose(f) == 0) && ok;
    return ok ? MX_OK : mx_set_err("%s: write failed: %s", path, strerror(errno));
}

/* ---- whisper ---- */
static void attn4(specs *s, int *ok, int H, const char *pre, int l, const char *kind) {
    static const char *pr[] = {"q_proj", "k_proj", "v_proj", "out_proj"};
    for (int i = 0; i < 4; i++) {
        *ok &= add(s, INIT_NORMAL, H, H, "%s.layers.%d.%s.%s.weight", pre, l, kind, pr[i]) == MX_OK;
        if (i != 1) *ok &= add(s, INIT_NORMAL, H, 0, "%s.layers.%d.%s.%s.bias", pre, l, kind, pr[i]) == MX_OK;
    }
}
static void ln(specs *s, int *ok, int H, const char *fmt, const char *pre, int l) {
    char nm[160];
    snprintf(nm, sizeof nm, fmt, pre, l);
    *ok &= add(s, INIT_ONES, H, 0, "%s.weight", nm) == MX_OK;
    *ok &= add(s, INIT_ZEROS, H, 0, "%s.bias", nm) == MX_OK;
}

static int whisper_specs(const mx_cfg *c, specs *s) {
    int H, V, M, src, tgt, Le, Ld, Fe, Fd;
    if (mx_cfg_i32(c, "d_model", 0, 1, 1 << 16, &H) || mx_cfg_i32(c, "vocab_size", 0, 1, 1 << 22, &V) ||
        mx_cfg_i32(c, "num_mel_bins", 80, 1, 512, &M) || mx_cfg_i32(c, "max_source_positions", 1500, 1, 1 << 16, &src) ||
        mx_cfg_i32(c, "max_target_positions", 448, 1, 1 << 16, &tgt) || mx_cfg_i32(c, "encoder_layers", 0, 1, 1024, &Le) ||
        mx_cfg_i32(c, "decoder_layers", 0, 1, 1024, &Ld) || mx_cfg_i32(c, "encoder_ffn_dim", 0, 1, 1 << 20, &Fe) ||
        mx_cfg_i32(c, "decoder_ffn_dim", 0, 1, 1 << 20, &Fd))
        return MX_ERR;
    if (!H || !V || !Le || !Ld || !Fe || !Fd) return mx_set_err("%s: d_model, vocab_size, the layer counts and the ffn sizes are required", c->file);
    int ok = 1;
    ok &= add(s, INIT_NORMAL, H, M, "model.encoder.conv1.weight") == MX_OK;
    s->v[s->n - 1].ndim = 3, s->v[s->n - 1].shape[2] = 3;
    ok &= add(s, INIT_NORMAL, H, 0, "model.encoder.conv1.bias") == MX_OK;
    ok &= add(s, INIT_NORMAL, H, H, "model.encoder.conv2.weight") == MX_OK;
    s->v[s->n - 1].ndim = 3, s->v[s->n - 1].shape[2] = 3;
    ok &= add(s, INIT_NORMAL, H, 0, "model.encoder.conv2.bias") == MX_OK;
    ok &= add(s, INIT_NORMAL, src, H, "model.encoder.embed_positions.weight") == MX_OK;
    ok &= add(s, INIT_NORMAL, V, H, "model.decoder.embed_tokens.weight") == MX_OK;
    ok &= add(s, INIT_NORMAL, tgt, H, "model.decoder.embed_positions.weight") == MX_OK;
    for (int d = 0; d < 2; d++) {
        const char *pre = d ? "model.decoder" : "model.encoder";
        int L = d ? Ld : Le, F = d ? Fd : Fe;
        for (int l = 0; l < L && ok; l++) {
            attn4(s, &ok, H, pre, l, "self_attn");
            ln(s, &ok, H, "%s.layers.%d.self_attn_layer_norm", pre, l);
            if (d) {
                attn4(s, &ok, H, pre, l, "encoder_attn");
                ln(s, &ok, H, "%s.layers.%d.encoder_attn_layer_norm", pre, l);
            }
            ok &= add(s, INIT_NORMAL, F, H, "%s.layers.%d.fc1.weight", pre, l) == MX_OK;
            ok &= add(s, INIT_NORMAL, F, 0, "%s.layers.%d.fc1.bias", pre, l) == MX_OK;
            ok &= add(s, INIT_NORMAL, H, F, "%s.layers.%d.fc2.weight", pre, l) == MX_OK;
            ok &= add(s, INIT_NORMAL, H, 0, "%s.layers.%d.fc2.bias", pre, l) == MX_OK;
            ln(s, &ok, H, "%s.layers.%d.final_layer_norm", pre, l);
        }
        ok &= add(s, INIT_ONES, H, 0, "%s.layer_norm.weight", pre) == MX_OK;
        ok &= add(s, INIT_ZEROS, H, 0, "%s.layer_norm.bias", pre) == MX_OK;
    }
    return ok ? MX_OK : mx_set_err("out of memory");
}

/* Whisper's token layout for a vocabulary of V: <|endoftext|> 50257, then
 * <|startoftranscript|>, the languages (99, or 100 from large-v3's 51866 on),
 * translate, transcribe, startoflm, startofprev, nospeech, notimestamps and
 * 1501 timestamps. Lower ids are byte-level filler tokens. */
static const char *const WLANG[] = {"en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca", "nl", "ar", "sv", "it", "id",
    "hi", "fi", "vi", "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no", "th", "ur", "hr", "bg", "lt", "la", "mi", "ml", "cy",
    "sk", "te", "fa", "lv", "bn", "sr", "az", "sl", "kn", "et", "mk", "br", "eu", "is", "hy", "ne", "mn", "bs", "kk", "sq", "sw", "gl",
    "mr", "pa", "si", "km", "sn", "yo", "so", "af", "oc", "ka", "be", "tg", "sd", "gu", "am", "yi", "lo", "uz", "fo", "ht", "ps", "tk",
    "nn", "mt", "sa", "lb", "my", "bo", "tl", "mg", "as", "tt", "haw", "ln", "ha", "ba", "jw", "su", "yue"};

static int whisper_files(const char *dir, const mx_cfg *c) {
    int V, M;
    if (mx_cfg_i32(c, "vocab_size", 0, 1, 1 << 22, &V) || mx_cfg_i32(c, "num_mel_bins", 80, 1, 512, &M)) return MX_ERR;
    int eot = 50257, nl = V - 51865 + 99;
    if (nl < 1 || nl > 100) return mx_set_err("%s: vocab_size %d is not a Whisper vocabulary (51865 or 51866)", c->file, V);
    int sot = eot + 1, trl = sot + 1 + nl, trs = trl + 1, notsi = trs + 4, tb = notsi + 1;
    mx_buf v = {0}, t = {0}, g = {0}, p = {0};
    /* vocab.json: the 256 byte-level characters, then fillers up to <|endoftext|> */
    mx_buf_puts(&v, "{");
    for (int b = 0, extra = 0; b < 256; b++) { /* GPT-2's bytes_to_unicode */
        int cp = (b >= 33 && b <= 126) || (b >= 161 && b <= 255 && b != 173) ? b : 256 + extra++;
        if (cp == '"' || cp == '\\') mx_buf_printf(&v, "%s\"\\%c\": %d", b ? ", " : "", cp, b);
        else mx_buf_printf(&v, "%s\"\\u%04x\": %d", b ? ", " : "", cp, b);
    }
    for (int i = 256; i < eot; i++) mx_buf_printf(&v, ", \"t%d\": %d", i, i);
    mx_buf_printf(&v, ", \"<|endoftext|>\": %d}", eot);
    mx_buf_puts(&t, "{\"tokenizer_class\": \"WhisperTokenizer\", \"bos_token\": \"<|endoftext|>\", \"eos_token\": \"<|endoftext|>\", "
                    "\"unk_token\": \"<|endoftext|>\", \"pad_token\": \"<|endoftext|>\", \"added_tokens_decoder\": {");
    for (int id = eot; id < V; id++) {
        char nm[32];
        if (id == eot) snprintf(nm, sizeof nm, "<|endoftext|>");
        else if (id == sot) snprintf(nm, sizeof nm, "<|startoftranscript|>");
        else if (id < trl) snprintf(nm, sizeof nm, "<|%s|>", WLANG[id - sot - 1]);
        else if (id < tb) snprintf(nm, sizeof nm, "%s", (const char *[]){"<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>"}[id - trl]);
        else snprintf(nm, sizeof nm, "<|%.2f|>", (id - tb) * 0.02);
        mx_buf_printf(&t, "%s\"%d\": {\"content\": \"%s\", \"special\": %s}", id > eot ? ", " : "", id, nm, id < tb ? "true" : "false");
    }
    mx_buf_puts(&t, "}}");
    mx_buf_printf(&g, "{\"decoder_start_token_id\": %d, \"bos_token_id\": %d, \"eos_token_id\": %d, \"pad_token_id\": %d, "
                      "\"no_timestamps_token_id\": %d, \"prev_sot_token_id\": %d, \"is_multilingual\": true, \"max_length\": 448, "
                      "\"max_initial_timestamp_index\": 50, \"begin_suppress_tokens\": [220, %d], \"suppress_tokens\": [1, 2, 7, 8, 9, 10, 14, 25], "
                      "\"task_to_id\": {\"translate\": %d, \"transcribe\": %d}, \"lang_to_id\": {",
                  sot, eot, eot, eot, notsi, trs + 2, eot, trl, trs);
    for (int i = 0; i < nl; i++) mx_buf_printf(&g, "%s\"<|%s|>\": %d", i ? ", " : "", WLANG[i], sot + 1 + i);
    mx_buf_puts(&g, "}}");
    mx_buf_printf(&p, "{\"feature_extractor_type\": \"WhisperFeatureExtractor\", \"feature_size\": %d, \"sampling_rate\": 16000, "
                      "\"hop_length\": 160, \"n_fft\": 400, \"chunk_length\": 30, \"n_samples\": 480000, \"nb_max_frames\": 3000}", M);
    int rc = !v.data || !t.data || !g.data || !p.data ? mx_set_err("out of memory")
             : write_text(dir, "vocab.json", v.data, v.len) || write_text(dir, "merges.txt", "#version: 0.2\n", 14) ||
               write_text(dir, "tokenizer_config.json", t.data, t.len) || write_text(dir, "generation_config.json", g.data, g.len) ||
               write_text(dir, "preprocessor_config.json", p.data, p.len);
    mx_buf_free(&v); mx_buf_free(&t); mx_buf_free(&g); mx_buf_free(&p);
    return rc;
}

/* ---- vision-language models ---- */

static int lin(specs *s, int out, int in, bool bias, const char *fmt, const char *pfx, int l) {
    char name[256];
    snprintf(name, sizeof name, fmt, pfx, l);
    int ok = add(s, INIT_NORMAL, out, in, "%s.weight", name) == MX_OK;
    if (bias) ok &= add(s, INIT_NORMAL, out, 0, "%s.bias", name) == MX_OK;
    return ok ? MX_OK : MX_ERR;
}

/* Qwen2-VL: the Qwen2 text model (plain names) and "visual." */
static int qwen2_vl_specs(const mx_cfg *c, specs *s) {
    if (llama_specs(c, "qwen2", s)) return MX_ERR;
    json_t *vj = json_object_get(c->root, "vision_config");
    mx_cfg v = {vj, NULL, c->file};
    int depth, D, heads, ratio, H, P, T;
    if (!json_is_object(vj) || mx_cfg_i32(&v, "depth", 32, 1, 1024, &depth) || mx_cfg_i32(&v, "embed_dim", 1280, 1, 1 << 16, &D) ||
        mx_cfg_i32(&v, "num_heads", 16, 1, 1024, &heads) || mx_cfg_i32(&v, "mlp_ratio", 4, 1, 64, &ratio) ||
        mx_cfg_i32(&v, "hidden_size", 3584, 1, 1 << 16, &H) || mx_cfg_i32(&v, "patch_size", 14, 1, 1024, &P) ||
        mx_cfg_i32(&v, "temporal_patch_size", 2, 1, 16, &T))
        return mx_set_err("%s: vision_config: %s", c->file, mx_errmsg());
    const char *p = "visual";
    int ok = add(s, INIT_NORMAL, D, 3 * T * P * P, "visual.patch_embed.proj.weight") == MX_OK;
    for (int l = 0; l < depth && ok; l++) {
        ln(s, &ok, D, "%s.blocks.%d.norm1", p, l);
        ln(s, &ok, D, "%s.blocks.%d.norm2", p, l);
        ok &= lin(s, 3 * D, D, true, "%s.blocks.%d.attn.qkv", p, l) == MX_OK && lin(s, D, D, true, "%s.blocks.%d.attn.proj", p, l) == MX_OK;
        ok &= lin(s, D * ratio, D, true, "%s.blocks.%d.mlp.fc1", p, l) == MX_OK && lin(s, D, D * ratio, true, "%s.blocks.%d.mlp.fc2", p, l) == MX_OK;
    }
    ln(s, &ok, D, "%s.merger.ln_q", p, 0);
    ok &= lin(s, 4 * D, 4 * D, true, "%s.merger.mlp.0", p, 0) == MX_OK &&
          lin(s, H, 4 * D, true, "%s.merger.mlp.2", p, 0) == MX_OK;
    return ok ? MX_OK : mx_set_err("out of memory");
}

/* Qwen2.5-VL as released: the Qwen2 text model (plain names) and "visual."
 * with RMSNorm (weight only), SwiGLU with biases and an RMSNorm merger */
static int qwen2_5_vl_specs(const mx_cfg *c, specs *s) {
    if (llama_specs(c, "qwen2", s)) return MX_ERR;
    json_t *vj = json_object_get(c->root, "vision_config");
    mx_cfg v = {vj, NULL, c->file};
    int depth, D, F, H, P, T;
    if (!json_is_object(vj) || mx_cfg_i32(&v, "depth", 32, 1, 1024, &depth) || mx_cfg_i32(&v, "hidden_size", 1280, 1, 1 << 16, &D) ||
        mx_cfg_i32(&v, "intermediate_size", 3420, 1, 1 << 20, &F) || mx_cfg_i32(&v, "out_hidden_size", 2048, 1, 1 << 16, &H) ||
        mx_cfg_i32(&v, "patch_size", 14, 1, 1024, &P) || mx_cfg_i32(&v, "temporal_patch_size", 2, 1, 16, &T))
        return mx_set_err("%s: vision_config: %s", c->file, mx_errmsg());
    const char *p = "visual";
    int ok = add(s, INIT_NORMAL, D, 3 * T * P * P, "visual.patch_embed.proj.weight") == MX_OK;
    for (int l = 0; l < depth && ok; l++) {
        ok &= add(s, INIT_ONES, D, 0, "%s.blocks.%d.norm1.weight", p, l) == MX_OK && add(s, INIT_ONES, D, 0, "%s.blocks.%d.norm2.weight", p, l) == MX_OK;
        ok &= lin(s, 3 * D, D, true, "%s.blocks.%d.attn.qkv", p, l) == MX_OK && lin(s, D, D, true, "%s.blocks.%d.attn.proj", p, l) == MX_OK;
        ok &= lin(s, F, D, true, "%s.blocks.%d.mlp.gate_proj", p, l) == MX_OK && lin(s, F, D, true, "%s.blocks.%d.mlp.up_proj", p, l) == MX_OK &&
              lin(s, D, F, true, "%s.blocks.%d.mlp.down_proj", p, l) == MX_OK;
    }
    ok &= add(s, INIT_ONES, D, 0, "%s.merger.ln_q.weight", p) == MX_OK;
    ok &= lin(s, 4 * D, 4 * D, true, "%s.merger.mlp.0", p, 0) == MX_OK && lin(s, H, 4 * D, true, "%s.merger.mlp.2", p, 0) == MX_OK;
    return ok ? MX_OK : mx_set_err("out of memory");
}

/* Qwen3-VL (dense): the Qwen3 text model under "model.language_model." and
 * the tower under "model.visual." (the released layout): Conv3d patch
 * embedding with bias, learned positions, LayerNorm blocks with a fused qkv
 * and a GELU MLP (linear_fc1/2), the merger (norm over the hidden size) and
 * one DeepStack merger per deepstack_visual_indexes entry (norm over the
 * merged width). */
static int qwen3_vl_specs(const mx_cfg *c, specs *s) {
    json_t *tj = json_object_get(c->root, "text_config"), *vj = json_object_get(c->root, "vision_config");
    mx_cfg t = {tj, NULL, c->file}, v = {vj, NULL, c->file};
    int depth, D, F, out, P, T, npos, merge;
    if (!json_is_object(tj) || !json_is_object(vj) || llama_specs(&t, "qwen3", s) || mx_cfg_i32(&v, "depth", 27, 1, 1024, &depth) ||
        mx_cfg_i32(&v, "hidden_size", 1152, 1, 1 << 16, &D) || mx_cfg_i32(&v, "intermediate_size", 4304, 1, 1 << 20, &F) ||
        mx_cfg_i32(&v, "out_hidden_size", 4096, 1, 1 << 16, &out) || mx_cfg_i32(&v, "patch_size", 16, 1, 1024, &P) ||
        mx_cfg_i32(&v, "temporal_patch_size", 2, 1, 16, &T) || mx_cfg_i32(&v, "num_position_embeddings", 2304, 1, 1 << 20, &npos) ||
        mx_cfg_i32(&v, "spatial_merge_size", 2, 1, 16, &merge))
        return mx_set_err("%s: text_config / vision_config: %s", c->file, mx_errmsg());
    json_t *deep = json_object_get(vj, "deepstack_visual_indexes");
    size_t n_deep = json_is_array(deep) ? json_array_size(deep) : 0;
    for (int i = 0; i < s->n; i++) { /* the text model's names, packaged */
        if (strncmp(s->v[i].name, "model.", 6)) continue;
        char *nm = mx_asprintf("model.language_model.%s", s->v[i].name + 6);
        if (!nm) return MX_ERR;
        free(s->v[i].name);
        s->v[i].name = nm;
    }
    const char *p = "model.visual";
    int M = merge * merge * D;
    int ok = lin(s, D, 3 * T * P * P, true, "%s.patch_embed.proj", p, 0) == MX_OK;
    ok &= add(s, INIT_NORMAL, npos, D, "%s.pos_embed.weight", p) == MX_OK;
    for (int l = 0; l < depth && ok; l++) {
        ln(s, &ok, D, "%s.blocks.%d.norm1", p, l);
        ln(s, &ok, D, "%s.blocks.%d.norm2", p, l);
        ok &= lin(s, 3 * D, D, true, "%s.blocks.%d.attn.qkv", p, l) == MX_OK && lin(s, D, D, true, "%s.blocks.%d.attn.proj", p, l) == MX_OK;
        ok &= lin(s, F, D, true, "%s.blocks.%d.mlp.linear_fc1", p, l) == MX_OK && lin(s, D, F, true, "%s.blocks.%d.mlp.linear_fc2", p, l) == MX_OK;
    }
    ln(s, &ok, D, "%s.merger.norm", p, 0);
    ok &= lin(s, M, M, true, "%s.merger.linear_fc1", p, 0) == MX_OK && lin(s, out, M, true, "%s.merger.linear_fc2", p, 0) == MX_OK;
    for (int k = 0; k < (int)n_deep && ok; k++) {
        ln(s, &ok, M, "%s.deepstack_merger_list.%d.norm", p, k);
        ok &= lin(s, M, M, true, "%s.deepstack_merger_list.%d.linear_fc1", p, k) == MX_OK &&
              lin(s, out, M, true, "%s.deepstack_merger_list.%d.linear_fc2", p, k) == MX_OK;
    }
    return ok ? MX_OK : mx_set_err("out of memory");
}

/* Gemma 3: text_config (Gemma3TextConfig's defaults for absent keys) under
 * "language_model.model.", SigLIP under "vision_tower.vision_model.", the
 * projector under "multi_modal_projector." */
static int gemma3_specs(const mx_cfg *c, specs *s) {
    json_t *tj = json_object_get(c->root, "text_config"), *vj = json_object_get(c->root, "vision_config");
    mx_cfg t = {tj, NULL, c->file}, v = {vj, NULL, c->file};
    int H, I, L, nh, nkv, hd, V, D, F, VL, vh, P, S;
    if (!json_is_object(tj) || !json_is_object(vj) || mx_cfg_i32(&t, "hidden_size", 2304, 1, 1 << 16, &H) ||
        mx_cfg_i32(&t, "intermediate_size", 9216, 1, 1 << 20, &I) || mx_cfg_i32(&t, "num_hidden_layers", 26, 1, 1024, &L) ||
        mx_cfg_i32(&t, "num_attention_heads", 8, 1, 1024, &nh) || mx_cfg_i32(&t, "num_key_value_heads", 4, 1, 1024, &nkv) ||
        mx_cfg_i32(&t, "head_dim", 256, 1, 1 << 14, &hd) || mx_cfg_i32(&t, "vocab_size", 262208, 1, 1 << 22, &V) ||
        mx_cfg_i32(&v, "hidden_size", 1152, 1, 1 << 16, &D) || mx_cfg_i32(&v, "intermediate_size", 4304, 1, 1 << 20, &F) ||
        mx_cfg_i32(&v, "num_hidden_layers", 27, 1, 1024, &VL) || mx_cfg_i32(&v, "num_attention_heads", 16, 1, 1024, &vh) ||
        mx_cfg_i32(&v, "patch_size", 14, 1, 1024, &P) || mx_cfg_i32(&v, "image_size", 896, 1, 1 << 14, &S))
        return mx_set_err("%s: text_config / vision_config: %s", c->file, mx_errmsg());
    (void)vh;
    const char *m = "language_model.model";
    int ok = add(s, INIT_NORMAL, V, H, "%s.embed_tokens.weight", m) == MX_OK;
    for (int l = 0; l < L && ok; l++) {
        static const char *norms[] = {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"};
        for (int k = 0; k < 4; k++) ok &= add(s, INIT_ZEROS, H, 0, "%s.layers.%d.%s.weight", m, l, norms[k]) == MX_OK;
        ok &= add(s, INIT_NORMAL, (int64_t)nh * hd, H, "%s.layers.%d.self_attn.q_proj.weight", m, l) == MX_OK;
        ok &= add(s, INIT_NORMAL, (int64_t)nkv * hd, H, "%s.layers.%d.self_attn.k_proj.weight", m, l) == MX_OK;
        ok &= add(s, INIT_NORMAL, (int64_t)nkv * hd, H, "%s.layers.%d.self_attn.v_proj.weight", m, l) == MX_OK;
        ok &= add(s, INIT_NORMAL, H, (int64_t)nh * hd, "%s.layers.%d.self_attn.o_proj.weight", m, l) == MX_OK;
        ok &= add(s, INIT_ZEROS, hd, 0, "%s.layers.%d.self_attn.q_norm.weight", m, l) == MX_OK;
        ok &= add(s, INIT_ZEROS, hd, 0, "%s.layers.%d.self_attn.k_norm.weight", m, l) == MX_OK;
        ok &= add(s, INIT_NORMAL, I, H, "%s.layers.%d.mlp.gate_proj.weight", m, l) == MX_OK;
        ok &= add(s, INIT_NORMAL, I, H, "%s.layers.%d.mlp.up_proj.weight", m, l) == MX_OK;
        ok &= add(s, INIT_NORMAL, H, I, "%s.layers.%d.mlp.down_proj.weight", m, l) == MX_OK;
    }
    ok &= add(s, INIT_ZEROS, H, 0, "%s.norm.weight", m) == MX_OK;
    const char *p = "vision_tower.vision_model";
    ok &= lin(s, D, 3 * P * P, true, "%s.embeddings.patch_embedding", p, 0) == MX_OK;
    ok &= add(s, INIT_NORMAL, (int64_t)(S / P) * (S / P), D, "%s.embeddings.position_embedding.weight", p) == MX_OK;
    for (int l = 0; l < VL && ok; l++) {
        ln(s, &ok, D, "%s.encoder.layers.%d.layer_norm1", p, l);
        ln(s, &ok, D, "%s.encoder.layers.%d.layer_norm2", p, l);
        static const char *pr[] = {"q_proj", "k_proj", "v_proj", "out_proj"};
        for (int k = 0; k < 4; k++) {
            char f[96];
            snprintf(f, sizeof f, "%%s.encoder.layers.%%d.self_attn.%s", pr[k]);
            ok &= lin(s, D, D, true, f, p, l) == MX_OK;
        }
        ok &= lin(s, F, D, true, "%s.encoder.layers.%d.mlp.fc1", p, l) == MX_OK && lin(s, D, F, true, "%s.encoder.layers.%d.mlp.fc2", p, l) == MX_OK;
    }
    ln(s, &ok, D, "%s.post_layernorm", p, 0);
    ok &= add(s, INIT_ZEROS, D, 0, "multi_modal_projector.mm_soft_emb_norm.weight") == MX_OK;
    ok &= add(s, INIT_NORMAL, D, H, "multi_modal_projector.mm_input_projection_weight") == MX_OK;
    return ok ? MX_OK : mx_set_err("out of memory");
}

/* Mistral 3: text_config's Mistral under "language_model.model." (the
 * released layout), the Pixtral tower under "vision_tower.", the projector
 * under "multi_modal_projector." */
static int mistral3_specs(const mx_cfg *c, specs *s) {
    json_t *tj = json_object_get(c->root, "text_config"), *vj = json_object_get(c->root, "vision_config");
    mx_cfg t = {tj, NULL, c->file}, v = {vj, NULL, c->file};
    int H, D, F, VL, P, merge;
    if (!json_is_object(tj) || !json_is_object(vj) || llama_specs(&t, "mistral", s) || mx_cfg_i32(&t, "hidden_size", 5120, 1, 1 << 16, &H) ||
        mx_cfg_i32(&v, "hidden_size", 1024, 1, 1 << 16, &D) || mx_cfg_i32(&v, "intermediate_size", 4096, 1, 1 << 20, &F) ||
        mx_cfg_i32(&v, "num_hidden_layers", 24, 1, 1024, &VL) || mx_cfg_i32(&v, "patch_size", 14, 1, 1024, &P) ||
        mx_cfg_i32(c, "spatial_merge_size", 2, 1, 16, &merge))
        return mx_set_err("%s: text_config / vision_config: %s", c->file, mx_errmsg());
    for (int i = 0; i < s->n; i++) { /* the text model's names, packaged */
        char *nm = mx_asprintf("language_model.%s", s->v[i].name);
        if (!nm) return MX_ERR;
        free(s->v[i].name);
        s->v[i].name = nm;
    }
    const char *p = "vision_tower";
    int ok = add(s, INIT_NORMAL, D, 3 * P * P, "%s.patch_conv.weight", p) == MX_OK;
    ok &= add(s, INIT_ONES, D, 0, "%s.ln_pre.weight", p) == MX_OK;
    for (int l = 0; l < VL && ok; l++) {
        ok &= add(s, INIT_ONES, D, 0, "%s.transformer.layers.%d.attention_norm.weight", p, l) == MX_OK;
        ok &= add(s, INIT_ONES, D, 0, "%s.transformer.layers.%d.ffn_norm.weight", p, l) == MX_OK;
        static const char *pr[] = {"q_proj", "k_proj", "v_proj", "o_proj"};
        for (int k = 0; k < 4; k++) ok &= add(s, INIT_NORMAL, D, D, "%s.transformer.layers.%d.attention.%s.weight", p, l, pr[k]) == MX_OK;
        ok &= add(s, INIT_NORMAL, F, D, "%s.transformer.layers.%d.feed_forward.gate_proj.weight", p, l) == MX_OK;
        ok &= add(s, INIT_NORMAL, F, D, "%s.transformer.layers.%d.feed_forward.up_proj.weight", p, l) == MX_OK;
        ok &= add(s, INIT_NORMAL, D, F, "%s.transformer.layers.%d.feed_forward.down_proj.weight", p, l) == MX_OK;
    }
    ok &= add(s, INIT_ONES, D, 0, "multi_modal_projector.norm.weight") == MX_OK;
    ok &= add(s, INIT_NORMAL, D, (int64_t)merge * merge * D, "multi_modal_projector.patch_merger.merging_layer.weight") == MX_OK;
    ok &= add(s, INIT_NORMAL, H, D, "multi_modal_projector.linear_1.weight") == MX_OK;
    ok &= add(s, INIT_NORMAL, H, H, "multi_modal_projector.linear_2.weight") == MX_OK;
    return ok ? MX_OK : mx_set_err("out of memory");
}

/* --bits B: mlx-lm's rule for which modules a conversion quantizes (a 2-D
 * ".weight" whose columns divide by the group), kept to the language model
 * as mlx-vlm's conversion does (vision towers and projectors stay float).
 * Each such matrix becomes its packed U32 codes, bf16 scales and biases. */
static bool vision_part(const char *name) {
    static const char *k[] = {"visual", "vision", "multi_modal_projector", "patch_embed", "merger"};
    for (size_t i = 0; i < sizeof k / sizeof *k; i++)
        if (strstr(name, k[i])) return true;
    return false;
}

static int quantize_specs(specs *s, int bits, int group) {
    int n0 = s->n;
    for (int i = 0; i < n0; i++) {
        spec *e = &s->v[i];
        size_t nl = strlen(e->name);
        if (e->ndim != 2 || e->init != INIT_NORMAL || e->shape[1] % group || (e->shape[1] * bits) % 32 || nl < 7 ||
            strcmp(e->name + nl - 7, ".weight") || vision_part(e->name))
            continue;
        int64_t rows = e->shape[0], cols = e->shape[1];
        e->init = INIT_QCODES;
        e->bits = bits;
        e->shape[1] = cols * bits / 32;
        int m = (int)(nl - 7);
        char *base = e->name;
        if (add(s, INIT_QSCALES, rows, cols / group, "%.*s.scales", m, base) || add(s, INIT_QBIASES, rows, cols / group, "%.*s.biases", m, base))
            return MX_ERR;
        s->v[s->n - 1].bits = s->v[s->n - 2].bits = bits;
    }
    return MX_OK;
}

static int usage(void) {
    fprintf(stderr, "usage: mkmodel --config CONFIG.json -o DIR [--dtype f32|bf16|f16] [--seed S] [--std SD] [--bits B [--group G]]\n");
    return 2;
}

int main(int argc, char **argv) {
    const char *cfg_path = NULL, *out = NULL, *dts = "bf16";
    float sd = 0.02f;
    unsigned long long seed = 0;
    int bits = 0, group = 64;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc) cfg_path = argv[++i];
        else if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--out")) && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) dts = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--bits") && i + 1 < argc) {
            bits = atoi(argv[++i]);
            if (bits != 2 && bits != 3 && bits != 4 && bits != 5 && bits != 6 && bits != 8) { fprintf(stderr, "mkmodel: --bits must be 2, 3, 4, 5, 6 or 8\n"); return 2; }
        } else if (!strcmp(argv[i], "--group") && i + 1 < argc) {
            group = atoi(argv[++i]);
            if (group != 32 && group != 64 && group != 128) { fprintf(stderr, "mkmodel: --group must be 32, 64 or 128\n"); return 2; }
        } else if (!strcmp(argv[i], "--std") && i + 1 < argc) {
            char *end;
            sd = strtof(argv[++i], &end);
            if (*end || !(sd > 0 && sd < 100)) { fprintf(stderr, "mkmodel: --std must be a number in (0, 100)\n"); return 2; }
        }
        else return usage();
    }
    if (!cfg_path || !out) return usage();
    mx_dtype dt;
    if (!strcmp(dts, "f32") || !strcmp(dts, "float32")) dt = MX_DT_F32;
    else if (!strcmp(dts, "f16") || !strcmp(dts, "float16")) dt = MX_DT_F16;
    else if (!strcmp(dts, "bf16") || !strcmp(dts, "bfloat16")) dt = MX_DT_BF16;
    else { fprintf(stderr, "mkmodel: --dtype must be f32, bf16 or f16\n"); return 2; }
    g_rng = seed * 0x2545f4914f6cdd1dull + 1;

    char *text = NULL;
    size_t tlen = 0;
    json_t *root = NULL;
    specs s = {0};
    int rc = MX_ERR;
    if (mx_read_file(cfg_path, 16u << 20, &text, &tlen) || !(root = mx_json_parse(text, tlen, cfg_path))) goto done;
    if (!json_is_object(root)) { mx_set_err("%s: not a JSON object", cfg_path); goto done; }
    mx_cfg c = {root, NULL, cfg_path};
    int err = 0;
    const char *mt = mx_cfg_str(&c, "model_type", "", &err);
    if (err) goto done;
    if (!strcmp(mt, "bert")) rc = bert_specs(&c, &s);
    else if (!strcmp(mt, "llama") || !strcmp(mt, "mistral") || !strcmp(mt, "qwen2") || !strcmp(mt, "qwen3") || !strcmp(mt, "mixtral"))
        rc = llama_specs(&c, mt, &s);
    else if (!strcmp(mt, "deepseek_v3") || !strcmp(mt, "deepseek_v32")) rc = deepseek_specs(&c, !strcmp(mt, "deepseek_v32"), &s);
    else if (!strcmp(mt, "deepseek") || !strcmp(mt, "glm4_moe")) rc = gqa_moe_specs(&c, mt, &s);
    else if (!strcmp(mt, "whisper")) rc = whisper_specs(&c, &s);
    else if (!strcmp(mt, "qwen3_5_text")) rc = qwen3_5_specs(&c, &s);
    else if (!strcmp(mt, "gemma4_text")) rc = gemma4_specs(&c, &s);
    else if (!strcmp(mt, "qwen2_vl")) rc = qwen2_vl_specs(&c, &s);
    else if (!strcmp(mt, "qwen2_5_vl")) rc = qwen2_5_vl_specs(&c, &s);
    else if (!strcmp(mt, "qwen3_vl")) rc = qwen3_vl_specs(&c, &s);
    else if (!strcmp(mt, "gemma3")) rc = gemma3_specs(&c, &s);
    else if (!strcmp(mt, "mistral3")) rc = mistral3_specs(&c, &s);
    else rc = mx_set_err("%s: model_type \"%s\" not supported (llama, mistral, qwen2, qwen3, mixtral, deepseek_v3, deepseek_v32, deepseek, glm4_moe, qwen3_5_text, gemma4_text, bert, whisper, qwen2_vl, qwen2_5_vl, qwen3_vl, gemma3, mistral3)", cfg_path, mt);
    if (rc) goto done;
    rc = MX_ERR;
    char *qtext = NULL;
    if (bits) { /* the config says so as mlx-lm's conversion writes it */
        if (!strcmp(mt, "bert") || !strcmp(mt, "whisper")) { mx_set_err("--bits: only decoder and vision-language checkpoints"); goto done; }
        if (quantize_specs(&s, bits, group)) goto done;
        json_t *q = json_pack("{s:i, s:i}", "group_size", group, "bits", bits);
        json_object_set(root, "quantization", q);
        json_object_set_new(root, "quantization_config", q);
        if (!(qtext = json_dumps(root, JSON_INDENT(2)))) { mx_set_err("out of memory"); goto done; }
    }
    if (mkdir(out, 0755) != 0 && errno != EEXIST) { free(qtext); mx_set_err("%s: cannot create: %s", out, strerror(errno)); goto done; }
    int wtc = qtext ? write_text(out, "config.json", qtext, strlen(qtext)) : write_text(out, "config.json", text, tlen);
    free(qtext);
    if (wtc) goto done;
    if (!strcmp(mt, "whisper")) {
        if (whisper_files(out, &c)) goto done;
    } else if (strcmp(mt, "bert") != 0) {
        mx_buf g = {0};
        mx_buf_puts(&g, "{\n");
        static const char *keys[] = {"bos_token_id", "eos_token_id", "pad_token_id"};
        for (size_t i = 0; i < 3; i++) {
            json_t *v = json_object_get(root, keys[i]);
            if (!v || json_is_null(v)) continue;
            char *enc = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
            if (enc) mx_buf_printf(&g, "  \"%s\": %s,\n", keys[i], enc);
            free(enc);
        }
        mx_buf_puts(&g, "  \"do_sample\": false\n}\n");
        int wrc = g.data ? write_text(out, "generation_config.json", g.data, g.len) : MX_ERR;
        mx_buf_free(&g);
        if (wrc) goto done;
    }
    char *st = mx_path_join(out, "model.safetensors");
    if (!st) goto done;
    double t0 = mx_now();
    rc = write_safetensors(st, &s, dt, sd);
    if (rc == MX_OK) {
        uint64_t params = 0;
        double bytes = 0;
        for (int i = 0; i < s.n; i++) {
            const spec *e = &s.v[i];
            bytes += (double)numel_of(e) * mx_dtype_size(spec_dtype(e, dt));
            params += e->init == INIT_QCODES ? numel_of(e) * 32 / (size_t)e->bits : e->init == INIT_QSCALES || e->init == INIT_QBIASES ? 0 : numel_of(e);
        }
        printf("%s: %d tensors, %.3f B parameters, %s%s, %.2f GB, %.1f s\n", st, s.n, params / 1e9, mx_dtype_name(dt),
               bits ? (bits == 4 ? " + 4-bit text" : bits == 8 ? " + 8-bit text" : " + quantized text") : "", bytes / 1e9, mx_now() - t0);
    }
    free(st);
done:
    if (rc) fprintf(stderr, "mkmodel: %s\n", mx_errmsg());
    for (int i = 0; i < s.n; i++) free(s.v[i].name);
    free(s.v);
    json_decref(root);
    free(text);
    return rc ? 1 : 0;
}
