/* Internal to the transport (transport.c, reply.c): a request's record,
 * the transport's state, and how a reply reaches the I/O thread. */
#ifndef MX_SERVER_TRANSPORT_INT_H
#define MX_SERVER_TRANSPORT_INT_H
#include "server_int.h"
#include <microhttpd.h>
#include <pthread.h>

#define IO_THREADS 4
#define WORKERS 4

/* A connection, for the header and body deadlines. */
typedef enum { C_HEADERS, C_BODY, C_BUSY, C_CUT } conn_phase;
typedef struct conn {
    int fd;
    conn_phase phase;
    double since;
    struct conn *prev, *next;
} conn;

struct mx_srv_req {
    server *sv;
    mx_srv_transport *t;
    struct MHD_Connection *c;
    conn *cn;
    const mx_http_route *rt;
    mx_buf body;
    char *ctype;                   /* Content-Type of a POST */
    char method[8], path[160];     /* for the log line and prefix routes (printable; a longer path is cut) */
    double t_start;
    unsigned sent_code;            /* the status that went out; 0: none */
    int log_prompt, log_completion; /* tokens, for the log line (mx_srv_note_tokens) */
    bool too_big, started, counted;
    /* the reply, from any thread; queued by the I/O thread */
    struct MHD_Response *resp;
    unsigned code;
    bool (*poll)(void *, mx_srv_req *);
    void (*done)(void *);
    void *arg;
    /* under t->mu */
    bool suspended, wake_pending, dead;
    bool at_worker;                /* queued or running on a worker */
    int refs;
    mx_srv_req *next;              /* worker queue */
    mx_srv_req *lprev, *lnext;     /* live requests */
};

typedef struct bucket {
    uint8_t addr[16];
    double tokens, last;
    struct bucket *next;
} bucket;
#define N_BUCKETS 4096

struct mx_srv_transport {
    server *sv;
    struct MHD_Daemon *d;
    pthread_mutex_t mu;            /* conns, live, wake state, buckets */
    conn *conns;
    mx_srv_req *live;
    int inflight;
    bucket *buckets[N_BUCKETS];
    pthread_mutex_t wq_mu;         /* the worker queue */
    pthread_cond_t wq_cv;
    mx_srv_req *wq_head, *wq_tail;
    pthread_t workers[WORKERS], sweeper;
    int n_workers;
    bool sweeper_on;
    atomic_bool quit;           /* stopping: workers leave, callbacks stop suspending */
    pthread_cond_t quit_cv;
};

/* Adds Retry-After (and Connection: close) to the reply rc made. */
int mx_srv_retry_after(mx_srv_req *rq, int rc, unsigned seconds, bool close);
/* From an MHD callback: suspends rq's connection unless a wake-up came
 * first (then the caller looks again). */
bool mx_srv_suspend(mx_srv_req *rq);
#endif
