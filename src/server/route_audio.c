/* Speech-to-text routes: POST /v1/audio/transcriptions and
 * /v1/audio/translations (OpenAI's multipart/form-data, read and run by
 * audio_api.c). A transcription takes seconds and the model runs one at a
 * time, so uploads queue for a thread of their own (jobs.c) instead of
 * holding the transport's workers. On shutdown what still waits gets 503;
 * the one running finishes (Whisper decoding has no cancellation point). */
#define _GNU_SOURCE /* strdup */
#include "server_int.h"
#include "audio_api.h"
#include "../base/base.h"
#include <stdlib.h>
#include <string.h>

typedef struct {
    mx_srv_job base;
    bool translate;
    char *ctype;
    mx_buf body;
    mx_audio_reply rep;
} job;

struct mx_speech_runner {
    mx_speech *sp;
    mx_srv_jobs *q;
};

static void job_free(mx_srv_job *b) {
    job *j = (job *)b;
    free(j->ctype);
    mx_buf_free(&j->body);
    mx_buf_free(&j->rep.body);
    free(j);
}

static void job_reply(mx_srv_job *b, server *sv, mx_srv_req *rq) {
    job *j = (job *)b;
    if (j->rep.code == 200) mx_srv_text(rq, 200, j->rep.content_type, &j->rep.body);
    else if (j->rep.code == 400) mx_srv_bad_request(sv, rq, "%s", j->rep.err);
    else mx_srv_error(sv, rq, j->rep.code, "server_error", j->rep.err);
}

static const mx_srv_job_ops job_ops = {job_reply, job_free};

static void run(void *ctx, mx_srv_job *list) {
    mx_speech_runner *r = ctx;
    for (mx_srv_job *b = list; b; b = b->next) {
        job *j = (job *)b;
        mx_audio_api(r->sp, j->translate, j->ctype, j->body.data ? j->body.data : "", j->body.len, &j->rep);
    }
}

int mx_speech_runner_new(const char *dir, int threads, mx_speech_runner **out) {
    mx_speech_runner *r = mx_calloc(1, sizeof *r);
    if (!r) return MX_ERR;
    if (mx_speech_open(dir, threads, &r->sp) || mx_srv_jobs_new(run, r, 1, &r->q)) {
        mx_speech_runner_free(r);
        return MX_ERR;
    }
    *out = r;
    return MX_OK;
}

void mx_speech_runner_stop(mx_speech_runner *r) {
    if (r) mx_srv_jobs_stop(r->q);
}

void mx_speech_runner_free(mx_speech_runner *r) {
    if (!r) return;
    mx_srv_jobs_free(r->q);
    mx_speech_close(r->sp);
    free(r);
}

const char *mx_speech_runner_name(const mx_speech_runner *r) { return mx_speech_name(r->sp); }
const mx_tokenizer *mx_speech_runner_tokenizer(const mx_speech_runner *r) { return mx_speech_tokenizer(r->sp); }

static int audio_route(server *sv, mx_srv_req *rq, bool translate) {
    job *j = calloc(1, sizeof *j);
    const char *ct = mx_srv_content_type(rq);
    if (!j || (ct && !(j->ctype = strdup(ct)))) {
        free(j);
        return mx_srv_error(sv, rq, 500, "server_error", "out of memory");
    }
    j->base.ops = &job_ops;
    j->translate = translate;
    j->body = mx_srv_take_body(rq);
    return mx_srv_jobs_submit(sv->speech->q, sv, rq, &j->base); /* sv->speech: the route table's MX_RT_SPEECH */
}

int mx_route_transcriptions(server *sv, mx_srv_req *rq, json_t *body) {
    (void)body;
    return audio_route(sv, rq, false);
}

int mx_route_translations(server *sv, mx_srv_req *rq, json_t *body) {
    (void)body;
    return audio_route(sv, rq, true);
}
