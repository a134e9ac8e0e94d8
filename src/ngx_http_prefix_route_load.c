
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#include <ngx_config.h>
#include <ngx_core.h>

#include "ngx_http_prefix_route_load.h"


static ngx_uint_t ngx_http_prefix_route_load_slot(
    ngx_http_prefix_route_index_t *idx);
static ngx_uint_t ngx_http_prefix_route_load_orphans(
    ngx_http_prefix_route_index_t *idx, ngx_uint_t slot);
static void ngx_http_prefix_route_load_add(ngx_http_prefix_route_cell_t *c,
    uint64_t work, uint64_t bytes);
static void ngx_http_prefix_route_load_sub(ngx_http_prefix_route_cell_t *c,
    uint64_t work, uint64_t bytes, ngx_uint_t waiting, ngx_uint_t inflight);


/* this process, told apart from earlier ones of the same pid */
static uint64_t  ngx_http_prefix_route_nonce;


ngx_uint_t
ngx_http_prefix_route_load_charge(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_peer_t *peer, uint64_t work, uint64_t bytes)
{
    ngx_uint_t  cell;

    cell = ngx_http_prefix_route_load_slot(idx);

    ngx_http_prefix_route_load_add(&peer->cells[cell], work, bytes);
    ngx_http_prefix_route_kill_point();
    ngx_http_prefix_route_load_add(&peer->load, work, bytes);

    return cell;
}


void
ngx_http_prefix_route_load_start(ngx_http_prefix_route_peer_t *peer,
    ngx_uint_t cell, uint64_t work)
{
    ngx_http_prefix_route_cell_t  *c;

    c = &peer->cells[cell];

    if (c->waiting == 0) {
        /* given back already, as a dead worker's */
        return;
    }

    ngx_http_prefix_route_load_sub(c, work, 0, 1, 0);
    ngx_http_prefix_route_kill_point();
    ngx_http_prefix_route_load_sub(&peer->load, work, 0, 1, 0);
}


void
ngx_http_prefix_route_load_discharge(ngx_http_prefix_route_peer_t *peer,
    ngx_uint_t cell, uint64_t work, uint64_t bytes, ngx_uint_t started)
{
    ngx_http_prefix_route_cell_t  *c;

    c = &peer->cells[cell];

    if (c->inflight == 0) {
        return;
    }

    if (started) {
        work = 0;
    }

    ngx_http_prefix_route_load_sub(c, work, bytes, !started, 1);
    ngx_http_prefix_route_kill_point();
    ngx_http_prefix_route_load_sub(&peer->load, work, bytes, !started, 1);
}


void
ngx_http_prefix_route_load_sweep(ngx_http_prefix_route_index_t *idx)
{
    ngx_pid_t                    pid;
    ngx_uint_t                   s, n;
    ngx_http_prefix_route_sh_t  *sh;

    sh = idx->sh;

    for (s = 0; s < sh->nworkers; s++) {

        /* read without the mutex: checked again under it */
        pid = sh->workers[s].pid;

        if (pid == 0
            || pid == ngx_pid
            || kill(pid, 0) == 0
            || ngx_errno != NGX_ESRCH)
        {
            continue;
        }

        ngx_shmtx_lock(&idx->shpool->mutex);

        n = 0;

        if (sh->workers[s].pid == pid) {
            n = ngx_http_prefix_route_load_orphans(idx, s);
            sh->workers[s].pid = 0;
        }

        ngx_shmtx_unlock(&idx->shpool->mutex);

        if (n) {
            ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                          "prefix_route: worker process %P exited with "
                          "requests in flight (%ui), their queued work is "
                          "given back", pid, n);
        }
    }
}


void
ngx_http_prefix_route_load_release(ngx_http_prefix_route_index_t *idx)
{
    ngx_http_prefix_route_sh_t  *sh;

    sh = idx->sh;

    if (idx->slot < 0) {
        return;
    }

    ngx_shmtx_lock(&idx->shpool->mutex);

    if (sh->workers[idx->slot].pid == ngx_pid
        && sh->workers[idx->slot].nonce == ngx_http_prefix_route_nonce)
    {
        (void) ngx_http_prefix_route_load_orphans(idx, idx->slot);
        sh->workers[idx->slot].pid = 0;
    }

    ngx_shmtx_unlock(&idx->shpool->mutex);

    idx->slot = -1;
}


/*
 * The cell of this worker process: its slot, claimed on its first request
 * in this zone, or the shared cell when all slots are taken.  The caller
 * holds the zone mutex.
 */

static ngx_uint_t
ngx_http_prefix_route_load_slot(ngx_http_prefix_route_index_t *idx)
{
    ngx_uint_t                       s, n, free;
    ngx_http_prefix_route_sh_t      *sh;
    ngx_http_prefix_route_worker_t  *w;

    sh = idx->sh;

    if (idx->slot >= 0) {
        w = &sh->workers[idx->slot];

        if (w->pid == ngx_pid && w->nonce == ngx_http_prefix_route_nonce) {
            return idx->slot;
        }
    }

    /*
     * Set once in each process, kept across reloads: a slot of this pid
     * with another nonce is a dead process's whose pid came back.  A
     * process without a master keeps its slot across a reload, with the
     * requests of the old cycle still in it.
     */

    if (ngx_http_prefix_route_nonce == 0) {
        ngx_http_prefix_route_nonce = ((uint64_t) ngx_time() << 32
                                       ^ (uint64_t) ngx_random()) | 1;
    }

    free = sh->nworkers;

    for (s = 0; s < sh->nworkers; s++) {
        w = &sh->workers[s];

        if (w->pid == ngx_pid) {

            if (w->nonce != ngx_http_prefix_route_nonce) {
                n = ngx_http_prefix_route_load_orphans(idx, s);

                if (n) {
                    ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                                  "prefix_route: worker process %P exited "
                                  "with requests in flight (%ui), their "
                                  "queued work is given back", w->pid, n);
                }
            }

            free = s;
            break;
        }

        if (w->pid == 0 && free == sh->nworkers) {
            free = s;
        }
    }

    if (free == sh->nworkers) {

        /* once a zone and process (-2), naming the zone (helper-64) */

        if (idx->slot != -2) {
            idx->slot = -2;
            ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                          "prefix_route: all %ui worker slots%s are "
                          "taken, the load of this worker process is "
                          "kept in the shared cell",
                          sh->nworkers, idx->shpool->log_ctx);
        }

        return sh->nworkers;
    }

    w = &sh->workers[free];
    w->pid = ngx_pid;
    w->nonce = ngx_http_prefix_route_nonce;

    idx->slot = free;

    return free;
}


/*
 * Gives back what the worker slot "slot" has charged to every peer.
 * Returns the number of requests it had in flight.  The caller holds the
 * zone mutex.
 */

static ngx_uint_t
ngx_http_prefix_route_load_orphans(ngx_http_prefix_route_index_t *idx,
    ngx_uint_t slot)
{
    ngx_uint_t                     n, i;
    ngx_queue_t                   *q;
    ngx_http_prefix_route_cell_t  *c, *t;
    ngx_http_prefix_route_peer_t  *peer;

    n = 0;

    for (q = ngx_queue_head(&idx->sh->peers);
         q != ngx_queue_sentinel(&idx->sh->peers);
         q = ngx_queue_next(q))
    {
        peer = ngx_queue_data(q, ngx_http_prefix_route_peer_t, queue);
        c = &peer->cells[slot];

        n += c->inflight;
        ngx_memzero(c, sizeof(ngx_http_prefix_route_cell_t));

        /*
         * the total again from the cells left: a worker killed between its
         * cell and the total leaves neither more nor less for good
         */

        t = &peer->load;
        ngx_memzero(t, sizeof(ngx_http_prefix_route_cell_t));

        for (i = 0; i <= idx->sh->nworkers; i++) {
            t->queued += peer->cells[i].queued;
            t->bytes += peer->cells[i].bytes;
            t->waiting += peer->cells[i].waiting;
            t->inflight += peer->cells[i].inflight;
        }

        /* the dead worker's requests no longer keep a record gone */

        ngx_http_prefix_route_index_loosen(idx, peer);
    }

    return n;
}


static void
ngx_http_prefix_route_load_add(ngx_http_prefix_route_cell_t *c,
    uint64_t work, uint64_t bytes)
{
    c->queued += work;
    c->bytes += bytes;
    c->waiting++;
    c->inflight++;
}


/* never below zero: a total may have lost a dead worker's share first */

static void
ngx_http_prefix_route_load_sub(ngx_http_prefix_route_cell_t *c,
    uint64_t work, uint64_t bytes, ngx_uint_t waiting, ngx_uint_t inflight)
{
    c->queued -= ngx_min(work, c->queued);
    c->bytes -= ngx_min(bytes, c->bytes);
    c->waiting -= ngx_min(waiting, c->waiting);
    c->inflight -= ngx_min(inflight, c->inflight);
}
