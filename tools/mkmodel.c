/* mkmodel: writes a random-weight checkpoint for benchmarking.
 *   mkmodel --config tools/configs/llama-3.2-1b.json -o DIR [--dtype f32|bf16|f16] [--seed S]
 * DIR gets config.json (copied verbatim), generation_config.json (bos/eos
 * from the config, greedy) and model.safetensors with the Hugging Face tensor
 * names of the family: llama/mistral/qwen2/qwen3 decoders, BERT encoders,
 * mixtral (llama attention + block_sparse_moe: router gate, per expert
 * w1/w3/w2) and deepseek_v3 (MLA with q lora or plain q_proj, dense MLPs in
 * the first first_k_dense_replace layers, then MoE: router with
 * e_score_correction_bias, per expert gate/up/down, fused shared experts);
 * vision-language models: qwen2_vl (Qwen2 text + its ViT and merger) and
 * gemma3 (Gemma 3 text + SigLIP + pool/norm projector), convolutions written
 * as [out, in * kernel] matrices (the loader reads them either way).
 * Matrices and embeddings are N(0, 0.02), biases N(0, 0.02), norm weights 1
 * and norm biases 0. Tensors are generated and written in chunks, so a 1B
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

typedef enum { INIT_NORMAL, INIT_ONES, INIT_ZEROS } init_kind;

typedef struct {
    char *name;
    int ndim;
    int64_t shape[2];
    init_kind init;
} spec;

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

/* DeepSeek V3 (HF names as src/models/deepseek_v3.c binds them; defaults as
 * the HF config class). MTP layers are not written (the loader ignores them). */
static int deepseek_specs(const mx_cfg *c, specs *s) {
    int H, I, L, nh, V, qlr, kvr, nope, rope, vhd, dense, E, moeI, nsh;
    bool tie, attn_bias;
    bool q_null = json_is_null(json_object_get(c->root, "q_lora_rank"));
    if (mx_cfg_i32(c, "hidden_size", 0, 1, 1 << 16, &H) || mx_cfg_i32(c, "intermediate_size", 0, 1, 1 << 20, &I) ||
        mx_cfg_i32(c, "num_hidden_layers", 0, 1, 1024, &L) || mx_cfg_i32(c, "num_attention_heads", 0, 1, 1024, &nh) ||
        mx_cfg_i32(c, "vocab_size", 0, 1, 1 << 22, &V) || mx_cfg_i32(c, "q_lora_rank", q_null ? 0 : 1536, 0, 1 << 20, &qlr) ||
        mx_cfg_i32(c, "kv_lora_rank", 512, 1, 1 << 20, &kvr) || mx_cfg_i32(c, "qk_nope_head_dim", 128, 0, 1 << 14, &nope) ||
        mx_cfg_i32(c, "qk_rope_head_dim", 64, 2, 1 << 14, &rope) || mx_cfg_i32(c, "v_head_dim", 128, 1, 1 << 14, &vhd) ||
        mx_cfg_i32(c, "first_k_dense_replace", 3, 0, 1024, &dense) || mx_cfg_i32(c, "n_routed_experts", 256, 1, 1 << 12, &E) ||
        mx_cfg_i32(c, "moe_intermediate_size", 2048, 1, 1 << 20, &moeI) || mx_cfg_i32(c, "n_shared_experts", 1, 0, 1 << 10, &nsh) ||
        mx_cfg_bool(c, "tie_word_embeddings", false, &tie) || mx_cfg_bool(c, "attention_bias", false, &attn_bias))
        return MX_ERR;
    if (!H || !I || !L || !nh || !V) return mx_set_err("%s: hidden_size, intermediate_size, num_hidden_layers, num_attention_heads and vocab_size are required", c->file);
    if (attn_bias) return mx_set_err("%s: attention_bias is not supported for deepseek_v3", c->file);
    int64_t qk = (int64_t)nope + rope;
    char pre[64];
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
        ok &= add(s, INIT_ONES, H, 0, "model.layers.%d.post_attention_layernorm.weight", l) == MX_OK;
        if (l < dense) {
            snprintf(pre, sizeof pre, "model.layers.%d.mlp", l);
            ok &= mlp_specs(s, H, I, pre) == MX_OK;
            continue;
        }
        ok &= add(s, INIT_NORMAL, E, H, "model.layers.%d.mlp.gate.weight", l) == MX_OK;
        ok &= add(s, INIT_ZEROS, E, 0, "model.layers.%d.mlp.gate.e_score_correction_bias", l) == MX_OK;
        for (int e = 0; e < E && ok; e++) {
            snprintf(pre, sizeof pre, "model.layers.%d.mlp.experts.%d", l, e);
            ok &= mlp_specs(s, H, moeI, pre) == MX_OK;
        }
        if (nsh > 0) {
            snprintf(pre, sizeof pre, "model.layers.%d.mlp.shared_experts", l);
            ok &= mlp_specs(s, H, moeI * nsh, pre) == MX_OK;
        }
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

static int write_safetensors(const char *path, const specs *s, mx_dtype dt) {
    size_t es = mx_dtype_size(dt);
    mx_st_out *ts = calloc((size_t)s->n + 1, sizeof *ts);
    if (!ts) return mx_set_err("out of memory");
    for (int i = 0; i < s->n; i++) {
        const spec *e = &s->v[i];
        ts[i] = (mx_st_out){e->name, dt, e->ndim, {e->shape[0], e->shape[1]}, NULL,
                            (size_t)e->shape[0] * (e->ndim == 2 ? (size_t)e->shape[1] : 1) * es};
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
        size_t numel = (size_t)e->shape[0] * (e->ndim == 2 ? (size_t)e->shape[1] : 1);
        for (size_t done = 0; ok && done < numel; done += CH) {
            size_t m = MX_MIN((size_t)CH, numel - done);
            if (e->init == INIT_NORMAL) normals(buf, m, 0.02f);
            else for (size_t j = 0; j < m; j++) buf[j] = e->init == INIT_ONES ? 1.0f : 0.0f;
            if (dt == MX_DT_F32) memcpy(obuf, buf, m * 4);
            else
                for (size_t j = 0; j < m; j++) {
                    uint16_t v = dt == MX_DT_F16 ? mx_f32_to_f16(buf[j]) : mx_f32_to_bf16(buf[j]);
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

/* ---- vision-language models ---- */

static int ln(specs *s, int D, const char *fmt, const char *pfx, int l) {
    char name[256];
    snprintf(name, sizeof name, fmt, pfx, l);
    int ok = add(s, INIT_ONES, D, 0, "%s.weight", name) == MX_OK;
    ok &= add(s, INIT_ZEROS, D, 0, "%s.bias", name) == MX_OK;
    return ok ? MX_OK : MX_ERR;
}

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
        ok &= ln(s, D, "%s.blocks.%d.norm1", p, l) == MX_OK && ln(s, D, "%s.blocks.%d.norm2", p, l) == MX_OK;
        ok &= lin(s, 3 * D, D, true, "%s.blocks.%d.attn.qkv", p, l) == MX_OK && lin(s, D, D, true, "%s.blocks.%d.attn.proj", p, l) == MX_OK;
        ok &= lin(s, D * ratio, D, true, "%s.blocks.%d.mlp.fc1", p, l) == MX_OK && lin(s, D, D * ratio, true, "%s.blocks.%d.mlp.fc2", p, l) == MX_OK;
    }
    ok &= ln(s, D, "%s.merger.ln_q", p, 0) == MX_OK && lin(s, 4 * D, 4 * D, true, "%s.merger.mlp.0", p, 0) == MX_OK &&
          lin(s, H, 4 * D, true, "%s.merger.mlp.2", p, 0) == MX_OK;
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
        ok &= ln(s, D, "%s.encoder.layers.%d.layer_norm1", p, l) == MX_OK && ln(s, D, "%s.encoder.layers.%d.layer_norm2", p, l) == MX_OK;
        static const char *pr[] = {"q_proj", "k_proj", "v_proj", "out_proj"};
        for (int k = 0; k < 4; k++) {
            char f[96];
            snprintf(f, sizeof f, "%%s.encoder.layers.%%d.self_attn.%s", pr[k]);
            ok &= lin(s, D, D, true, f, p, l) == MX_OK;
        }
        ok &= lin(s, F, D, true, "%s.encoder.layers.%d.mlp.fc1", p, l) == MX_OK && lin(s, D, F, true, "%s.encoder.layers.%d.mlp.fc2", p, l) == MX_OK;
    }
    ok &= ln(s, D, "%s.post_layernorm", p, 0) == MX_OK;
    ok &= add(s, INIT_ZEROS, D, 0, "multi_modal_projector.mm_soft_emb_norm.weight") == MX_OK;
    ok &= add(s, INIT_NORMAL, D, H, "multi_modal_projector.mm_input_projection_weight") == MX_OK;
    return ok ? MX_OK : mx_set_err("out of memory");
}

static int usage(void) {
    fprintf(stderr, "usage: mkmodel --config CONFIG.json -o DIR [--dtype f32|bf16|f16] [--seed S]\n");
    return 2;
}

int main(int argc, char **argv) {
    const char *cfg_path = NULL, *out = NULL, *dts = "bf16";
    unsigned long long seed = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc) cfg_path = argv[++i];
        else if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--out")) && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) dts = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 0);
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
    else if (!strcmp(mt, "deepseek_v3")) rc = deepseek_specs(&c, &s);
    else if (!strcmp(mt, "qwen2_vl")) rc = qwen2_vl_specs(&c, &s);
    else if (!strcmp(mt, "gemma3")) rc = gemma3_specs(&c, &s);
    else rc = mx_set_err("%s: model_type \"%s\" not supported (llama, mistral, qwen2, qwen3, mixtral, deepseek_v3, bert, qwen2_vl, gemma3)", cfg_path, mt);
    if (rc) goto done;
    rc = MX_ERR;
    if (mkdir(out, 0755) != 0 && errno != EEXIST) { mx_set_err("%s: cannot create: %s", out, strerror(errno)); goto done; }
    if (write_text(out, "config.json", text, tlen)) goto done;
    if (strcmp(mt, "bert") != 0) {
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
    rc = write_safetensors(st, &s, dt);
    if (rc == MX_OK) {
        uint64_t params = 0;
        for (int i = 0; i < s.n; i++) params += (uint64_t)s.v[i].shape[0] * (s.v[i].ndim == 2 ? (uint64_t)s.v[i].shape[1] : 1);
        printf("%s: %d tensors, %.3f B parameters, %s, %.2f GB, %.1f s\n", st, s.n, params / 1e9, mx_dtype_name(dt),
               params * (double)mx_dtype_size(dt) / 1e9, mx_now() - t0);
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
