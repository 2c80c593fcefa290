/* Whisper (WhisperForConditionalGeneration), an encoder-decoder: the
 * decoder below, its encoder in arch.encoder. Encoder: an input stem over
 * the log-mel features (conv1 k3 p1 + GELU, conv2 k3 s2 p1 + GELU), the
 * stored sinusoidal position table, pre-LayerNorm layers with bidirectional
 * attention (q/v/out biases, no k bias) and a plain GELU MLP (fc1, fc2),
 * final layer_norm. Decoder: token + learned positions, the same layers with
 * causal self-attention and a cross-attention sub-layer (encoder_attn) over
 * the encoder's max_source_positions rows, final layer_norm, the output
 * tied to the token embedding (proj_out, when a checkpoint stores it, is
 * that same matrix). */
#include "family.h"
#include "../base/base.h"
#include <math.h>
#include <string.h>

#define STACK_NAMES(P)                                                                                          \
    {                                                                                                           \
        .attn_norm = P ".layers.%d.self_attn_layer_norm", .ffn_norm = P ".layers.%d.final_layer_norm",          \
        .up = P ".layers.%d.fc1", .down = P ".layers.%d.fc2", .final_norm = P ".layer_norm",                    \
    }
#define ATTN_NAMES(P, A)                                                                                        \
    {                                                                                                           \
        .q = P ".layers.%d." A ".q_proj", .k = P ".layers.%d." A ".k_proj", .v = P ".layers.%d." A ".v_proj",  \
        .o = P ".layers.%d." A ".out_proj",                                                                     \
    }

/* what the encoder and decoder stacks share: sizes, LayerNorm, GELU MLP, attention */
static int stack(mx_arch *a, const mx_cfg *c, int H, const char *layers, const char *heads, const char *ffn, const mx_names *names,
                 const mx_attn_names *attn) {
    int n, nh, err = 0;
    if (mx_cfg_i32(c, layers, 0, 1, MX_MAX_LAYERS, &n) || mx_cfg_i32(c, heads, 0, 1, 1024, &nh) || mx_cfg_i32(c, ffn, 0, 1, 1 << 18, &a->ffn))
        return -1;
    if (!n || !nh || !a->ffn) return mx_set_err("%s: %s, %s and %s are required", c->file, layers, heads, ffn);
    if (H % nh) return mx_set_err("%s: d_model %d is not a multiple of %s %d", c->file, H, heads, nh);
    if (mx_arch_layers(a, n)) return -1;
    a->hidden = H;
    int hd = H / nh;
    *a->attn = (mx_attn_spec){.n_heads = nh, .n_kv_heads = nh, .head_dim = hd, .scale = 1.0f / sqrtf((float)hd),
                              .q_bias = true, .v_bias = true, .o_bias = true, .names = *attn};
    a->names = *names;
    a->norm = (mx_norm_spec){MX_NORM_LAYER, 0, true, true, 1e-5f}; /* nn.LayerNorm */
    a->mlp = MX_MLP_PLAIN;
    a->mlp_bias = true;
    a->embed_scale = a->logit_scale = a->residual_scale = 1;
    a->pos = MX_POS_LEARNED;
    a->bos_id = -1;
    for (int i = 0; i < n; i++) a->layers[i].rope = false;
    const char *act = mx_cfg_str(c, "activation_function", "gelu", &err);
    if (err) return -1;
    if (mx_act_parse(act, &a->act)) return mx_set_err("%s: activation_function: unsupported '%s'", c->file, act);
    return 0;
}

static int configure(mx_arch *a, const mx_cfg *c) {
    static const mx_names dec_names = STACK_NAMES("model.decoder"), enc_names = STACK_NAMES("model.encoder");
    static const mx_attn_names dec_self = ATTN_NAMES("model.decoder", "self_attn"), dec_cross = ATTN_NAMES("model.decoder", "encoder_attn"),
                               enc_self = ATTN_NAMES("model.encoder", "self_attn");
    int H, src, mels;
    bool scale;
    if (mx_cfg_i32(c, "d_model", 0, 1, 1 << 16, &H) || mx_cfg_i32(c, "vocab_size", 0, 8, 1 << 20, &a->vocab) ||
        mx_cfg_i32(c, "max_source_positions", 1500, 1, 1 << 16, &src) || mx_cfg_i32(c, "max_target_positions", 448, 4, 1 << 16, &a->max_pos) ||
        mx_cfg_i32(c, "num_mel_bins", 80, 1, 512, &mels) || mx_cfg_bool(c, "scale_embedding", false, &scale))
        return -1;
    if (!H) return mx_set_err("%s: d_model is required", c->file);
    /* the decoder */
    if (stack(a, c, H, "decoder_layers", "decoder_attention_heads", "decoder_ffn_dim", &dec_names, &dec_self)) return -1;
    a->names.embed = "model.decoder.embed_tokens";
    a->names.pos_embed = "model.decoder.embed_positions";
    a->names.xattn_norm = "model.decoder.layers.%d.encoder_attn_layer_norm";
    a->tied = true;
    a->embed_scale = scale ? sqrtf((float)H) : 1.0f;
    a->mem_len = src;
    mx_attn_spec *x = mx_arch_add_attn(a, a->attn);
    if (!x) return -1;
    x->names = dec_cross;
    for (int i = 0; i < a->n_layers; i++) a->layers[i].xattn = &mx_block_xattn, a->layers[i].xattn_attn = x;
    const char *dec_ignore[] = {"model.encoder.*", "proj_out.weight"};
    for (size_t i = 0; i < MX_ARRAY_LEN(dec_ignore); i++) if (mx_arch_ignore(a, dec_ignore[i])) return -1;
    /* the encoder */
    mx_arch *e = a->encoder = mx_arch_alloc(a, sizeof *a->encoder);
    if (!e || stack(e, c, H, "encoder_layers", "encoder_attention_heads", "encoder_ffn_dim", &enc_names, &enc_self)) return -1;
    e->family = "whisper";
    e->attn->bidirectional = true;
    e->names.pos_embed = "model.encoder.embed_positions";
    e->max_pos = src;
    e->stem = (mx_stem_spec){.n_in = mels, .frames = 2 * src, .n_conv = 2, .stride = {1, 2},
                             .conv = {"model.encoder.conv1", "model.encoder.conv2"}, .act = e->act};
    const char *enc_ignore[] = {"model.decoder.*", "proj_out.weight"};
    for (size_t i = 0; i < MX_ARRAY_LEN(enc_ignore); i++) if (mx_arch_ignore(e, enc_ignore[i])) return -1;
    return 0;
}

MX_FAMILY(whisper, .name = "whisper", .task = "speech-to-text",
          .features = "encoder-decoder: conv stem, sinusoidal encoder positions, bidirectional encoder, cross-attention decoder",
          .configure = configure)
