
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#ifndef _NGX_HTTP_PREFIX_ROUTE_LOAD_H_INCLUDED_
#define _NGX_HTTP_PREFIX_ROUTE_LOAD_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>

#include "ngx_http_prefix_route_index.h"


/*
 * The load of each server, shared by all workers: the requests in flight,
 * their prompt bytes, and the prefill work of those that have not begun
 * to answer (docs/design.md, "Load").  In-flight work is kept per worker
 * process in fixed cells of each peer record, so that counting a request
 * never allocates and the work of a worker that died is given back.  A
 * zone has a cell for each of nworkers worker slots (claimed by pid) and
 * one shared cell for workers beyond them (a reload that raised
 * worker_processes, or old workers still finishing requests); the shared
 * cell is not given back when a worker dies.
 */


/*
 * Charges a request this worker sends to "peer": "work" bytes of prefill
 * and "bytes" of prompt, and one request in flight that has not begun to
 * answer.  The caller holds the zone mutex.  Returns the cell charged, to
 * give to the two calls below; never fails.
 */
ngx_uint_t ngx_http_prefix_route_load_charge(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_peer_t *peer,
    uint64_t work, uint64_t bytes);

/*
 * The request charged with "work" in "cell" has begun to answer: its
 * prefill is over, it decodes.  The caller holds the zone mutex.
 */
void ngx_http_prefix_route_load_start(ngx_http_prefix_route_peer_t *peer,
    ngx_uint_t cell, uint64_t work);

/*
 * Gives back a charge once its request is over; "started": the request
 * was given to ngx_http_prefix_route_load_start() before.  The caller
 * holds the zone mutex.
 */
void ngx_http_prefix_route_load_discharge(ngx_http_prefix_route_peer_t *peer,
    ngx_uint_t cell, uint64_t work, uint64_t bytes, ngx_uint_t started);

/*
 * Gives back the in-flight work of worker processes that died without
 * doing so (killed, crashed): a worker whose pid no longer exists
 * (kill(pid, 0) fails with ESRCH) cannot be finishing a request.  Called
 * from a timer, never on a request; takes the zone mutex only for a dead
 * worker, after the kill() check.
 */
void ngx_http_prefix_route_load_sweep(ngx_http_prefix_route_index_t *idx);

/*
 * Gives back this worker's slot and whatever it still has charged, when
 * the process exits.  Takes the zone mutex.
 */
void ngx_http_prefix_route_load_release(ngx_http_prefix_route_index_t *idx);


#endif /* _NGX_HTTP_PREFIX_ROUTE_LOAD_H_INCLUDED_ */
