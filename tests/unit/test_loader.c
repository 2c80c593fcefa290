/* Bad checkpoints get a one-line error that names the file and the problem
 * (never a crash): each case builds a small llama folder and breaks one thing. */
#define _GNU_SOURCE
#include "test.h"
#include "base/base.h"
#include "runtime/engine.h"
#include "format/safetensors.h"
#include "template/template.h"
#include "tokenizer/tokenizer.h"
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[256];
static float g_zeros[4096];

static const char *CONFIG =
    "{\"model_type\":\"llama\",\"hidden_size\":8,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
    "\"num_key_value_heads\":1,\"intermediate_size\":16,\"vocab_size\":16,\"rms_norm_eps\":1e-6%s}";

typedef struct { const char *name; int64_t r, c; } tdef;
static const tdef TENSORS[] = {
    {"model.embed_tokens.weight", 16, 8}, {"lm_head.weight", 16, 8}, {"model.norm.weight", 8, 0},
    {"model.layers.0.input_layernorm.weight", 8, 0}, {"model.layers.0.post_attention_layernorm.weight", 8, 0},
    {"model.layers.0.self_attn.q_proj.weight", 8, 8}, {"model.layers.0.self_attn.k_proj.weight", 4, 8},
    {"model.layers.0.self_attn.v_proj.weight", 4, 8}, {"model.layers.0.self_attn.o_proj.weight", 8, 8},
    {"model.layers.0.mlp.gate_proj.weight", 16, 8}, {"model.layers.0.mlp.up_proj.weight", 16, 8},
    {"model.layers.0.mlp.down_proj.weight", 8, 16},
};

static void write_text(const char *name, const char *text) {
    char *p = mx_path_join(g_dir, name);
    FILE *f = fopen(p, "wb");
    fputs(text, f);
    fclose(f);
    free(p);
}

/* Writes model.safetensors with every tensor except `skip`, plus `extra`
 * (name) and with `bad_shape` given a wrong first dimension. */
static void write_model(const char *skip, const char *extra, const char *bad_shape) {
    mx_st_out ts[16];
    int n = 0;
    for (size_t i = 0; i < MX_ARRAY_LEN(TENSORS); i++) {
        if (skip && !strcmp(skip, TENSORS[i].name)) continue;
        mx_st_out *t = &ts[n++];
        t->name = TENSORS[i].name;
        t->dtype = MX_DT_F32;
        t->ndim = TENSORS[i].c ? 2 : 1;
        t->shape[0] = TENSORS[i].r + (bad_shape && !strcmp(bad_shape, t->name) ? 1 : 0);
        t->shape[1] = TENSORS[i].c;
        t->nbytes = (size_t)t->shape[0] * (TENSORS[i].c ? (size_t)TENSORS[i].c : 1) * 4;
        t->data = g_zeros;
    }
    if (extra) ts[n++] = (mx_st_out){extra, MX_DT_F32, 1, {4}, g_zeros, 16};
    char *p = mx_path_join(g_dir, "model.safetensors");
    mx_st_write(p, ts, n, NULL);
    free(p);
}

static void reset(const char *config_extra) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", g_dir, g_dir);
    if (system(cmd)) {}
    char cfg[1024];
    snprintf(cfg, sizeof cfg, CONFIG, config_extra ? config_extra : "");
    write_text("config.json", cfg);
}

/* Rewrites the safetensors header with `header` (data kept). */
static void patch_header(const char *header, size_t data_len) {
    char *p = mx_path_join(g_dir, "model.safetensors");
    FILE *f = fopen(p, "wb");
    uint64_t hl = strlen(header);
    fwrite(&hl, 8, 1, f);
    fwrite(header, 1, hl, f);
    fwrite(g_zeros, 1, data_len, f);
    fclose(f);
    free(p);
}

static void expect(const char *name, const char *needle, const char *needle2) {
    mx_engine e;
    int rc = mx_engine_open(g_dir, &e);
    if (rc == 0) { mx_engine_close(&e); CHECK(name, 0, "loaded without error"); return; }
    const char *msg = mx_errmsg();
    bool ok = strstr(msg, needle) && (!needle2 || strstr(msg, needle2)) && !strchr(msg, '\n');
    CHECK(name, ok, "error was: %s (wanted '%s'%s%s)", msg, needle, needle2 ? " and " : "", needle2 ? needle2 : "");
}

/* A copy of fixture `fx` in g_dir whose config gets `cfg_extra` (a JSON
 * fragment appended to the top-level object, or "") and whose weights get one
 * more tensor `extra` of 4 floats: multi-token-prediction modules some
 * checkpoints carry, which their families must ignore by name. */
static void mtp_copy(const char *fx, const char *cfg_extra, const char *extra) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", g_dir, g_dir);
    if (system(cmd)) {}
    char *src = mx_path_join(fx, "config.json"), *text = NULL;
    size_t len = 0;
    if (mx_read_file(src, 1 << 20, &text, &len)) { free(src); return; }
    char *end = strrchr(text, '}');
    if (end) *end = 0;
    char *cfg = mx_asprintf("%s%s}", text, cfg_extra);
    write_text("config.json", cfg);
    free(cfg); free(text); free(src);
    src = mx_path_join(fx, "model.safetensors");
    mx_st_file f;
    if (mx_st_open(src, &f)) { free(src); return; }
    mx_st_out *ts = calloc((size_t)f.n_tensors + 1, sizeof *ts);
    for (int i = 0; i < f.n_tensors; i++) {
        const mx_tensor *t = &f.tensors[i];
        ts[i] = (mx_st_out){t->name, t->dtype, t->ndim, {0}, t->data, t->nbytes};
        memcpy(ts[i].shape, t->shape, sizeof t->shape);
    }
    ts[f.n_tensors] = (mx_st_out){extra, MX_DT_F32, 1, {4}, g_zeros, 16};
    char *dst = mx_path_join(g_dir, "model.safetensors");
    mx_st_write(dst, ts, f.n_tensors + 1, NULL);
    free(dst); free(ts); free(src);
    mx_st_close(&f);
}

static void expect_loads(const char *name) {
    mx_engine e;
    int rc = mx_engine_open(g_dir, &e);
    CHECK(name, rc == 0, "%s", mx_errmsg());
    if (!rc) mx_engine_close(&e);
}

static void test_mtp(void) {
    /* GLM-4.5 / DeepSeek: next-n layers after the last layer */
    mtp_copy("tests/fixtures/glm4_moe", ",\"num_nextn_predict_layers\":1", "model.layers.3.eh_proj.weight");
    expect_loads("mtp/glm4_moe_nextn_layer_ignored");
    mtp_copy("tests/fixtures/glm4_moe", "", "model.layers.3.eh_proj.weight");
    expect("mtp/glm4_moe_undeclared_layer", "unexpected tensor", "model.layers.3.eh_proj.weight");
    /* ERNIE 4.5: model.mtp_* modules */
    mtp_copy("tests/fixtures/ernie4_5_moe", "", "model.mtp_block.0.input_layernorm.weight");
    expect_loads("mtp/ernie4_5_moe_ignored");
    /* Qwen3-Next: top-level mtp.* */
    mtp_copy("tests/fixtures/qwen3_next", "", "mtp.fc.weight");
    expect_loads("mtp/qwen3_next_ignored");
}

int main(void) {
    if (!access("tests/fixtures/glm4_moe/config.json", R_OK)) {
        snprintf(g_dir, sizeof g_dir, "/tmp/mlxcel-test-loader-mtp-%d", (int)getpid());
        test_mtp();
    }
    snprintf(g_dir, sizeof g_dir, "/tmp/mlxcel-test-loader-%d", (int)getpid());
    reset(NULL);
    write_model(NULL, NULL, NULL);
    mx_engine e;
    int rc = mx_engine_open(g_dir, &e);
    CHECK("loader/valid", rc == 0, "%s", mx_errmsg());
    if (!rc) mx_engine_close(&e);

    /* --no-mmap: the copy holds the same bytes on 2 MiB-aligned memory, and
     * a truncated file still gets the same error */
    {
        char *p = mx_path_join(g_dir, "model.safetensors");
        mx_st_file a, b;
        int ra = mx_st_open(p, &a);
        mx_st_set_load_mode(MX_LOAD_COPY);
        int rb = mx_st_open(p, &b);
        bool same = ra == 0 && rb == 0 && a.map_len == b.map_len && b.alloc_len >= b.map_len && !memcmp(a.map, b.map, a.map_len) &&
                    ((uintptr_t)b.map & ((2u << 20) - 1)) == 0 && a.n_tensors == b.n_tensors;
        CHECK("loader/no_mmap_same_bytes", same, "ra=%d rb=%d %s", ra, rb, mx_errmsg());
        if (!ra) mx_st_close(&a);
        if (!rb) mx_st_close(&b);
        rc = mx_engine_open(g_dir, &e);
        CHECK("loader/no_mmap_engine", rc == 0, "%s", mx_errmsg());
        if (!rc) mx_engine_close(&e);
        struct stat st0;
        stat(p, &st0);
        if (truncate(p, st0.st_size - 100)) {}
        expect("loader/no_mmap_truncated", "model.safetensors: truncated", NULL);
        mx_st_set_load_mode(MX_LOAD_MMAP);
        free(p);
        write_model(NULL, NULL, NULL);
    }
    /* mx_st_release: pages given back read the same, mapped or copied */
    {
        static uint8_t big[256 * 1024];
        for (size_t i = 0; i < sizeof big; i++) big[i] = (uint8_t)(i * 2654435761u >> 11);
        mx_st_out t = {"t", MX_DT_U8, 1, {(int64_t)sizeof big}, big, sizeof big};
        char *p = mx_path_join(g_dir, "big.safetensors");
        mx_st_write(p, &t, 1, NULL);
        for (int mode = 0; mode < 2; mode++) {
            mx_st_set_load_mode(mode ? MX_LOAD_COPY : MX_LOAD_MMAP);
            mx_st_file f;
            bool ok = mx_st_open(p, &f) == 0;
            const mx_tensor *tt = ok ? mx_st_find(&f, "t") : NULL;
            ok = tt && mx_st_release(tt->data + 1000, 200000) && !memcmp(tt->data, big, sizeof big) &&
                 !mx_st_release(big, sizeof big); /* not a file's memory */
            CHECK(mode ? "loader/release_copied" : "loader/release_mapped", ok, "%s", mx_errmsg());
            if (tt) mx_st_close(&f);
        }
        /* a copied file changed on disk since: nothing is re-mapped, the copy stays */
        mx_st_set_load_mode(MX_LOAD_COPY);
        mx_st_file f;
        bool ok = mx_st_open(p, &f) == 0;
        const mx_tensor *tt = ok ? mx_st_find(&f, "t") : NULL;
        if (tt) {
            mx_st_out t2 = {"t", MX_DT_U8, 1, {1000}, big, 1000};
            mx_st_write(p, &t2, 1, NULL);
            ok = !mx_st_release(tt->data + 1000, 200000) && !memcmp(tt->data, big, sizeof big);
            mx_st_close(&f);
        }
        CHECK("loader/release_copied_file_changed", tt && ok, "%s", mx_errmsg());
        mx_st_set_load_mode(MX_LOAD_MMAP);
        free(p);
    }

    write_model("model.layers.0.mlp.up_proj.weight", NULL, NULL);
    expect("loader/missing_tensor", "missing tensor 'model.layers.0.mlp.up_proj.weight'", NULL);
    write_model(NULL, "model.layers.0.extra.weight", NULL);
    expect("loader/unexpected_tensor", "unexpected tensor 'model.layers.0.extra.weight'", "model.safetensors");
    write_model(NULL, NULL, "model.layers.0.self_attn.k_proj.weight");
    expect("loader/bad_shape", "'model.layers.0.self_attn.k_proj.weight' has shape [5, 8], expected [4, 8]", NULL);
    /* errors stay one line when untrusted text in them holds newlines (fuzz_model: jansson quotes the
     * bytes near a JSON error; a tensor name may hold anything) */
    write_model(NULL, "model.layers.0.evil\nname.weight", NULL);
    expect("loader/newline_in_tensor_name", "unexpected tensor 'model.layers.0.evil?name.weight'", NULL);
    write_model(NULL, NULL, NULL);
    write_text("config.json", "\"\\\n\n  \"t");
    expect("loader/newline_in_json_error", "config.json: invalid JSON", NULL);
    reset(NULL);

    /* truncated file: cut the data section */
    write_model(NULL, NULL, NULL);
    char *mp = mx_path_join(g_dir, "model.safetensors");
    struct stat st;
    stat(mp, &st);
    if (truncate(mp, st.st_size - 100)) {}
    expect("loader/truncated", "model.safetensors: truncated", NULL);
    if (truncate(mp, 5)) {}
    expect("loader/truncated_header", "truncated", NULL);
    free(mp);

    /* bad headers: each is refused with its reason */
    static const struct { const char *name, *header; size_t data; const char *needle, *needle2; } bad[] = {
        {"loader/overlap", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}", 24, "overlapping data", NULL},
        {"loader/unknown_dtype", "{\"a\":{\"dtype\":\"Q9\",\"shape\":[4],\"data_offsets\":[0,16]}}", 16, "unknown dtype 'Q9'", NULL},
        {"loader/offset_past_end", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,160]}}", 16, "truncated", "'a'"},
        {"loader/size_mismatch", "{\"a\":{\"dtype\":\"F32\",\"shape\":[5],\"data_offsets\":[0,16]}}", 16, "need 20", NULL},
        {"loader/bad_json", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}", 16, "not valid JSON", NULL},
        {"loader/huge_shape", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,16]}}", 16, "'a'", NULL},
        /* the streaming header reader refuses what the JSON tree did */
        {"loader/duplicate_tensor", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[16,32]}}", 32,
         "tensor 'a' appears twice", NULL},
        {"loader/text_after_header", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}} x", 16, "not valid JSON", NULL},
        {"loader/float_dimension", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4.0],\"data_offsets\":[0,16]}}", 16, "shape[0] is not a valid dimension", NULL},
        {"loader/nul_in_name", "{\"a\\u0000\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 16, "not valid JSON", NULL},
        /* parsed (metadata and extra keys skipped); the loader then misses the other tensors */
        {"loader/metadata_and_extra_keys_read", "{\"__metadata__\":{\"format\":\"pt\",\"x\":[1,{\"y\":null}]},"
         "\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[16,8],\"data_offsets\":[0,512],\"extra\":{}}}", 512, "missing", NULL},
    };
    for (size_t i = 0; i < MX_ARRAY_LEN(bad); i++) {
        patch_header(bad[i].header, bad[i].data);
        expect(bad[i].name, bad[i].needle, bad[i].needle2);
    }
    {
        char *p = mx_path_join(g_dir, "model.safetensors");
        FILE *f = fopen(p, "wb");
        uint64_t hl = (uint64_t)1 << 60;
        fwrite(&hl, 8, 1, f);
        fwrite("{}", 1, 2, f);
        fclose(f);
        free(p);
        expect("loader/huge_header_len", "header length", NULL);
    }

    {
        /* a header of empty tensors: refused after a bounded count, in a pass */
        mx_buf h = {0};
        mx_buf_puts(&h, "{");
        for (int i = 0; i < 5000; i++) mx_buf_printf(&h, "%s\"t%d\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}", i ? "," : "", i);
        mx_buf_puts(&h, "}");
        patch_header(h.data, 0);
        mx_buf_free(&h);
        double t0 = mx_now();
        expect("loader/empty_tensor_flood", "tensors hold no data", NULL);
        CHECK("loader/empty_tensor_flood_fast", mx_now() - t0 < 1.0, "%.3f s", mx_now() - t0);
    }

    /* only regular files are opened: a FIFO in place of any model file is
     * refused at once, not waited on (a child process would hang on open) */
    {
        const char *names[] = {"config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja", "tokenizer_config.json"};
        for (size_t i = 0; i < MX_ARRAY_LEN(names); i++) {
            reset(NULL);
            write_model(NULL, NULL, NULL);
            char *p = mx_path_join(g_dir, names[i]);
            unlink(p);
            int mk = mkfifo(p, 0600);
            double t0 = mx_now();
            int rc;
            if (i < 2) {
                mx_engine e;
                rc = mx_engine_open(g_dir, &e);
                if (!rc) mx_engine_close(&e);
            } else if (i == 2) {
                mx_tokenizer *tk = mx_tok_load(g_dir);
                rc = tk ? 0 : -1;
                mx_tok_free(tk);
            } else {
                char *src = NULL;
                size_t len = 0;
                json_t *sp = NULL;
                rc = mx_chat_template_load(g_dir, false, &src, &len, &sp);
                free(src);
                json_decref(sp);
            }
            char name[64];
            snprintf(name, sizeof name, "loader/fifo_%s", names[i]);
            CHECK(name, mk == 0 && rc != 0 && strstr(mx_errmsg(), "not a regular file") && mx_now() - t0 < 1.0, "mkfifo=%d rc=%d %s", mk, rc, mx_errmsg());
            free(p);
        }
    }

    /* sharded: the index names a shard that is missing */
    reset(NULL);
    write_model(NULL, NULL, NULL);
    write_text("model.safetensors.index.json", "{\"weight_map\":{\"lm_head.weight\":\"model-00002-of-00002.safetensors\"}}");
    expect("loader/missing_shard", "missing shard 'model-00002-of-00002.safetensors'", NULL);
    write_text("model.safetensors.index.json", "{\"weight_map\":{\"lm_head.weight\":\"../../etc/passwd\"}}");
    expect("loader/shard_path", "must be a plain file name", NULL);

    /* config values */
    reset(",\"num_hidden_layers\":1000000000");
    write_model(NULL, NULL, NULL);
    expect("config/absurd_layers", "config.json: num_hidden_layers: value 1000000000 is outside", NULL);
    reset(",\"hidden_size\":\"eight\"");
    write_model(NULL, NULL, NULL);
    expect("config/non_numeric", "config.json: hidden_size: expected an integer", NULL);
    reset(",\"num_key_value_heads\":3");
    write_model(NULL, NULL, NULL);
    expect("config/kv_heads", "not a multiple of num_key_value_heads", NULL);
    reset(",\"rope_scaling\":{\"rope_type\":\"warp\",\"factor\":2}");
    write_model(NULL, NULL, NULL);
    expect("config/rope_type", "unsupported rope_type 'warp'", NULL);
    reset(",\"rms_norm_eps\":-5");
    write_model(NULL, NULL, NULL);
    expect("config/negative_eps", "rms_norm_eps", NULL);
    /* transformers v5 rope_parameters are read like rope_scaling */
    reset(",\"rope_parameters\":{\"rope_type\":\"warp\",\"rope_theta\":1e4}");
    write_model(NULL, NULL, NULL);
    expect("config/rope_parameters_type", "unsupported rope_type 'warp'", NULL);
    reset(",\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":-1}");
    write_model(NULL, NULL, NULL);
    expect("config/rope_parameters_theta", "rope_theta", NULL);
    /* xIELU has per-layer parameters only some families bind */
    reset(",\"hidden_act\":\"xielu\"");
    write_model(NULL, NULL, NULL);
    expect("config/xielu_unbound", "xielu activation needs per-layer parameters", NULL);
    /* configs refused by name rather than mis-read */
    static const struct { const char *name, *cfg, *needle; } refuse[] = {
        {"config/griffin_deepmind", "{\"model_type\":\"griffin\",\"width\":8,\"num_heads\":2}", "DeepMind Griffin config"},
        {"config/phixtral", "{\"model_type\":\"phi-msft\",\"n_embd\":8,\"n_head\":2,\"num_local_experts\":4}", "Phixtral"},
        {"config/bitnet_packed", "{\"model_type\":\"bitnet\",\"hidden_size\":8,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
                                 "\"vocab_size\":16,\"quantization_config\":{\"quant_method\":\"bitnet\"}}", "ternary-packed"},
        {"config/hunyuan_cla", "{\"model_type\":\"hunyuan\",\"hidden_size\":8,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
                               "\"vocab_size\":16,\"use_cla\":true}", "use_cla"},
        {"config/hunyuan_uneven_experts", "{\"model_type\":\"hunyuan_v1_moe\",\"hidden_size\":8,\"num_hidden_layers\":2,"
                                          "\"num_attention_heads\":2,\"vocab_size\":16,\"num_experts\":[4,8]}", "per-layer values that differ"},
        {"config/deepseek_v2_norm_topk", "{\"model_type\":\"deepseek_v2\",\"hidden_size\":8,\"num_hidden_layers\":1,"
                                         "\"num_attention_heads\":2,\"vocab_size\":16,\"num_experts_per_tok\":2,\"norm_topk_prob\":true}",
         "norm_topk_prob"},
        {"config/longcat_layers", "{\"model_type\":\"longcat_flash\",\"hidden_size\":8,\"num_layers\":2,\"num_hidden_layers\":3,"
                                  "\"num_attention_heads\":2,\"vocab_size\":16}", "is not 2 * num_layers"},
        {"config/deepseek_sigmoid", "{\"model_type\":\"deepseek\",\"hidden_size\":8,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
                                    "\"vocab_size\":16,\"scoring_func\":\"sigmoid\"}", "scoring_func 'sigmoid'"},
        {"config/ffn_list_length", "{\"model_type\":\"gemma3n_text\",\"hidden_size\":8,\"num_hidden_layers\":2,\"num_attention_heads\":2,"
                                   "\"vocab_size\":16,\"intermediate_size\":[8]}", "intermediate_size: 1 entries for 2 layers"},
        {"config/gemma3n_sparsity", "{\"model_type\":\"gemma3n_text\",\"hidden_size\":8,\"num_hidden_layers\":2,\"num_attention_heads\":2,"
                                    "\"vocab_size\":16,\"activation_sparsity_pattern\":[0.5,1.0]}", "activation_sparsity_pattern"},
        {"config/gemma3n_altup_idx", "{\"model_type\":\"gemma3n_text\",\"hidden_size\":8,\"num_hidden_layers\":2,\"num_attention_heads\":2,"
                                     "\"vocab_size\":16,\"altup_num_inputs\":2,\"altup_active_idx\":2}", "altup_active_idx 2"},
        {"config/deepseek_v32_no_q_lora", "{\"model_type\":\"deepseek_v32\",\"hidden_size\":8,\"num_hidden_layers\":1,"
                                          "\"num_attention_heads\":2,\"vocab_size\":16,\"q_lora_rank\":null}", "q_lora_rank is required"},
        {"config/deepseek_v32_layer_types", "{\"model_type\":\"deepseek_v32\",\"hidden_size\":8,\"num_hidden_layers\":1,"
                                            "\"num_attention_heads\":2,\"vocab_size\":16,\"layer_types\":[\"full_attention\"]}",
         "only deepseek_sparse_attention"},
        {"config/mlp_layer_types", "{\"model_type\":\"glm4_moe_lite\",\"hidden_size\":8,\"num_hidden_layers\":2,"
                                   "\"num_attention_heads\":2,\"vocab_size\":16,\"mlp_layer_types\":[\"dense\",\"moe\"]}",
         "mlp_layer_types[1]: unsupported type 'moe'"},
    };
    for (size_t i = 0; i < MX_ARRAY_LEN(refuse); i++) {
        reset(NULL);
        write_model(NULL, NULL, NULL);
        write_text("config.json", refuse[i].cfg);
        expect(refuse[i].name, refuse[i].needle, NULL);
    }
    write_text("config.json", "{\"model_type\":\"nosuchmodel\",\"hidden_size\":8}");
    expect("config/unknown_model_type", "model_type 'nosuchmodel' is not supported", NULL);
    write_text("config.json", "{\"model_type\": ");
    expect("config/bad_json", "config.json: invalid JSON", NULL);
    char *cp = mx_path_join(g_dir, "config.json");
    unlink(cp);
    free(cp);
    expect("config/missing", "missing config.json", NULL);

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd)) {}
    TEST_END();
}
