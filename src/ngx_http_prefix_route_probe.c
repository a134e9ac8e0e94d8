
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_event.h>
#include <ngx_event_connect.h>
#include <ngx_http.h>

#include "ngx_http_prefix_route.h"
#include "ngx_http_prefix_route_metrics.h"
#include "ngx_http_prefix_route_probe.h"


/*
 * bytes of the status line and headers at most: a longer status line is
 * not HTTP; longer headers after a 2xx status, a page not read
 */
#define NGX_HTTP_PREFIX_ROUTE_PROBE_HEADERS  16384

/*
 * ms between two warns that a server's page is not read: a page that is
 * read and not in turn (helper-72) is logged at debug meanwhile
 */
#define NGX_HTTP_PREFIX_ROUTE_PROBE_REWARN   300000

/*
 * Readings the moving average of others' requests follows: a queue seen
 * once has drained a time to first token later (~100 ms); what other
 * clients keep sending to a server shows over several readings.
 */
#define NGX_HTTP_PREFIX_ROUTE_PROBE_AVERAGE  4

/*
 * ms after a counter came back (a page of several engines) during which no
 * fall is taken for a restart
 */
#define NGX_HTTP_PREFIX_ROUTE_PROBE_MIXED_MS     600000

/*
 * intervals after a restart during which a counter that comes back to
 * where it was is such a page: replicas answer in turn or at random, so
 * within a few readings, and an engine restarted does not do its work
 * before again so fast unless it ran for less (a crash loop at 60 s must
 * not look like replicas)
 */
#define NGX_HTTP_PREFIX_ROUTE_PROBE_COMEBACK     4

/* what the engine's counter of work done says */
#define NGX_HTTP_PREFIX_ROUTE_PROBE_KEPT       0
#define NGX_HTTP_PREFIX_ROUTE_PROBE_RESTARTED  1
#define NGX_HTTP_PREFIX_ROUTE_PROBE_MIXED      2

/* the part of a header line kept, enough for the headers read */
#define NGX_HTTP_PREFIX_ROUTE_PROBE_LINE     64

/* bytes read from the socket at a time, into the prober's buffer */
#define NGX_HTTP_PREFIX_ROUTE_PROBE_BUF      4096


/* what a probe ended with */
typedef enum {
    NGX_HTTP_PREFIX_ROUTE_PROBE_FAILED = 0,  /* no 2xx answer */
    NGX_HTTP_PREFIX_ROUTE_PROBE_ANSWERED,    /* 2xx, the page not read */
    NGX_HTTP_PREFIX_ROUTE_PROBE_READ         /* 2xx, the gauges read */
} ngx_http_prefix_route_probe_e;


/* where a probe's response is */
enum {
    NGX_HTTP_PREFIX_ROUTE_PROBE_STATUS = 0,
    NGX_HTTP_PREFIX_ROUTE_PROBE_HEADER,
    NGX_HTTP_PREFIX_ROUTE_PROBE_BODY
};


typedef struct ngx_http_prefix_route_prober_s  ngx_http_prefix_route_prober_t;


/*
 * The probe of one server, with copies of its address: with "resolve"
 * the server may leave round robin's lists while it is probed.
 */
typedef struct {
    ngx_peer_connection_t               pc;
    ngx_http_prefix_route_prober_t     *prober;
    ngx_sockaddr_t                      sockaddr;
    socklen_t                           socklen;
    ngx_str_t                           name;     /* addr:port */
    u_char                              addr[NGX_SOCKADDR_STRLEN];
    ngx_uint_t                          down;     /* "down": not probed */
    ngx_uint_t                          gone;     /* left the lists */
    ngx_uint_t                          backup;   /* in the backup list */
    ngx_http_prefix_route_peer_t       *sp;       /* its record, or NULL */
    ngx_http_prefix_route_peer_t       *vsp;      /* shadow mode: that of
                                                     its would-be
                                                     placements, or NULL */
    uint32_t                            epoch;    /* sp's and vsp's when
                                                     set: moved on, the
                                                     record was given to
                                                     another address */
    uint32_t                            vepoch;
    ngx_log_t                           log;      /* names the probe */
    ngx_log_t                           quiet;    /* the same, alert and
                                                     above: the connection
                                                     of a server passed
                                                     over */
    ngx_str_t                           request;

    size_t                              sent;     /* bytes of request */
    off_t                               received; /* bytes of response */
    off_t                               length;   /* of its body, -1: to
                                                     the connection's end */
    off_t                               body;     /* bytes of it read */
    ngx_uint_t                          state;
    ngx_uint_t                          status;
    ngx_uint_t                          busy;     /* a probe under way */
    uint32_t                            round;    /* the zone's, when it
                                                     began */
    ngx_uint_t                          warned;   /* a page not read */
    ngx_msec_t                          warned_at; /* the last warn of it */
    ngx_uint_t                          ever;     /* warned since set */
    char                               *unread;   /* why, when it is not */
    u_char                              why[48];  /* a status in unread */

    size_t                              hlen;
    ngx_uint_t                          hlong;    /* hline is cut short */
    u_char                              hline[NGX_HTTP_PREFIX_ROUTE_PROBE_LINE];

    ngx_http_prefix_route_metrics_t     metrics;
} ngx_http_prefix_route_probe_slot_t;


struct ngx_http_prefix_route_prober_s {
    ngx_event_t                         timer;
    ngx_connection_t                    dummy;    /* names the timer in
                                                     debug logs */
    ngx_http_prefix_route_srv_conf_t   *prcf;
    ngx_uint_t                          n;
    ngx_uint_t                          room;     /* in slots[] */
    ngx_uint_t                          config;   /* of the view the slots
                                                     follow, "resolve" */
    ngx_http_prefix_route_probe_slot_t **slots;   /* never moved: a probe
                                                     under way holds one */
    u_char                             *buf;      /* a read's bytes */
};


static ngx_http_prefix_route_probe_slot_t *ngx_http_prefix_route_probe_slot(
    ngx_http_prefix_route_prober_t *pr, ngx_uint_t n);
static void ngx_http_prefix_route_probe_set(
    ngx_http_prefix_route_probe_slot_t *s, ngx_http_upstream_rr_peer_t *peer,
    ngx_uint_t backup, ngx_http_prefix_route_peer_t *sp,
    ngx_http_prefix_route_peer_t *vsp);
#if (NGX_HTTP_PREFIX_ROUTE_RESOLVE)
static ngx_int_t ngx_http_prefix_route_probe_follow(
    ngx_http_prefix_route_prober_t *pr);
#endif
static void ngx_http_prefix_route_probe_free(void *data);
static void ngx_http_prefix_route_probe_round(ngx_event_t *ev);
static void ngx_http_prefix_route_probe_start(
    ngx_http_prefix_route_probe_slot_t *s, uint32_t round);
static void ngx_http_prefix_route_probe_write(ngx_event_t *wev);
static void ngx_http_prefix_route_probe_read(ngx_event_t *rev);
static void ngx_http_prefix_route_probe_idle(ngx_event_t *ev);
static ngx_int_t ngx_http_prefix_route_probe_parse(
    ngx_http_prefix_route_probe_slot_t *s, u_char *p, size_t n);
static ngx_int_t ngx_http_prefix_route_probe_header(
    ngx_http_prefix_route_probe_slot_t *s);
static void ngx_http_prefix_route_probe_end(
    ngx_http_prefix_route_probe_slot_t *s);
static void ngx_http_prefix_route_probe_finish(
    ngx_http_prefix_route_probe_slot_t *s, ngx_http_prefix_route_probe_e rc,
    char *reason);
static ngx_uint_t ngx_http_prefix_route_probe_counter(
    ngx_http_prefix_route_probe_t *pb, double served, ngx_msec_t interval);
static ngx_uint_t ngx_http_prefix_route_probe_everywhere(
    ngx_http_prefix_route_prober_t *pr);
static u_char *ngx_http_prefix_route_probe_log(ngx_log_t *log, u_char *buf,
    size_t len);


ngx_int_t
ngx_http_prefix_route_probe_init(ngx_cycle_t *cycle,
    ngx_http_prefix_route_srv_conf_t *prcf)
{
    ngx_uint_t                           b, i, n;
    ngx_pool_cleanup_t                  *cln;
    ngx_http_upstream_rr_peer_t         *peer;
    ngx_http_upstream_rr_peers_t        *peers;
    ngx_http_prefix_route_prober_t      *pr;
    ngx_http_prefix_route_probe_slot_t  *s;

    n = 0;

    for (peers = prcf->peers; peers != NULL; peers = peers->next) {
        n += peers->number;
    }

    pr = ngx_pcalloc(cycle->pool, sizeof(ngx_http_prefix_route_prober_t));
    if (pr == NULL) {
        return NGX_ERROR;
    }

    pr->buf = ngx_palloc(cycle->pool, NGX_HTTP_PREFIX_ROUTE_PROBE_BUF);
    if (pr->buf == NULL) {
        return NGX_ERROR;
    }

    pr->prcf = prcf;

    /* "resolve": slots made and reused as the servers change, freed here */

    cln = ngx_pool_cleanup_add(cycle->pool, 0);
    if (cln == NULL) {
        return NGX_ERROR;
    }

    cln->handler = ngx_http_prefix_route_probe_free;
    cln->data = pr;

    for (b = 0, peers = prcf->peers; peers != NULL; b++, peers = peers->next)
    {
        for (peer = peers->peer, i = 0; peer != NULL; peer = peer->next, i++) {

            if (ngx_http_prefix_route_repeat(prcf, b, i)) {
                continue;
            }

            s = ngx_http_prefix_route_probe_slot(pr, n);
            if (s == NULL) {
                return NGX_ERROR;
            }

            ngx_http_prefix_route_probe_set(s, peer, b, prcf->shared[b][i],
                                   (b == 0 && prcf->shadow) ? prcf->vshared[i]
                                                            : NULL);
        }
    }

    pr->dummy.fd = (ngx_socket_t) -1;
    pr->dummy.data = pr;

    pr->timer.handler = ngx_http_prefix_route_probe_round;
    pr->timer.log = cycle->log;
    pr->timer.data = &pr->dummy;
    pr->timer.cancelable = 1;

    ngx_add_timer(&pr->timer, 1);

    return NGX_OK;
}


/*
 * A new slot at the end of the prober's, with room for a request to a
 * server of any name; the array of slots grows to at least "n".  Returns
 * NULL without memory.
 */

static ngx_http_prefix_route_probe_slot_t *
ngx_http_prefix_route_probe_slot(ngx_http_prefix_route_prober_t *pr,
    ngx_uint_t n)
{
    ngx_uint_t                            room;
    ngx_http_prefix_route_probe_slot_t   *s, **slots;

    if (pr->n == pr->room) {
        room = ngx_max(ngx_max(n, 2 * pr->room), 4);

        slots = ngx_alloc(room * sizeof(ngx_http_prefix_route_probe_slot_t *),
                          ngx_cycle->log);
        if (slots == NULL) {
            return NULL;
        }

        if (pr->n) {
            ngx_memcpy(slots, pr->slots,
                       pr->n * sizeof(ngx_http_prefix_route_probe_slot_t *));
        }

        ngx_free(pr->slots);

        pr->slots = slots;
        pr->room = room;
    }

    s = ngx_calloc(sizeof(ngx_http_prefix_route_probe_slot_t)
                   + sizeof("GET  HTTP/1.0" CRLF "Host: " CRLF
                            "Accept: text/plain" CRLF CRLF) - 1
                   + pr->prcf->probe.uri.len + NGX_SOCKADDR_STRLEN,
                   ngx_cycle->log);
    if (s == NULL) {
        return NULL;
    }

    s->prober = pr;
    s->request.data = (u_char *) (s + 1);

    s->log = *ngx_cycle->log;
    s->log.handler = ngx_http_prefix_route_probe_log;
    s->log.data = s;

    s->quiet = s->log;
    s->quiet.log_level = ngx_min(s->log.log_level, NGX_LOG_ALERT);

    pr->slots[pr->n++] = s;

    return s;
}


/*
 * Points slot "s" at the server "peer", whose record is "sp" and that of
 * its would-be placements "vsp" (NULL: none): copies of its address, name
 * and "down", and the request.  The caller holds the peers lock.
 */

static void
ngx_http_prefix_route_probe_set(ngx_http_prefix_route_probe_slot_t *s,
    ngx_http_upstream_rr_peer_t *peer, ngx_uint_t backup,
    ngx_http_prefix_route_peer_t *sp, ngx_http_prefix_route_peer_t *vsp)
{
    ngx_str_t                          host;
    ngx_http_prefix_route_srv_conf_t  *prcf;

    prcf = s->prober->prcf;

    if (s->name.len != peer->name.len
        || ngx_memcmp(s->addr, peer->name.data, peer->name.len) != 0)
    {
        s->warned = 0;
        s->ever = 0;
    }

    ngx_memcpy(&s->sockaddr, peer->sockaddr,
               ngx_min(peer->socklen, (socklen_t) sizeof(ngx_sockaddr_t)));
    s->socklen = peer->socklen;

    s->name.len = ngx_min(peer->name.len, NGX_SOCKADDR_STRLEN);
    s->name.data = s->addr;
    ngx_memcpy(s->addr, peer->name.data, s->name.len);

    s->down = peer->down;
    s->gone = 0;
    s->backup = backup;
    s->sp = sp;
    s->vsp = vsp;

    /* read without the mutex: a record the view holds is not reused */

    s->epoch = sp ? sp->epoch : 0;
    s->vepoch = vsp ? vsp->epoch : 0;

    /*
     * a unix socket's path is no host name, which a server may refuse
     * with a 400: "localhost", as nginx's proxy sends
     */

    host = s->name;

#if (NGX_HAVE_UNIX_DOMAIN)
    if (peer->sockaddr->sa_family == AF_UNIX) {
        ngx_str_set(&host, "localhost");
    }
#endif

    s->request.len = ngx_sprintf(s->request.data,
                                 "GET %V HTTP/1.0" CRLF "Host: %V" CRLF
                                 "Accept: text/plain" CRLF CRLF,
                                 &prcf->probe.uri, &host)
                     - s->request.data;
}


#if (NGX_HTTP_PREFIX_ROUTE_RESOLVE)

/*
 * "resolve": the slots follow round robin's lists as the worker's view
 * of them does (ngx_http_prefix_route_follow()), found again by the
 * server's name; the slot of a server gone is probed no more, and is
 * given to a new server once its probe under way ends.  Returns NGX_OK,
 * or NGX_ERROR without memory (the slots stay as they were).
 */

static ngx_int_t
ngx_http_prefix_route_probe_follow(ngx_http_prefix_route_prober_t *pr)
{
    ngx_int_t                            rc;
    ngx_uint_t                           b, i, k, n;
    ngx_http_upstream_rr_peer_t         *peer;
    ngx_http_upstream_rr_peers_t        *peers, *list;
    ngx_http_prefix_route_srv_conf_t    *prcf;
    ngx_http_prefix_route_probe_slot_t  *s;

    prcf = pr->prcf;
    peers = prcf->upstream->peer.data;
    rc = NGX_OK;

    ngx_http_prefix_route_lists_rlock(peers);

    if (ngx_http_prefix_route_follow(prcf, peers) != NGX_OK) {
        rc = NGX_ERROR;
        goto done;
    }

    if (pr->config == prcf->config) {
        goto done;
    }

    for (k = 0; k < pr->n; k++) {
        pr->slots[k]->gone = 1;
    }

    n = prcf->number[0] + prcf->number[1];

    for (b = 0, list = peers; list != NULL; b++, list = list->next) {
        for (peer = list->peer, i = 0; peer != NULL; peer = peer->next, i++) {

            if (ngx_http_prefix_route_repeat(prcf, b, i)) {
                continue;
            }

            /* its slot, else one of a server gone, idle, else a new one */

            s = NULL;

            for (k = 0; k < pr->n; k++) {
                if (pr->slots[k]->name.len == peer->name.len
                    && ngx_memcmp(pr->slots[k]->addr, peer->name.data,
                                  peer->name.len)
                       == 0)
                {
                    s = pr->slots[k];
                    break;
                }
            }

            for (k = 0; s == NULL && k < pr->n; k++) {
                if (pr->slots[k]->gone && !pr->slots[k]->busy) {
                    s = pr->slots[k];
                }
            }

            if (s == NULL) {
                s = ngx_http_prefix_route_probe_slot(pr, n);
                if (s == NULL) {
                    rc = NGX_ERROR;
                    goto done;
                }
            }

            ngx_http_prefix_route_probe_set(s, peer, b, prcf->shared[b][i],
                                   (b == 0 && prcf->shadow) ? prcf->vshared[i]
                                                            : NULL);
        }
    }

    pr->config = prcf->config;

done:

    ngx_http_prefix_route_lists_unlock(peers);

    ngx_http_prefix_route_let_go(prcf);

    return rc;
}

#endif


static void
ngx_http_prefix_route_probe_free(void *data)
{
    ngx_http_prefix_route_prober_t  *pr = data;

    ngx_uint_t  i;

    for (i = 0; i < pr->n; i++) {
        ngx_free(pr->slots[i]);
    }

    ngx_free(pr->slots);
}


ngx_uint_t
ngx_http_prefix_route_probe_fresh(ngx_http_prefix_route_srv_conf_t *prcf,
    ngx_http_prefix_route_probe_t *pb)
{
    return prcf->probe.interval
           && pb->has_reading
           && (ngx_msec_int_t) (ngx_current_msec - pb->read)
              <= (ngx_msec_int_t) (2 * prcf->probe.interval);
}


ngx_uint_t
ngx_http_prefix_route_probe_foreign(ngx_http_prefix_route_srv_conf_t *prcf,
    ngx_http_prefix_route_peer_t *sp, ngx_uint_t *waiting,
    ngx_uint_t *running)
{
    ngx_http_prefix_route_probe_t  *pb;

    pb = &sp->probe;

    *waiting = 0;
    *running = 0;

    if (!prcf->probe.load || !ngx_http_prefix_route_probe_fresh(prcf, pb)) {
        return 0;
    }

    *waiting = (ngx_uint_t) (pb->others_waiting + 0.5);
    *running = (ngx_uint_t) (pb->others_running + 0.5);

    return 1;
}


/*
 * The prober's timer, every quarter interval in each worker: the first
 * worker to find the round due in the zone takes it, numbered in the zone
 * so that a probe that ends after a later round's is known to be older.
 */

static void
ngx_http_prefix_route_probe_round(ngx_event_t *ev)
{
    uint32_t                             round;
    ngx_uint_t                           i, due;
    ngx_msec_t                           now;
    ngx_connection_t                    *c;
    ngx_http_prefix_route_sh_t          *sh;
    ngx_http_prefix_route_prober_t      *pr;
    ngx_http_prefix_route_srv_conf_t    *prcf;
    ngx_http_prefix_route_probe_slot_t  *s;

    if (ngx_exiting || ngx_quit || ngx_terminate) {
        return;
    }

    c = ev->data;
    pr = c->data;
    prcf = pr->prcf;
    sh = prcf->index.sh;
    now = ngx_current_msec;
    round = 0;

    ngx_shmtx_lock(&prcf->index.shpool->mutex);

    /*
     * a due time further away than the interval was set by another
     * configuration of the zone, before a reload
     */

    due = (ngx_msec_int_t) (now - sh->probe_due) >= 0
          || (ngx_msec_int_t) (sh->probe_due - now)
             > (ngx_msec_int_t) prcf->probe.interval;

    if (due) {
        sh->probe_due = now + prcf->probe.interval;
        round = ++sh->probe_round;
    }

    ngx_shmtx_unlock(&prcf->index.shpool->mutex);

    if (due) {

#if (NGX_HTTP_PREFIX_ROUTE_RESOLVE)
        /* without memory for new servers, those known are probed */

        if (prcf->resolve) {
            (void) ngx_http_prefix_route_probe_follow(pr);
        }
#endif

        for (i = 0; i < pr->n; i++) {
            s = pr->slots[i];

            /* a "down" server takes no requests: its page tells nothing */

            if (!s->busy && !s->down && !s->gone) {
                ngx_http_prefix_route_probe_start(s, round);
            }
        }
    }

    ngx_add_timer(ev, ngx_max(prcf->probe.interval / 4, 1));
}


static void
ngx_http_prefix_route_probe_start(ngx_http_prefix_route_probe_slot_t *s,
    uint32_t round)
{
    ngx_int_t          rc;
    ngx_connection_t  *c;

    ngx_memzero(&s->pc, sizeof(ngx_peer_connection_t));

    s->pc.sockaddr = &s->sockaddr.sockaddr;
    s->pc.socklen = s->socklen;
    s->pc.name = &s->name;
    s->pc.get = ngx_event_get_peer;
    s->pc.log_error = NGX_ERROR_INFO;

    /*
     * a server passed over has had its failures said (the warn): nginx's
     * own line for each probe's refused or failed connect() is not said
     * again every interval until one is answered (the notice)
     */

    s->pc.log = (s->sp != NULL && s->sp->probe.down) ? &s->quiet : &s->log;

    s->round = round;
    s->sent = 0;
    s->received = 0;
    s->length = -1;
    s->body = 0;
    s->state = NGX_HTTP_PREFIX_ROUTE_PROBE_STATUS;
    s->status = 0;
    s->unread = NULL;
    s->hlen = 0;
    s->hlong = 0;
    ngx_http_prefix_route_metrics_init(&s->metrics);

    rc = ngx_event_connect_peer(&s->pc);

    if (rc == NGX_ERROR || rc == NGX_BUSY || rc == NGX_DECLINED) {
        ngx_http_prefix_route_probe_finish(s,
                                           NGX_HTTP_PREFIX_ROUTE_PROBE_FAILED,
                                           "no connection");
        return;
    }

    s->busy = 1;

    c = s->pc.connection;
    c->data = s;
    c->read->handler = ngx_http_prefix_route_probe_read;
    c->write->handler = ngx_http_prefix_route_probe_write;

    /* a worker told to stop closes it (c->close) instead of waiting */
    c->idle = 1;

    /* one deadline for the whole probe: connect, send, read */
    ngx_add_timer(c->read, s->prober->prcf->probe.timeout);

    if (rc == NGX_OK) {
        ngx_http_prefix_route_probe_write(c->write);
    }
}


static void
ngx_http_prefix_route_probe_write(ngx_event_t *wev)
{
    int                                  err;
    ssize_t                              n;
    socklen_t                            len;
    ngx_connection_t                    *c;
    ngx_http_prefix_route_probe_slot_t  *s;

    c = wev->data;
    s = c->data;

    if (s->sent == 0) {
        err = 0;
        len = sizeof(int);

        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, (void *) &err, &len)
            == -1)
        {
            err = ngx_socket_errno;
        }

        if (err) {
            (void) ngx_connection_error(c, err, "connect() failed");
            ngx_http_prefix_route_probe_finish(s,
                                           NGX_HTTP_PREFIX_ROUTE_PROBE_FAILED,
                                           "no connection");
            return;
        }
    }

    while (s->sent < s->request.len) {

        n = c->send(c, s->request.data + s->sent, s->request.len - s->sent);

        if (n == NGX_AGAIN) {
            if (ngx_handle_write_event(wev, 0) != NGX_OK) {
                break;
            }

            return;
        }

        if (n <= 0) {
            break;
        }

        s->sent += n;
    }

    if (s->sent < s->request.len) {
        ngx_http_prefix_route_probe_finish(s,
                                           NGX_HTTP_PREFIX_ROUTE_PROBE_FAILED,
                                           "the request could not be sent");
        return;
    }

    wev->handler = ngx_http_prefix_route_probe_idle;

    if (c->read->ready) {
        ngx_http_prefix_route_probe_read(c->read);
    }
}


static void
ngx_http_prefix_route_probe_read(ngx_event_t *rev)
{
    ssize_t                              n;
    ngx_int_t                            rc;
    ngx_connection_t                    *c;
    ngx_http_prefix_route_probe_slot_t  *s;

    c = rev->data;
    s = c->data;

    if (c->close) {
        /* the worker is exiting: the probe is dropped, not failed */
        ngx_close_connection(c);
        s->pc.connection = NULL;
        s->busy = 0;
        return;
    }

    if (rev->timedout) {
        ngx_http_prefix_route_probe_finish(s,
                                           NGX_HTTP_PREFIX_ROUTE_PROBE_FAILED,
                                           s->state
                                           == NGX_HTTP_PREFIX_ROUTE_PROBE_STATUS
                                           ? "timed out"
                                           : "the page timed out");
        return;
    }

    if (s->sent < s->request.len) {
        /* an error of the connect() under way comes as a read event too */
        ngx_http_prefix_route_probe_write(c->write);
        return;
    }

    for ( ;; ) {
        n = c->recv(c, s->prober->buf, NGX_HTTP_PREFIX_ROUTE_PROBE_BUF);

        if (n == NGX_AGAIN) {
            if (ngx_handle_read_event(rev, 0) != NGX_OK) {
                ngx_http_prefix_route_probe_finish(s,
                                           NGX_HTTP_PREFIX_ROUTE_PROBE_FAILED,
                                           "no read event");
            }

            return;
        }

        if (n == NGX_ERROR) {
            ngx_http_prefix_route_probe_finish(s,
                                           NGX_HTTP_PREFIX_ROUTE_PROBE_FAILED,
                                           "connection error");
            return;
        }

        if (n == 0) {
            ngx_http_prefix_route_probe_end(s);
            return;
        }

        rc = ngx_http_prefix_route_probe_parse(s, s->prober->buf, n);

        if (rc == NGX_ERROR) {
            ngx_http_prefix_route_probe_finish(s,
                                           NGX_HTTP_PREFIX_ROUTE_PROBE_FAILED,
                                           s->unread);
            return;
        }

        if (rc == NGX_OK) {
            ngx_http_prefix_route_probe_end(s);
            return;
        }
    }
}


static void
ngx_http_prefix_route_probe_idle(ngx_event_t *ev)
{
    return;
}


/*
 * Reads n bytes of the response.  Returns NGX_AGAIN for more, NGX_OK when
 * nothing more is to be read (the body's length is reached, or max_size:
 * s->unread says so), or NGX_ERROR with the reason in s->unread.
 */

static ngx_int_t
ngx_http_prefix_route_probe_parse(ngx_http_prefix_route_probe_slot_t *s,
    u_char *p, size_t n)
{
    u_char  *last;
    size_t   size;

    last = p + n;

    if (s->received + (off_t) n > (off_t) s->prober->prcf->probe.max_size) {
        last = p + (s->prober->prcf->probe.max_size - s->received);
        s->unread = "the page is longer than max_size";
    }

    s->received += last - p;

    while (p < last && s->state != NGX_HTTP_PREFIX_ROUTE_PROBE_BODY) {

        if (*p != '\n') {
            if (s->hlen < NGX_HTTP_PREFIX_ROUTE_PROBE_LINE) {
                s->hline[s->hlen++] = *p;

            } else {
                s->hlong = 1;
            }

            p++;

            if (s->received - (last - p) > NGX_HTTP_PREFIX_ROUTE_PROBE_HEADERS)
            {
                if (s->state == NGX_HTTP_PREFIX_ROUTE_PROBE_STATUS) {
                    s->unread = "not an HTTP response";
                    return NGX_ERROR;
                }

                if (s->unread == NULL) {
                    s->unread = "its headers are longer than 16 KiB";
                }

                return NGX_OK;
            }

            continue;
        }

        p++;

        if (s->hlen && s->hline[s->hlen - 1] == '\r' && !s->hlong) {
            s->hlen--;
        }

        if (ngx_http_prefix_route_probe_header(s) != NGX_OK) {
            return NGX_ERROR;
        }

        s->hlen = 0;
        s->hlong = 0;
    }

    if (s->state != NGX_HTTP_PREFIX_ROUTE_PROBE_BODY) {
        return s->unread ? NGX_OK : NGX_AGAIN;
    }

    if (p < last) {
        size = last - p;

        if (s->length >= 0) {
            size = (size_t) ngx_min((off_t) size, s->length - s->body);
        }

        ngx_http_prefix_route_metrics_feed(&s->metrics, p, size);
        s->body += size;
    }

    /* "Content-Length: 0" ends with the headers */

    if (s->length >= 0 && s->body >= s->length) {
        return NGX_OK;
    }

    return s->unread ? NGX_OK : NGX_AGAIN;
}


/*
 * The line in s->hline: the status line, a header, or the empty line
 * before the body.  Returns NGX_OK, or NGX_ERROR with the reason in
 * s->unread.
 */

static ngx_int_t
ngx_http_prefix_route_probe_header(ngx_http_prefix_route_probe_slot_t *s)
{
    char       *unread;
    u_char     *p, *last;
    ngx_int_t   n;

    static u_char  length[] = "content-length:";
    static u_char  encoding[] = "transfer-encoding:";

    p = s->hline;

    if (s->state == NGX_HTTP_PREFIX_ROUTE_PROBE_STATUS) {

        /* "HTTP/1.x NNN ..." */

        if (s->hlen < 12
            || ngx_strncmp(p, "HTTP/1.", 7) != 0
            || p[8] != ' '
            || (n = ngx_atoi(p + 9, 3)) == NGX_ERROR
            || (s->hlen > 12 && p[12] != ' '))
        {
            s->unread = "not an HTTP response";
            return NGX_ERROR;
        }

        s->status = n;

        if (n < 200 || n > 299) {
            (void) ngx_sprintf(s->why, "answered with status %03i, not 2xx%Z",
                               n);
            s->unread = (char *) s->why;
            return NGX_ERROR;
        }

        s->state = NGX_HTTP_PREFIX_ROUTE_PROBE_HEADER;
        return NGX_OK;
    }

    if (s->hlen == 0) {
        s->state = NGX_HTTP_PREFIX_ROUTE_PROBE_BODY;
        return NGX_OK;
    }

    last = p + s->hlen;
    unread = NULL;

    if (s->hlen >= sizeof(length) - 1
        && ngx_strncasecmp(p, length, sizeof(length) - 1) == 0)
    {
        /* optional white space around the value (RFC 9112) */

        for (p += sizeof(length) - 1; p < last && (*p == ' ' || *p == '\t');
             p++)
        {
            /* void */
        }

        while (last > p && (last[-1] == ' ' || last[-1] == '\t')) {
            last--;
        }

        if (s->hlong) {
            unread = "its Content-Length line is too long";

        } else if ((s->length = ngx_atoof(p, last - p)) == NGX_ERROR) {
            unread = "its Content-Length is not a number";
        }

    } else if (s->hlen >= sizeof(encoding) - 1
               && ngx_strncasecmp(p, encoding, sizeof(encoding) - 1) == 0)
    {
        /* not asked for by HTTP/1.0; the server is up all the same */

        if (s->hlong) {
            unread = "its Transfer-Encoding line is too long";

        } else if (ngx_strlcasestrn(p, last, (u_char *) "chunked", 7 - 1)
                   != NULL)
        {
            unread = "the page is chunked";
        }
    }

    if (s->unread == NULL) {
        s->unread = unread;
    }

    return NGX_OK;
}


/* the server closed the connection, or no more of it is to be read */

static void
ngx_http_prefix_route_probe_end(ngx_http_prefix_route_probe_slot_t *s)
{
    if (s->state != NGX_HTTP_PREFIX_ROUTE_PROBE_BODY) {
        ngx_http_prefix_route_probe_finish(s,
                                           NGX_HTTP_PREFIX_ROUTE_PROBE_FAILED,
                                           s->unread ? s->unread
                                           : "closed before the answer "
                                             "ended");
        return;
    }

    if (s->unread == NULL && s->length >= 0 && s->body < s->length) {
        s->unread = "the page is cut short";
    }

    if (s->unread == NULL
        && ngx_http_prefix_route_metrics_done(&s->metrics) != NGX_OK)
    {
        s->unread = "the page has no queue and running gauges of a known "
                    "engine";
    }

    ngx_http_prefix_route_probe_finish(s,
                                       s->unread
                                       ? NGX_HTTP_PREFIX_ROUTE_PROBE_ANSWERED
                                       : NGX_HTTP_PREFIX_ROUTE_PROBE_READ,
                                       s->unread);
}


/*
 * Closes the probe's connection and keeps what it found in the server's
 * record; logs a server passed over or back (warn, notice), a restart
 * (notice), a page that cannot be read (warn, once until one is read, at
 * most every 5 minutes: debug between) and each failure (info).
 */

static void
ngx_http_prefix_route_probe_finish(ngx_http_prefix_route_probe_slot_t *s,
    ngx_http_prefix_route_probe_e rc, char *reason)
{
    double                              served;
    ngx_uint_t                          down, up, restarted, dropped, mixed;
    ngx_uint_t                          all, own, waiting, level;
    ngx_http_prefix_route_probe_t      *pb;
    ngx_http_prefix_route_peer_t       *sp;
    ngx_http_prefix_route_index_t      *idx;
    ngx_http_prefix_route_metrics_t    *m;
    ngx_http_prefix_route_srv_conf_t   *prcf;

    if (s->pc.connection) {
        ngx_close_connection(s->pc.connection);
        s->pc.connection = NULL;
    }

    /*
     * after a 2xx status line the server is up, whatever cut its page
     * short (a timeout, a close, max_size, 16 KiB of headers): helper-72
     */

    if (rc == NGX_HTTP_PREFIX_ROUTE_PROBE_FAILED
        && s->state != NGX_HTTP_PREFIX_ROUTE_PROBE_STATUS)
    {
        rc = NGX_HTTP_PREFIX_ROUTE_PROBE_ANSWERED;
    }

    s->busy = 0;

    prcf = s->prober->prcf;
    idx = &prcf->index;
    sp = s->sp;
    m = &s->metrics;

    if (sp == NULL) {
        /* the zone had no room for the server: nothing to keep */
        return;
    }

    pb = &sp->probe;
    down = 0;
    up = 0;
    restarted = 0;
    mixed = 0;
    dropped = 0;
    served = 0;

    ngx_shmtx_lock(&idx->shpool->mutex);

    /*
     * another worker's probe of a later round ended first (the timeout may
     * be longer than the interval): this one's figures are older than
     * those kept, and a counter read before theirs is no restart (0: none
     * kept yet)
     */

    if (pb->round && (int32_t) (s->round - pb->round) < 0) {
        ngx_shmtx_unlock(&idx->shpool->mutex);

        ngx_log_debug1(NGX_LOG_DEBUG_HTTP, &s->log, 0,
                       "prefix_route: probe of round %uD ended after a "
                       "later one: not kept", s->round);
        return;
    }

    /* "resolve": the server left the lists and its record is another's */

    if (sp->epoch != s->epoch) {
        ngx_shmtx_unlock(&idx->shpool->mutex);
        return;
    }

    pb->round = s->round;
    pb->probes++;

    if (rc == NGX_HTTP_PREFIX_ROUTE_PROBE_FAILED) {
        pb->failures++;
        pb->fails++;

        if (pb->fails >= prcf->probe.fails && !pb->down) {
            pb->down = 1;
            down = 1 + ngx_http_prefix_route_probe_everywhere(s->prober);
        }

    } else {
        up = pb->down;
        pb->down = 0;
        pb->fails = 0;
    }

    if (rc == NGX_HTTP_PREFIX_ROUTE_PROBE_READ) {

        if (m->has_served) {
            switch (ngx_http_prefix_route_probe_counter(pb, m->served,
                                                        prcf->probe.interval))
            {

            case NGX_HTTP_PREFIX_ROUTE_PROBE_RESTARTED:
                /*
                 * the engine restarted with an empty cache: every block
                 * recorded goes, whatever its stamp, and what prefix_route
                 * would hold there had it routed
                 */
                dropped = ngx_http_prefix_route_index_wipe(idx, sp);

                if (s->vsp != NULL && s->vsp->epoch == s->vepoch) {
                    (void) ngx_http_prefix_route_index_wipe(idx, s->vsp);
                }

                pb->restarts++;
                restarted = 1;
                served = pb->served;
                break;

            case NGX_HTTP_PREFIX_ROUTE_PROBE_MIXED:
                mixed = 1;
                served = pb->high;
                break;

            default:
                break;
            }

            if (!pb->fallen) {
                pb->served = m->served;
            }

            pb->has_served = 1;
        }

        /*
         * the engine's requests beyond the zone's in flight there are
         * other clients'; the zone's not answering yet are queued or in
         * prefill, which the engine counts as running: the waiting beyond
         * them are surely others' queued
         */

        all = (ngx_uint_t) m->waiting + (ngx_uint_t) m->running;
        own = ngx_min(sp->load.inflight, all);
        waiting = (ngx_uint_t) m->waiting > sp->load.waiting
                  ? (ngx_uint_t) m->waiting - sp->load.waiting : 0;
        waiting = ngx_min(waiting, all - own);

        if (!pb->has_reading) {
            pb->others_waiting = waiting;
            pb->others_running = all - own - waiting;

        } else {
            pb->others_waiting += (waiting - pb->others_waiting)
                                  / NGX_HTTP_PREFIX_ROUTE_PROBE_AVERAGE;
            pb->others_running += (all - own - waiting - pb->others_running)
                                  / NGX_HTTP_PREFIX_ROUTE_PROBE_AVERAGE;
        }

        pb->waiting = (ngx_uint_t) m->waiting;
        pb->running = (ngx_uint_t) m->running;
        pb->kv = (ngx_uint_t) (m->kv * 1000 + 0.5);
        pb->has_kv = m->has_kv;
        pb->read = ngx_current_msec;
        pb->has_reading = 1;
    }

    ngx_shmtx_unlock(&idx->shpool->mutex);

    if (restarted) {
        ngx_http_prefix_route_mend_soon(idx);
    }

    if (rc == NGX_HTTP_PREFIX_ROUTE_PROBE_FAILED) {
        ngx_log_error(NGX_LOG_INFO, &s->log, 0,
                      "prefix_route: probe failed: %s", reason);
    }

    if (down == 1) {
        ngx_log_error(NGX_LOG_WARN, &s->log, 0,
                      "prefix_route: %ui probes failed in a row (%s), the "
                      "server is passed over until one is answered",
                      prcf->probe.fails, reason);
    }

    if (down == 2) {
        ngx_log_error(NGX_LOG_WARN, &s->log, 0,
                      "prefix_route: %ui probes failed in a row (%s), as "
                      "on every primary server probed: none is passed "
                      "over (a wrong \"uri\" or a firewall is likelier "
                      "than a dead fleet)", prcf->probe.fails, reason);
    }

    if (up) {
        ngx_log_error(NGX_LOG_NOTICE, &s->log, 0,
                      "prefix_route: the probe is answered again, the "
                      "server is balanced again");
    }

    if (restarted) {
        ngx_log_error(NGX_LOG_NOTICE, &s->log, 0,
                      "prefix_route: the engine restarted (its counter "
                      "fell from %uL to %uL), the index forgets its %ui "
                      "blocks", (uint64_t) served, (uint64_t) m->served,
                      dropped);
    }

    if (mixed) {
        ngx_log_error(NGX_LOG_WARN, &s->log, 0,
                      "prefix_route: the engine's counter came back to "
                      "%uL after it fell from %uL, taken for a restart: "
                      "the page answers for more than one engine "
                      "(replicas behind one address?); no fall is taken "
                      "for a restart until %ui minutes after it last came "
                      "back",
                      (uint64_t) m->served, (uint64_t) served,
                      (ngx_uint_t) (NGX_HTTP_PREFIX_ROUTE_PROBE_MIXED_MS
                                    / 60000));
    }

    if (rc == NGX_HTTP_PREFIX_ROUTE_PROBE_ANSWERED && !s->warned) {
        s->warned = 1;

        level = NGX_LOG_WARN;

        if (s->ever
            && (ngx_msec_int_t) (ngx_current_msec - s->warned_at)
               < NGX_HTTP_PREFIX_ROUTE_PROBE_REWARN)
        {
            level = NGX_LOG_DEBUG;

        } else {
            s->ever = 1;
            s->warned_at = ngx_current_msec;
        }

        ngx_log_error(level, &s->log, 0,
                      "prefix_route: the metrics page is not read: %s; the "
                      "server is balanced by the zone's own load figures",
                      reason);
    }

    if (rc == NGX_HTTP_PREFIX_ROUTE_PROBE_READ) {
        s->warned = 0;
    }
}


/*
 * Reads the engine's counter of work done ("served"), under the zone
 * mutex.  A reading below half the last one kept is a restart (RESTARTED:
 * the caller drops the server's blocks and keeps the new counter), but
 * for an address that answers for several engines (replicas behind a
 * service), whose pages give each one's counter in turn: a counter that
 * comes back to where it was before a restart, within COMEBACK intervals
 * of it, is such a page (MIXED), and for MIXED_MS after it comes back again no
 * fall is a restart (KEPT, pb->fallen: the caller keeps the last
 * reference).  helper-73 saw such a server's blocks dropped every few
 * seconds; now once each MIXED_MS.  A page a little lower than the last
 * (two scrapes the engine served out of order) is no restart either.
 * Stamps are 32-bit ms, compared unsigned: a window ends after MIXED_MS
 * and stays ended.
 */

static ngx_uint_t
ngx_http_prefix_route_probe_counter(ngx_http_prefix_route_probe_t *pb,
    double served, ngx_msec_t interval)
{
    uint32_t  now;

    now = (uint32_t) ngx_current_msec;

    if (pb->has_mixed
        && (uint32_t) (now - pb->mixed) >= NGX_HTTP_PREFIX_ROUTE_PROBE_MIXED_MS)
    {
        pb->has_mixed = 0;
    }

    if (pb->has_high
        && (uint32_t) (now - pb->restarted)
           > NGX_HTTP_PREFIX_ROUTE_PROBE_COMEBACK * interval)
    {
        pb->has_high = 0;
    }

    if (!pb->has_served) {
        return NGX_HTTP_PREFIX_ROUTE_PROBE_KEPT;
    }

    if (served < pb->served / 2) {

        if (pb->has_mixed) {
            pb->fallen = 1;
            return NGX_HTTP_PREFIX_ROUTE_PROBE_KEPT;
        }

        pb->high = pb->served;
        pb->has_high = 1;
        pb->restarted = now;

        return NGX_HTTP_PREFIX_ROUTE_PROBE_RESTARTED;
    }

    if (pb->has_high && served >= pb->high) {
        pb->has_high = 0;
        pb->has_mixed = 1;
        pb->mixed = now;
        pb->fallen = 0;

        return NGX_HTTP_PREFIX_ROUTE_PROBE_MIXED;
    }

    /*
     * back after a fall passed over: the window goes on; a counter that
     * only grows (one engine again) lets it end
     */

    if (pb->fallen && served >= pb->served) {
        pb->mixed = now;
    }

    pb->fallen = 0;

    return NGX_HTTP_PREFIX_ROUTE_PROBE_KEPT;
}


/*
 * Whether every primary server probed (not "down", in the lists) has its
 * probes failing, the one just marked among them: the balancer then
 * passes none of them over (ngx_http_prefix_route_passed(), which also
 * counts servers erring or failing by round robin: the status's fail_open
 * says it exactly).  Returns 1 or 0; the caller holds the zone mutex.
 */

static ngx_uint_t
ngx_http_prefix_route_probe_everywhere(ngx_http_prefix_route_prober_t *pr)
{
    ngx_uint_t                           i;
    ngx_http_prefix_route_probe_slot_t  *s;

    for (i = 0; i < pr->n; i++) {
        s = pr->slots[i];

        if (!s->down && !s->gone && !s->backup && s->sp != NULL
            && !s->sp->probe.down)
        {
            return 0;
        }
    }

    return 1;
}


static u_char *
ngx_http_prefix_route_probe_log(ngx_log_t *log, u_char *buf, size_t len)
{
    ngx_http_prefix_route_probe_slot_t  *s = log->data;

    return ngx_snprintf(buf, len, " while probing server %V at \"%V\"",
                        &s->name, &s->prober->prcf->probe.uri);
}
