/* A multi-token-prediction (next-n) module run as a draft model (arch.mtp).
 * DeepSeek V3 and GLM-4.5 store it after the last decoder layer; `mlxcel
 * split-mtp` writes it as a folder of its own: one decoder layer of the
 * family, shared_head.norm as the final norm and shared_head.head (or the
 * target's) as the head, and this input stage. Its input for token i is
 * eh_proj([enorm(embed(tok_i)) ; hnorm(h_i)]), where h_i is the target's
 * hidden state after its final norm at the position before tok_i (SGLang's
 * deepseek_nextn.py and vLLM's deepseek_mtp.py feed it so; transformers does
 * not run the module). */
#include "model.h"
#include "../base/base.h"
#include <string.h>

int mx_mtp_configure(mx_arch *a, const mx_cfg *c) {
    bool on = false;
    if (mx_cfg_bool(c, "mlxcel_mtp", false, &on)) return MX_ERR;
    if (!on) return MX_OK;
    a->mtp = (mx_mtp_spec){.on = true, .enorm = "model.mtp.enorm", .hnorm = "model.mtp.hnorm", .eh_proj = "model.mtp.eh_proj"};
    return MX_OK;
}

int mx_mtp_bind(mx_model *m) {
    const mx_arch *a = &m->arch;
    if (!a->mtp.on) return MX_OK;
    if (m->shard) return mx_set_err("%s: a next-n draft module runs in one process (not under --tp / --pp)", m->ck.dir);
    int H = a->hidden;
    return mx_load_norm(m, &a->norm, a->mtp.enorm, 0, H, &m->mtp_enorm) || mx_load_norm(m, &a->norm, a->mtp.hnorm, 0, H, &m->mtp_hnorm) ||
                   mx_load_lin(m, a->mtp.eh_proj, 0, H, 2 * H, false, &m->mtp_eh, NULL)
               ? MX_ERR
               : MX_OK;
}

void mx_mtp_free(mx_model *m) {
    mx_normw_free(&m->mtp_enorm);
    mx_normw_free(&m->mtp_hnorm);
    mx_weight_free(&m->mtp_eh);
}

void mx_mtp_inputs(const mx_fwd *f, float *x, float *cat) {
    const mx_model *m = f->m;
    const mx_arch *a = &m->arch;
    int N = f->N, H = a->hidden;
    for (int t = 0; t < N; t++) {
        const mx_seq_in *s = &f->seqs[f->seq_of[t]];
        float *row = cat + (size_t)t * 2 * H;
        memcpy(row, x + (size_t)t * H, (size_t)H * 4);
        memcpy(row + H, s->hidden + (size_t)(f->pos[t] - s->kv->len) * H, (size_t)H * 4);
    }
    mx_norm_rows_f(f, &a->norm, &m->mtp_enorm, cat, cat, N, H, 2 * H);
    mx_norm_rows_f(f, &a->norm, &m->mtp_hnorm, cat + H, cat + H, N, H, 2 * H);
    mx_linear(f, &m->mtp_eh, NULL, cat, N, 2 * H, x, H);
}
