/* GET /health, /v1/models and /metrics (Prometheus text). */
#include "server_int.h"
#include "../base/base.h"
#include <string.h>
#include <time.h>

int mx_route_health(server *sv, mx_srv_req *rq, json_t *req) {
    (void)req;
    if (atomic_load(&sv->ready)) return mx_srv_json(rq, 200, json_pack("{s:s}", "status", "ok"));
    const char *why = atomic_load(&sv->draining) ? "shutting down" : "loading model";
    return mx_srv_json(rq, 503, json_pack("{s:{s:s,s:s}}", "error", "message", why, "type", "unavailable_error"));
}

/* The model's id, then its other --alias names (any name is accepted in requests). */
int mx_route_models(server *sv, mx_srv_req *rq, json_t *req) {
    (void)req;
    json_t *data = json_array(), *aliases = json_array();
    for (int i = -1; i < sv->o.n_aliases; i++) {
        const char *id = i < 0 ? sv->name : sv->o.aliases[i];
        if (i >= 0) json_array_append_new(aliases, json_string(id));
        if (i >= 0 && !strcmp(id, sv->name)) continue;
        json_array_append_new(data, json_pack("{s:s,s:s,s:I,s:s}", "id", id, "object", "model", "created", (json_int_t)time(NULL), "owned_by", "mlxcel"));
    }
    json_object_set_new(json_array_get(data, 0), "aliases", aliases);
    return mx_srv_json(rq, 200, json_pack("{s:s,s:o}", "object", "list", "data", data));
}

int mx_route_metrics(server *sv, mx_srv_req *rq, json_t *req) {
    (void)req;
    mx_sched_stats st = {0};
    if (sv->sched) mx_sched_stats_get(sv->sched, &st);
    mx_buf b = {0};
    mx_buf_printf(&b,
                  "# HELP mlxcel_http_requests_total HTTP requests received.\n# TYPE mlxcel_http_requests_total counter\n"
                  "mlxcel_http_requests_total %llu\n"
                  "# HELP mlxcel_http_errors_total Requests answered with an error.\n# TYPE mlxcel_http_errors_total counter\n"
                  "mlxcel_http_errors_total %llu\n"
                  "# HELP mlxcel_requests_total Generation requests accepted.\n# TYPE mlxcel_requests_total counter\n"
                  "mlxcel_requests_total %llu\n"
                  "# HELP mlxcel_prompt_tokens_total Prompt tokens of the requests admitted, cached ones included.\n# TYPE mlxcel_prompt_tokens_total counter\n"
                  "mlxcel_prompt_tokens_total %llu\n"
                  "# HELP mlxcel_prompt_tokens_cached_total Prompt tokens reused from the prompt cache.\n# TYPE mlxcel_prompt_tokens_cached_total counter\n"
                  "mlxcel_prompt_tokens_cached_total %llu\n"
                  "# HELP mlxcel_prompt_tokens_borrowed_total Cached prompt tokens taken from another slot's cache (in the cached total too).\n"
                  "# TYPE mlxcel_prompt_tokens_borrowed_total counter\n"
                  "mlxcel_prompt_tokens_borrowed_total %llu\n"
                  "# HELP mlxcel_generation_tokens_total Tokens generated.\n# TYPE mlxcel_generation_tokens_total counter\n"
                  "mlxcel_generation_tokens_total %llu\n"
                  "# HELP mlxcel_requests_active Requests being generated.\n# TYPE mlxcel_requests_active gauge\n"
                  "mlxcel_requests_active %d\n"
                  "# HELP mlxcel_queue_depth Requests waiting for a slot.\n# TYPE mlxcel_queue_depth gauge\n"
                  "mlxcel_queue_depth %d\n"
                  "# HELP mlxcel_time_to_first_token_seconds Mean time from request to first token.\n# TYPE mlxcel_time_to_first_token_seconds gauge\n"
                  "mlxcel_time_to_first_token_seconds %.6f\n"
                  "# HELP mlxcel_decode_tokens_per_second Aggregate decode rate of the last step.\n# TYPE mlxcel_decode_tokens_per_second gauge\n"
                  "mlxcel_decode_tokens_per_second %.3f\n",
                  (unsigned long long)atomic_load(&sv->n_http), (unsigned long long)atomic_load(&sv->n_errors),
                  (unsigned long long)st.requests, (unsigned long long)st.prompt_tokens, (unsigned long long)st.cached_tokens,
                  (unsigned long long)st.borrowed_tokens, (unsigned long long)st.gen_tokens, st.active, st.queued, st.ttft_count ? st.ttft_sum / st.ttft_count : 0.0, st.decode_tps);
    if (sv->sched && (sv->o.lookup_ngram || sv->o.draft_dir))
        mx_buf_printf(&b,
                      "# HELP mlxcel_spec_draft_tokens_total Tokens drafted (prompt lookup or the draft model) and checked.\n"
                      "# TYPE mlxcel_spec_draft_tokens_total counter\nmlxcel_spec_draft_tokens_total %llu\n"
                      "# HELP mlxcel_spec_accepted_tokens_total Drafted tokens the model kept.\n"
                      "# TYPE mlxcel_spec_accepted_tokens_total counter\nmlxcel_spec_accepted_tokens_total %llu\n",
                      (unsigned long long)st.spec_drafted, (unsigned long long)st.spec_accepted);
    if (sv->sched) {
        mx_buf_printf(&b,
                      "# HELP mlxcel_kv_cache_bytes Memory the slots' KV caches take now (their written pages).\n# TYPE mlxcel_kv_cache_bytes gauge\n"
                      "mlxcel_kv_cache_bytes %zu\n"
                      "# HELP mlxcel_kv_cache_reserved_bytes Address space reserved for them (every slot's whole context).\n"
                      "# TYPE mlxcel_kv_cache_reserved_bytes gauge\nmlxcel_kv_cache_reserved_bytes %zu\n"
                      "# HELP mlxcel_kv_cache_releases_total Slot caches given back (replaced, or released for --kv-memory).\n"
                      "# TYPE mlxcel_kv_cache_releases_total counter\nmlxcel_kv_cache_releases_total %llu\n"
                      "# HELP mlxcel_kv_cache_shared_bytes Cache pages of a prompt prefix mapped by more than one slot, once per extra slot "
                      "(memory that sharing saves).\n# TYPE mlxcel_kv_cache_shared_bytes gauge\nmlxcel_kv_cache_shared_bytes %llu\n"
                      "# HELP mlxcel_kv_cache_dedup_bytes_total Cache pages of a prefix two caches had computed apart (admitted together), "
                      "found equal and kept once.\n# TYPE mlxcel_kv_cache_dedup_bytes_total counter\nmlxcel_kv_cache_dedup_bytes_total %llu\n",
                      mx_sched_kv_resident(sv->sched), mx_sched_kv_bytes(sv->sched), (unsigned long long)st.kv_releases,
                      (unsigned long long)st.kv_shared_bytes, (unsigned long long)st.kv_dedup_bytes);
        if (sv->o.cache_ram && !sv->tm.e.model.shard)
            mx_buf_printf(&b,
                          "# HELP mlxcel_prompt_cache_entries Earlier prompts' caches kept in the prompt cache (--cache-ram).\n"
                          "# TYPE mlxcel_prompt_cache_entries gauge\nmlxcel_prompt_cache_entries %llu\n"
                          "# HELP mlxcel_prompt_cache_tokens Tokens those entries hold.\n# TYPE mlxcel_prompt_cache_tokens gauge\n"
                          "mlxcel_prompt_cache_tokens %llu\n"
                          "# HELP mlxcel_prompt_cache_bytes Memory they are charged (their cache rows, token arrays and state snapshots).\n"
                          "# TYPE mlxcel_prompt_cache_bytes gauge\nmlxcel_prompt_cache_bytes %llu\n"
                          "# HELP mlxcel_prompt_cache_hit_tokens_total Prompt tokens taken from the prompt cache (in the cached and borrowed totals too).\n"
                          "# TYPE mlxcel_prompt_cache_hit_tokens_total counter\nmlxcel_prompt_cache_hit_tokens_total %llu\n"
                          "# HELP mlxcel_prompt_cache_evictions_total Entries dropped for room (--cache-ram, --kv-memory) or superseded.\n"
                          "# TYPE mlxcel_prompt_cache_evictions_total counter\nmlxcel_prompt_cache_evictions_total %llu\n",
                          (unsigned long long)st.cache_entries, (unsigned long long)st.cache_tokens, (unsigned long long)st.cache_bytes,
                          (unsigned long long)st.cache_hit_tokens, (unsigned long long)st.cache_evictions);
        if (sv->o.kv_memory)
            mx_buf_printf(&b,
                          "# HELP mlxcel_kv_cache_budget_bytes --kv-memory.\n# TYPE mlxcel_kv_cache_budget_bytes gauge\nmlxcel_kv_cache_budget_bytes %zu\n"
                          "# HELP mlxcel_kv_cache_waits_total Requests that waited for room in --kv-memory.\n"
                          "# TYPE mlxcel_kv_cache_waits_total counter\nmlxcel_kv_cache_waits_total %llu\n"
                          "# HELP mlxcel_kv_cache_charged_bytes What --kv-memory charges the slots now (each one's upper bound, shared pages once).\n"
                          "# TYPE mlxcel_kv_cache_charged_bytes gauge\nmlxcel_kv_cache_charged_bytes %zu\n"
                          "# HELP mlxcel_kv_cache_preemptions_total Generating requests stopped for room and queued again (they read their tokens again).\n"
                          "# TYPE mlxcel_kv_cache_preemptions_total counter\nmlxcel_kv_cache_preemptions_total %llu\n",
                          sv->o.kv_memory, (unsigned long long)st.kv_waits, mx_sched_kv_charged(sv->sched), (unsigned long long)st.preemptions);
    }
    if (sv->sched && sv->tm.e.vision) {
        unsigned long enc, hits;
        mx_vision_counts(sv->tm.e.vision, &enc, &hits);
        mx_buf_printf(&b,
                      "# HELP mlxcel_images_encoded_total Images run through the vision tower.\n# TYPE mlxcel_images_encoded_total counter\n"
                      "mlxcel_images_encoded_total %lu\n"
                      "# HELP mlxcel_images_cached_total Images whose rows came from the cache (seen before).\n"
                      "# TYPE mlxcel_images_cached_total counter\nmlxcel_images_cached_total %lu\n",
                      enc, hits);
    }
    return mx_srv_text(rq, 200, "text/plain; version=0.0.4", &b);
}
