/* arch: the description a family file fills in. The generic decoder in nn/
 * executes it; a family states only how it differs from the defaults that
 * mx_arch_hf_defaults() reads from the standard Hugging Face config keys.
 *
 * It grows by parts: model-level fields (sizes, norms, embeddings, head),
 * one spec per kind of block (attention, MoE, MLA, SSM, ...), and one
 * mx_layer_spec per layer saying which blocks the layer runs and which
 * attention spec it uses. Layers and extra specs live in memory the
 * description owns (mx_arch_alloc), freed by mx_arch_free. */
#ifndef MX_ARCH_H
#define MX_ARCH_H
#include <stdbool.h>
#include "../format/json.h"
#include "../format/checkpoint.h"
#include "../kernels/kernels.h"
#include "rope.h"
#include "block.h"

typedef enum { MX_NORM_RMS, MX_NORM_LAYER } mx_norm_kind;
typedef struct {
    mx_norm_kind kind;
    float offset;   /* weight + offset (Gemma's 1+w, Nemotron's LayerNorm1p) */
    bool weight;    /* has a weight vector (OLMo's LayerNorm has none) */
    bool bias;      /* LayerNorm bias */
    float eps;
} mx_norm_spec;

/* q/k norm: HEAD = one norm over head_dim shared by all heads; HEAD_EACH =
 * over head_dim, each head with its own weights (Cohere [heads, head_dim],
 * StableLM one tensor per head: a second "%d" in the name is the head);
 * FULL = over the whole projection (OLMo2). */
typedef enum { MX_QKNORM_NONE, MX_QKNORM_HEAD, MX_QKNORM_FULL, MX_QKNORM_HEAD_EACH } mx_qknorm;
/* Fused qkv row order: CONCAT = [q | k | v]; GROUPED = per kv head g,
 * [q heads of g | k_g | v_g] (GPT-NeoX per head [q|k|v], Falcon). */
typedef enum { MX_QKV_CONCAT, MX_QKV_GROUPED } mx_qkv_layout;
typedef enum { MX_RES_SEQUENTIAL, MX_RES_PARALLEL } mx_residual;
typedef enum { MX_MLP_GATED, MX_MLP_PLAIN } mx_mlp_kind;
typedef enum { MX_POS_ROPE, MX_POS_LEARNED, MX_POS_NONE } mx_pos_kind;

/* Tensor module paths (without ".weight"); "%d" stands for the layer index.
 * NULL means the model has no such tensor. Fused projections: qkv (one linear
 * giving q|k|v), gate_up (gate|up). */
typedef struct {
    const char *embed, *pos_embed, *final_norm, *lm_head;
    const char *attn_norm, *post_attn_norm;
    const char *ffn_norm, *gate, *up, *gate_up, *down, *post_ffn_norm;
    const char *type_embed;  /* token type (segment) embeddings, added to the token embedding */
    const char *embed_norm;  /* norm on the summed embeddings (BERT, ModernBERT), spec arch.norm */
    const char *layer_scale; /* a stored scalar ([1]) that multiplies the layer's output (Gemma 4) */
    const char *attn_scale, *ffn_scale; /* stored vectors [hidden] (full tensor names) multiplying the
                                          mixer's and the ffn's output before the residual (InternViT's
                                          layer scale lambda_1 / lambda_2) */
    const char *ffn_act_norm;  /* norm (arch.norm) on the dense MLP's activation, before down (BitNet) */
    const char *act_params;    /* module of a dense MLP activation's learned scalars (xIELU: alpha_p, alpha_n, beta, eps) */
    const char *xattn_norm;  /* norm before a layer's cross-attention sub-layer (encoder-decoders) */
} mx_names;

/* Attention (nn/attention.c): q/k/v projections (separate, or one fused qkv),
 * optional clamp, q/k norm, rope, GQA/MQA, soft-capping, sinks, output gate
 * (from q, or a projection of its own), o. One spec describes one kind of attention; each layer points to the spec
 * it runs (mx_layer_spec.attn). arch.attn is the default every layer starts
 * with; mx_arch_add_attn makes another (a second head size, an encoder's
 * bidirectional attention, a cross-attention). MLA (nn/mla.c) reads its
 * heads, scale, biases and the q/o names from its layer's spec too.
 * Names are module paths as in mx_names ("%d" = layer). */
typedef struct {
    const char *q, *k, *v, *qkv, *o, *q_norm, *k_norm;
    const char *sinks;       /* per-head sink logits (GPT-OSS): a full tensor name with "%d" */
    const char *out_norm;    /* norm (arch.norm) on the heads' output, concatenated, before o (BitNet) */
    const char *gate;        /* a separate output-gate projection of the layer input: the heads' output is
                                multiplied by sigmoid (or softplus) of it before o (AFMoE, Laguna) */
} mx_attn_names;

typedef struct mx_attn_spec {
    int n_heads, n_kv_heads, head_dim;
    float scale;              /* multiplies q·k (default 1/sqrt(head_dim)) */
    float softcap;            /* tanh soft-cap of the scores; 0 = off */
    float clip_qkv;           /* q, k, v clamped to +-clip_qkv; 0 = off */
    mx_qknorm qk_norm;
    mx_norm_spec qk_norm_spec;
    mx_qkv_layout qkv_layout; /* row order of names.qkv */
    bool q_bias, k_bias, v_bias, o_bias;
    bool gate;                /* q gives per head [q | gate]; the output is multiplied
                                 by sigmoid(gate) before o (Qwen3-Next) */
    bool bidirectional;       /* every key of the sequence (encoders); a window W
                                 then means |i - j| < W */
    mx_attn_names names;
    bool qk_norm_after_rope;  /* the q/k norms act on the rotated q/k (Llama 4) */
    float temp_scale, temp_floor; /* temp_scale != 0: q *= 1 + temp_scale * log1p(floor((pos + 1) /
                                     temp_floor)) (Llama 4's attention temperature tuning) */
    bool v_norm;              /* v through a weightless RMSNorm over head_dim (eps qk_norm_spec.eps) (Gemma 4) */
    bool k_eq_v;              /* no v projection: v is the k projection before its norm and rope (Gemma 4) */
    bool temp_pos0;           /* floor(pos / temp_floor) instead: Ministral 3's Llama-4 scaling
                                 (rope_parameters.llama_4_scaling_beta) */
    bool clip_after_qk_norm;  /* clip_qkv clamps q, k, v after the q/k norms (OLMoE) */
    bool gate_per_head;       /* names.gate gives one value per head, broadcast over head_dim
                                 (else one per (head, dim)) */
    bool gate_softplus;       /* names.gate through softplus, not sigmoid (Laguna) */
    int v_head_dim;           /* values' head size when it differs from q/k's (MiMo-V2-Flash); 0 = head_dim */
    float v_scale;            /* v multiplied by this before caching (MiMo's attention_value_scale); 0 = 1 */
    int tp_kv_rep;            /* tensor parallelism with fewer KV heads than parts (MQA): this many
                                 parts hold a copy of the same KV head (0 or 1: each its own) */
} mx_attn_spec;

/* Mixture of experts (nn/moe.c). The router picks top_k of n_experts per
 * token; the variant is data:
 *   SOFTMAX       softmax over all experts, weights = the probabilities
 *   TOPK_SOFTMAX  top-k of the logits, softmax over those k
 *   SIGMOID       sigmoid scores, weights = the scores
 * (SOFTMAX and SIGMOID select on score + correction bias (score_bias),
 * optionally group-limited; the weights leave the bias out)
 *   SPARSEMIXER   PhiMoE's masked-softmax top-2 (jitter_eps threshold)
 * then optional renormalisation (weights / (p-norm(weights) + norm_eps)) and
 * routed_scale. Experts are gated (down(act(gate x) * up x)) or not, with
 * optional biases and GPT-OSS's clamped SwiGLU. Expert tensors are one per
 * expert (a pattern with a second "%d": the expert) or stacked (one "%d":
 * [E, out, in] or [E*out, in], float or MLX-quantized); `alt` names are tried
 * when the primary ones are absent (MLX's switch_mlp layout). */
typedef enum { MX_ROUTE_SOFTMAX, MX_ROUTE_TOPK_SOFTMAX, MX_ROUTE_SIGMOID, MX_ROUTE_SPARSEMIXER } mx_route;
#define MX_EXP_T_GATE 1u    /* bits of mx_expert_names.transposed: stored [in, out] (x @ W) */
#define MX_EXP_T_UP 2u
#define MX_EXP_T_GATE_UP 4u
#define MX_EXP_T_DOWN 8u
typedef struct {
    const char *gate, *up, *gate_up, *down; /* module paths (tensor path.weight, or the bare path) */
    unsigned transposed;
} mx_expert_names;
#define MX_MAX_EXPERTS 1024
typedef struct {
    int n_experts, top_k, ffn;  /* routed experts, experts per token, expert width */
    mx_route route;
    float norm_p;               /* renormalise top-k weights by their p-norm (1 = sum); 0 = off */
    float norm_eps;             /* added to that denominator (DeepSeek: 1e-20) */
    float routed_scale;         /* routed weights multiplier (0 or 1 = off) */
    int n_group, topk_group;    /* group-limited selection (sum of each group's top-2); n_group <= 1 = off */
    float jitter_eps;           /* sparsemixer mask threshold */
    bool router_bias, expert_bias, gated;
    bool gate_up_interleaved;   /* fused gate_up rows alternate gate, up (GPT-OSS) */
    mx_act act;
    float swiglu_limit, swiglu_alpha; /* >0: clamped SwiGLU (up+1) * g * sigmoid(alpha g), g <= limit, |up| <= limit */
    int shared_ffn;             /* shared expert width; 0 = none */
    const char *router, *score_bias, *shared_gate; /* router module; correction-bias tensor; sigmoid gate module of the shared expert */
    mx_expert_names experts, alt, shared;
    bool scale_input;           /* the routing weight multiplies each expert's input and the
                                   outputs are summed unweighted (Llama 4) */
    bool group_max;             /* a group's score is its best expert's (DeepSeek-V2 group_limited_greedy), not its top-2 sum */
    float norm_min;             /* renormalisation denominator at least this (ERNIE's moe_norm_min); 0 = off */
    int n_zero;                 /* identity ("zero-computation") experts after the routed ones: the
                                   router scores n_experts + n_zero; a chosen one adds w * x (LongCat) */
    bool group_mask_inf;        /* experts of the groups left out score -inf, not 0 (GLM-4.7-Flash,
                                   DeepSeek-V3.2: a corrected score may be negative) */
    mx_expert_names alt2;       /* a third layout, tried when neither `experts` nor `alt` is present */
    float router_softcap;       /* router logits soft-capped c * tanh(logits / c) before routing (Laguna); 0 = off */
    float shared_scale;         /* the shared expert's output multiplier (0 = 1; Cohere2-MoE's "average":
                                   0.5, with routed_scale 0.5) */
} mx_moe_spec;

/* Multi-head latent attention (DeepSeek V2/V3, nn/mla.c): q through a
 * low-rank bottleneck (q_a -> norm -> q_b; plain names.q when q_lora_rank is
 * 0), kv_a -> [latent (kv_lora_rank) | shared rope key (qk_rope_dim)],
 * latent -> norm -> kv_b gives per head [k_nope | v]. Rope (arch.rope[0],
 * dim qk_rope_dim) on the rope slices only. From the layer's attention spec:
 * n_heads, scale, the Llama-4 position scale of q (temp_scale), names.q
 * and names.o, q_bias on q_a (a plain q_proj has none), k_bias on kv_a,
 * o_bias on o. The cache holds the normed latent and the roped key per
 * position. */
typedef struct {
    int q_lora_rank, kv_lora_rank, qk_nope_dim, qk_rope_dim, v_head_dim;
    mx_norm_spec norm;          /* q_a / kv_a norms */
    const char *q_a, *q_a_norm, *q_b, *kv_a, *kv_a_norm, *kv_b;
    /* MLX layout, used when kv_b is absent: kv_b split per head into stacked
     * embed_q [heads, kv_lora_rank, qk_nope] (W_k^T) and unembed_out
     * [heads, v_head, kv_lora_rank] (W_v) */
    const char *embed_q, *unembed_out;
    float q_scale, kv_scale;    /* LongCat's LoRA scales: q times q_scale, the normed latent times
                                   kv_scale (so k_nope and v too); 0 = 1 */
    /* DeepSeek sparse attention (V3.2, nn/dsa.c): a lightning indexer scores the causal keys of
     * each query: q_i = index_q(the normed q LoRA latent) [index_heads][index_dim], one key head
     * k = index_norm(index_k(x)) [index_dim] (cached per position), both rotated rotate-half on
     * their first qk_rope_dim dims; value(key t) = sum_h index_w(x)_h / sqrt(index_heads) *
     * relu(q_i,h . k_t / sqrt(index_dim)); the query attends only the index_topk keys of highest
     * value (all its keys when it has no more). index_topk 0 = off. */
    int index_heads, index_dim, index_topk;
    mx_norm_spec index_norm;
    const char *index_q, *index_k, *index_k_norm, *index_w;
} mx_mla_spec;

/* State-space mixers (nn/mamba.c). Tensors live under `prefix` (a module
 * path with "%d", e.g. "backbone.layers.%d.mixer") with the HF sub-names
 * in_proj, conv1d, x_proj, dt_proj, A_log, D, dt_bias, norm, out_proj.
 *   MAMBA1  in_proj -> [x | z]; x = act(causal depthwise conv(x));
 *           x_proj(x) -> [dt_low | B | C] (optionally RMS-normed: bcdt_norm,
 *           with weights dt_layernorm / b_layernorm / c_layernorm when
 *           bcdt_weight); dt = softplus(dt_proj(dt_low)); per channel c and
 *           state n: h = exp(dt A[c,n]) h + dt B[n] x; y = h.C + D[c] x;
 *           y *= act(z).
 *   MAMBA2  in_proj -> [z | x B C | dt]; act(conv) on [x | B | C] (B, C per
 *           group); dt = clamp(softplus(dt + dt_bias), dt_min, dt_max); per
 *           head a scalar A; y = h.C + D x; then rmsnorm(y * silu(z)) over
 *           norm_groups groups (gated_norm) or y * silu(z).
 * The cache holds per channel the last d_conv-1 conv inputs and the state. */
typedef enum { MX_SSM_MAMBA1, MX_SSM_MAMBA2 } mx_ssm_kind;
typedef struct {
    mx_ssm_kind kind;
    int d_inner, d_state, d_conv, dt_rank; /* dt_rank: mamba1 */
    int n_heads, head_dim, n_groups;       /* mamba2 (d_inner = n_heads * head_dim) */
    bool in_bias, out_bias, conv_bias;
    bool bcdt_norm, bcdt_weight;
    float bcdt_eps;
    bool gated_norm;
    int norm_groups;
    float norm_eps;
    float dt_min, dt_max;                  /* dt clamp after the softplus (mamba2) */
    bool norm_before_gate;                 /* mamba2: rmsnorm(y) * silu(z) instead */
    float in_scale;                        /* mamba2: in_proj(x * in_scale) (0 = 1) */
    float seg_scale[5];                    /* mamba2: in_proj output segments [z | x | B | C | dt]
                                              times these (Falcon-H1 mup vector; 0 = 1) */
    mx_act act;                            /* conv and (mamba1) gate activation */
    const char *prefix;
    /* mamba2 under tensor parallelism (the counts above are then this part's
     * heads, channels and groups): the checkpoint's group and norm-group
     * counts (0: not split); tp_norm_split: a norm group spans several parts,
     * its sum of squares summed over them */
    int tp_n_groups, tp_norm_groups;
    bool tp_norm_split;
} mx_ssm_spec;

/* RecurrentGemma's recurrent block (nn/rglru.c), tensors under `prefix`
 * (linear_x, linear_y, linear_out, conv_1d, rg_lru.*): y = act(linear_y x);
 * u = conv(linear_x x) (causal depthwise, with bias, no activation); RG-LRU
 * with block-diagonal gates over n_heads blocks: a = exp(-8 r softplus(p)),
 * h = a h + sqrt(1 - a^2) (i u) (h = i u at position 0);
 * out = linear_out(h * y). The cache holds the conv window and h. */
typedef struct {
    int width, n_heads, d_conv;
    mx_act act;
    const char *prefix;
} mx_rglru_spec;

/* Gated short convolution (LFM2, nn/shortconv.c), tensors under `prefix`:
 * [B | C | x] = in_proj(h); y = C * conv(B * x) with a causal depthwise conv
 * of kernel d_conv (tensor "conv"); out_proj(y); biases iff bias. The cache
 * holds the last d_conv-1 values of B * x per channel. */
typedef struct {
    int d_conv;
    bool bias;
    const char *prefix;
    bool centered; /* non-causal (bidirectional LFM2 encoders): y_t = sum_k w_k (B x)_{t - d_conv/2 + k}
                      over the sequence, zeros outside it; no state (encoder pass only) */
    int tp_width;  /* tensor parallelism: this part's channels (the hidden size / tp); 0: all */
} mx_shortconv_spec;

/* Gated DeltaNet linear attention (Qwen3-Next, nn/deltanet.c), tensors under
 * `prefix`: in_proj_qkvz per key head [q (dk) | k (dk) | v (r dv) | z (r dv)],
 * in_proj_ba per key head [b (r) | a (r)] (r = n_v_heads / n_k_heads), or
 * with split_proj the four projections below; a
 * causal depthwise conv (no bias) + silu over [q | k | v]; q, k L2-normed
 * (q also * dk^-0.5) and shared by the r value heads of their key head;
 * beta = sigmoid(b), g = -exp(A_log) softplus(a + dt_bias); per value head
 * S = S exp(g), S += k ((v - S^T k) beta)^T, o = S^T q; then
 * rmsnorm(o) * norm.weight * silu(z) per head, out_proj. The cache holds the
 * conv window and S [n_v_heads][dk][dv]. */
typedef struct {
    int n_k_heads, n_v_heads, dk, dv, d_conv;
    float norm_eps;
    const char *prefix;
    /* Qwen3.5: separate in_proj_qkv ([q | k | v], head-major in each part),
     * in_proj_z, in_proj_b, in_proj_a instead of the per-key-head groups */
    bool split_proj;
} mx_deltanet_spec;

/* Zamba2 hybrid layer (nn/zamba.c): a transformer block shared by several
 * layers (use k of the block-using layers takes block k % n_blocks, stored
 * once under `shared` formatted with its first user layer) runs on
 * x = [h | e] (e: the token embeddings): a = o(attn(rmsnorm(x))) with q, k, v
 * (+ per-use LoRA adapters when attn_adapters), rope (arch.rope[0]) when
 * rope; t = down(act(g) * u), [g | u] = gate_up(rmsnorm(a)) + LoRA; then
 * t = linear(t) and the layer's Mamba2 (arch.ssm, module `mamba`) gives
 * out = mamba(rmsnorm_mamba_norm(h + t)); the decoder adds out to h (the layer
 * has no_attn_norm and no ffn). The cache holds the Mamba2 state, then K/V. */
typedef struct {
    int n_blocks, heads, kv_heads, head_dim, ffn, adapter_rank;
    float attn_scale;
    bool rope, attn_adapters, bias;
    mx_act act;
    const char *shared, *linear, *mamba_norm, *mamba;
} mx_shared_block_spec;

/* How arch.rope[r] is read from config.json. A family declares only its
 * defaults here; mx_arch_ropes (run by the registry once every configure of
 * the family chain is done, so it sees the final head_dim) builds the table
 * from rope_theta, partial_rotary_factor and rope_scaling. Zero fields take
 * the Hugging Face defaults. */
typedef struct {
    const char *theta_key;  /* key of the base frequency (NULL: "rope_theta") */
    double theta;           /* its default (0: 10000) */
    double theta_scale;     /* multiplies the base read (0 = 1; Zamba2's long context) */
    double partial;         /* partial_rotary_factor's default (0: 1) */
    int dim;                /* rotated dims (0: head_dim * partial_rotary_factor, even) */
    bool plain;             /* ignore rope_scaling (Gemma 3's local rope) */
    bool interleaved;       /* rotate pairs (2i, 2i+1), not halves (GLM, Cohere) */
    const char *section;    /* read from this config object (DBRX's attn_config); NULL = top level */
    double attn_factor;     /* > 0: replaces the scaling's attention factor (PhiMoE's mscale) */
    bool mrope;             /* multi-axis positions from rope_scaling.mrope_section (Qwen2-VL) */
    const char *params_key; /* rope_parameters holds one object per layer type: read this one
                               (Gemma 4); NULL = rope_parameters itself, when present */
    const char *scaling_default; /* JSON of the rope scaling a config class applies when the config
                                    has neither rope_scaling nor rope_parameters (not even null) */
    bool reversed;          /* rotate in the opposite direction (NanoChat) */
    bool yarn_factor_given; /* yarn's factor as given, not max_position_embeddings / original_... (v5) */
} mx_rope_decl;

/* MiniMax lightning attention (nn/lightning.c), tensors under `prefix`:
 * per head [q | k | v] = act(qkv_proj(x)) (head h owns columns
 * [3dh, 3dh + 3d)); per head a decay slope s_h (the stored slope_rate, or
 * (2^(-8/H))^(h+1) (1 - l/(L-1+1e-5) + 1e-5) for layer l of L);
 * KV = e^(-s_h) KV + k^T v, o = q KV (no softmax, no scale); the heads'
 * outputs [H*d] -> RMSNorm (norm.weight, norm_eps) -> * sigmoid(output_gate(x))
 * -> out_proj. The cache holds KV [H][d][d]. */
typedef struct {
    int n_heads, head_dim;
    float norm_eps;
    mx_act act;
    const char *prefix;
} mx_lightning_spec;

/* Per-layer inputs (Gemma 4, nn/ple.c). Model level: a second embedding
 * table `embed` ([vocab, n_layers * dim], rows times sqrt(dim)) and a
 * projection `proj` ([n_layers * dim, hidden]) of the scaled token embeddings
 * h0, times hidden^-0.5 and RMS-normed over each layer's dim (`proj_norm`,
 * arch.norm), give per token and layer pli = (proj + embed) * 2^-0.5. A layer
 * whose `post` block is mx_block_ple adds norm(up(act(gate(h)) * pli_layer))
 * to its output (`gate` [dim, hidden], `up` [hidden, dim], `norm`: "%d"). */
typedef struct {
    int dim, vocab;
    mx_act act;
    const char *embed, *proj, *proj_norm;
    const char *gate, *up, *norm;
} mx_ple_spec;

/* A multi-token-prediction draft (nn/mtp.c): the model is one next-n module
 * of DeepSeek V3 / GLM-4.5 / Qwen3-Next split out of its checkpoint (`mlxcel split-mtp`),
 * which marks its config with "mlxcel_mtp". Token i's input row is
 * eh_proj([enorm(embed(tok_i)) ; hnorm(h_i)]) (eh_proj [hidden, 2 hidden]),
 * h_i a hidden state given with the token (mx_seq_in.hidden): the target's
 * final hidden state (after its final norm) at the position before tok_i,
 * or this module's own for a draft after the first. */
typedef struct {
    bool on;
    const char *enorm, *hnorm, *eh_proj;
} mx_mtp_spec;

/* AltUp (Gemma 3n, nn/altup.c): the residual is n streams. Before the first
 * layer s_0 = the embeddings, s_j = proj_j(s_0) rescaled to s_0's RMS (j >= 1,
 * `proj` "%d" = j - 1). Each layer: predict s_i += sum_j P_ij s_j with
 * P = predict(tanh(router(router_norm(s_active) / hidden))) [n x n]; the
 * layer runs on s_active; its output y corrects
 * s_i += (correct(tanh(router(router_norm(y) / hidden))) + 1)_i (y - s_active)
 * (correct's weights clamped to +-coef_clip); the layer's post block then
 * reads s_active (times out_scale when correct_scale) and its output is added
 * to every stream but s_0. After the last layer h = mean(s_0,
 * unembed_j(s_j) rescaled to s_0's RMS). n = 0: off. */
#define MX_ALTUP_MAX 16
typedef struct {
    int n, active;
    float coef_clip;
    bool correct_scale;
    const char *proj, *unembed;                                    /* model level, "%d" = stream - 1 */
    const char *router_norm, *router, *predict, *correct, *out_scale; /* per layer */
} mx_altup_spec;

/* LAuReL (Gemma 3n, nn/laurel.c), a layer's branch block:
 * out = x + norm(right(left(x))) (left [rank, hidden], right [hidden, rank],
 * norm arch.norm). */
typedef struct {
    int rank;
    const char *left, *right, *norm;
} mx_laurel_spec;

/* One layer: its blocks, the attention spec it runs, and where it sits in
 * the sequence (window, rope). Per-layer differences of a family are data
 * here: a sliding layer has a window, a NoPE layer rope = false, a layer with
 * another head size points to another attention spec. */
typedef struct {
    const mx_block_ops *mixer, *ffn; /* default: attention and MLP */
    const mx_block_ops *mixer2; /* a second mixer on the same normed input, its output added
                                   to the mixer's (Falcon-H1 attention + Mamba2); NULL = none */
    const mx_attn_spec *attn;   /* the attention spec of this layer (default arch.attn) */
    int window;     /* sliding window W (attend i-W < j <= i); 0 = global. A causal
                       layer with a window reads only its last W cached positions,
                       so its cache can be a ring of W entries */
    bool rope;      /* false: this layer applies no rotary embedding */
    int rope_idx;   /* which of arch.rope[] this layer uses */
    bool no_attn_norm; /* this layer has no attention norm (ModernBERT layer 0) */
    /* MiniMax (DeepNorm-style): the residual is the normed sublayer input,
     * h = xn * alpha + sublayer(xn) * beta; [0] the mixer, [1] the ffn;
     * alpha 0 = the plain residual h += sublayer */
    float res_alpha[2], res_beta[2];
    int chunk;         /* chunked attention: query i sees only keys of its own chunk
                          (j / chunk == i / chunk) (Llama 4); 0 = off */
    bool kv_shared;    /* no K/V of its own: the layer attends over the cache of layer kv_from
                          (earlier, same attention spec and window) (Gemma 4) */
    int kv_from;
    int ffn_width;     /* this layer's dense MLP width (0 = arch.ffn) (Gemma 4's double-wide MLP) */
    const mx_block_ops *post; /* runs on the layer's output, which it adds to (Gemma 4's
                                 per-layer input); NULL = none */
    const mx_block_ops *shortcut; /* a second ffn block on this layer's normed ffn input whose
                                     output joins the residual at the end of the NEXT layer
                                     (LongCat's shortcut MoE); NULL = none */
    const mx_block_ops *branch; /* a block on the mixer's normed input whose output joins the
                                   residual beside the mixer's (post-normed) one:
                                   x = (x + mixer + branch) * arch.branch_scale (Gemma 3n's LAuReL) */
    float gate_sparsity; /* dense MLP: the gate keeps only values above mean + std * Phi^-1(p)
                            of its row, relu(g - that) (Gemma 3n's gaussian top-k); p = 0: off */
    /* encoder-decoders: a cross-attention sub-layer between the mixer and the
     * ffn, x += xattn(norm_xattn(x)), reading the encoder memory (arch.mem_len
     * rows) through the spec xattn_attn (its q/k/v/o names and biases) */
    const mx_block_ops *xattn;
    const mx_attn_spec *xattn_attn;
} mx_layer_spec;

/* An input stem (speech encoders, nn/stem.c): features [n_in][frames]
 * through n_conv 1-D convolutions (kernel 3, padding 1, stride[i]; weight
 * [out, in, 3] and bias), each followed by act, giving the encoder's rows;
 * the stored position table names.pos_embed is added by the encoder. */
typedef struct {
    int n_in, frames, n_conv;
    int stride[2];
    const char *conv[2];
    mx_act act;
} mx_stem_spec;

/* Sequence pooling: which hidden rows a head (or an embedder) reads. */
typedef enum { MX_POOL_CLS, MX_POOL_MEAN, MX_POOL_LAST, MX_POOL_MAX } mx_pooling;

/* Encoder head: pooled -> dense (+bias) -> act -> norm -> out (+bias).
 * With out = NULL it is a pooler (BERT's tanh(dense(h[0]))); every stage
 * whose name is NULL is skipped. The norm uses arch.norm. */
typedef struct {
    mx_pooling pool;
    const char *dense, *norm, *out;
    bool dense_bias;
    bool optional;   /* the dense/norm tensors may be absent (then no pooler) */
    mx_act act;
    int n_labels;
} mx_head_spec;

/* Bounds on what a config may ask for (input is untrusted): layers, and
 * distinct attention specs per model. */
#define MX_MAX_LAYERS 1024
#define MX_MAX_ATTN_SPECS 8
#define MX_MAX_IGNORE 16
typedef struct mx_arch_mem mx_arch_mem;
typedef struct mx_arch {
    const char *family;
    int n_layers, hidden, ffn, vocab, max_pos;
    mx_norm_spec norm;      /* block and final norms */
    mx_residual residual;
    bool parallel_two_norms; /* parallel block with separate attn/ffn norms (NeoX) */
    mx_mlp_kind mlp;
    mx_act act;
    bool mlp_bias, lm_head_bias;
    bool tied;
    bool conv1d;            /* linear weights stored [in, out] (GPT-2 Conv1D) */
    mx_pos_kind pos;
    int pos_offset;         /* learned positions start here (RoBERTa: pad + 1) */
    mx_rope_decl rope_decl[2]; /* how each rope is read (mx_arch_ropes) */
    mx_rope rope[2];        /* built from rope_decl[0 .. n_rope) */
    int n_rope;
    float final_softcap;    /* 0 = off */
    float embed_scale;      /* 1 = off */
    float logit_scale;      /* multiplies logits (1 = off) */
    float residual_scale;   /* sublayer output multiplier (Granite; 1 = off) */
    float mixer_scale, mixer2_scale; /* multipliers of the mixer / mixer2 outputs (0 = 1) */
    float mlp_gate_scale, mlp_out_scale; /* dense MLP: gate projection output and MLP output
                                            multipliers (Falcon-H1 mlp_multipliers; 0 = 1) */
    int bos_id;
    /* encoders */
    bool norm_after_residual; /* post_attn_norm/post_ffn_norm normalise the
                                 residual sum (BERT post-norm), not the
                                 sublayer output (Gemma 2 sandwich) */
    bool pos_skip_pad;        /* RoBERTa positions: pad tokens (id pos_offset-1)
                                 take row pos_offset-1 and are not counted */
    int n_types;              /* rows of names.type_embed */
    mx_head_spec head;        /* classifier / pooler; dense = out = NULL: none */
    mx_names names;
    mx_attn_spec *attn;     /* the default attention spec (every layer's until a family
                               points a layer elsewhere) */
    mx_layer_spec *layers;  /* n_layers entries (mx_arch_layers) */
    mx_moe_spec moe;        /* for layers whose ffn is mx_block_moe */
    mx_mla_spec mla;        /* for layers whose mixer is mx_block_mla */
    mx_ssm_spec ssm;        /* for layers whose mixer is mx_block_mamba / mx_block_mamba2 */
    mx_rglru_spec rglru;    /* for layers whose mixer is mx_block_rglru */
    mx_shortconv_spec shortconv; /* for layers whose mixer is mx_block_shortconv */
    mx_deltanet_spec deltanet;   /* for layers whose mixer is mx_block_deltanet */
    mx_shared_block_spec shared_block; /* for layers whose mixer is mx_block_zamba */
    const char *ignore[MX_MAX_IGNORE]; /* glob patterns of tensors not used */
    int n_ignore;
    /* encoder-decoders: the decoder's description holds the encoder's (owned,
     * bound as mx_model.encoder); an encoder may have an input stem */
    struct mx_arch *encoder;
    int mem_len;            /* rows of encoder memory the cross-attention layers read */
    mx_stem_spec stem;      /* n_conv = 0: the encoder takes token ids */
    mx_attn_spec *attn_specs[MX_MAX_ATTN_SPECS]; /* every attention spec, arch.attn first */
    int n_attn_specs;
    mx_arch_mem *mem;       /* what the description owns */
    mx_lightning_spec lightning; /* for layers whose mixer is mx_block_lightning */
    mx_ple_spec ple;             /* per-layer inputs (dim 0 = none), for layers whose post is mx_block_ple */
    const mx_rename *renames; /* tensor-name rewrites applied before binding (format/checkpoint.h) */
    int n_renames;
    mx_altup_spec altup;      /* AltUp streams (n 0 = none) */
    mx_laurel_spec laurel;    /* for layers whose branch is mx_block_laurel */
    float branch_scale;       /* see mx_layer_spec.branch (0 = 1) */
    mx_mtp_spec mtp;          /* a next-n module run as a draft (on false = none) */
} mx_arch;

/* Fills a (zeroed) from the keys most HF decoder configs share (hidden_size,
 * num_attention_heads, rope_theta, rope_scaling, ...), with Llama's names and
 * structure. Every value is range-checked. */
int mx_arch_hf_defaults(mx_arch *a, const mx_cfg *c);
/* Zeroed memory owned by a, freed by mx_arch_free (NULL + error on failure). */
void *mx_arch_alloc(mx_arch *a, size_t bytes);
/* Frees what a owns and zeroes it. */
void mx_arch_free(mx_arch *a);
/* Sets n_layers and allocates the layers, each attention (arch.attn, made
 * here when a has none) + MLP with rope; 1 <= n <= MX_MAX_LAYERS. */
int mx_arch_layers(mx_arch *a, int n);
/* A new attention spec owned by a, a copy of `like` (zeroed when NULL). */
mx_attn_spec *mx_arch_add_attn(mx_arch *a, const mx_attn_spec *like);
/* Applies the per-layer window pattern: layer i is sliding when pattern says so. */
void mx_arch_set_window_all(mx_arch *a, int window);
int mx_arch_ignore(mx_arch *a, const char *pattern);
/* Multi-token-prediction (next-n) layers stored after the last decoder layer
 * as model.layers.<n_layers + i>.* (DeepSeek V3, GLM-4.5, ...): the config
 * key `key` (num_nextn_predict_layers) says how many; the target ignores
 * them by name (`mlxcel split-mtp` writes one as a draft, nn/mtp.c). */
int mx_arch_ignore_mtp(mx_arch *a, const mx_cfg *c, const char *key);
/* A config marked "mlxcel_mtp": true (a module `mlxcel split-mtp` wrote)
 * describes a next-n draft: arch.mtp names its input stage (nn/mtp.c). */
int mx_mtp_configure(mx_arch *a, const mx_cfg *c);
/* Reads `layer_types` (sliding_attention / full_attention) when present;
 * returns 1 when it was present. */
int mx_arch_layer_types(mx_arch *a, const mx_cfg *c, int window);
/* Reads `mlp_layer_types` when present: "dense" layers run the dense MLP,
 * "sparse" ones `sparse`; returns 1 when it was present. */
int mx_arch_mlp_layer_types(mx_arch *a, const mx_cfg *c, const mx_block_ops *sparse);
/* A rope per layer type (transformers v5's rope_parameters keyed by
 * full_attention / sliding_attention): rope[0] for the full layers, rope[1]
 * for the sliding ones (by window, so call it after the windows are set),
 * each read from its rope_parameters entry when there is one, else with the
 * theta default given. */
void mx_arch_rope_per_type(mx_arch *a, const mx_cfg *c, double full_theta, double sliding_theta);
/* Builds rope[r] from rope_decl[r] for r < n_rope (when pos is MX_POS_ROPE):
 * the one place rope_theta, partial_rotary_factor and rope_scaling are read. */
int mx_arch_ropes(mx_arch *a, const mx_cfg *c);
/* Mamba2's "time_step_limit": [min, max] (when present) narrows the dt clamp
 * [s->dt_min, s->dt_max] the family set; a bound of +-1e38 or beyond is none. */
int mx_ssm_time_step_limit(mx_ssm_spec *s, const mx_cfg *c);
/* Re-reads hidden_act with a family's own default when the key is absent. */
int mx_arch_act_default(mx_arch *a, const mx_cfg *c, const char *def);
#endif
