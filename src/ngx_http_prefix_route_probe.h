
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#ifndef _NGX_HTTP_PREFIX_ROUTE_PROBE_H_INCLUDED_
#define _NGX_HTTP_PREFIX_ROUTE_PROBE_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_prefix_route.h"


/*
 * Engine probes (prefix_route_probe; docs/design.md, "Engine probes").
 * Every "interval" one worker of all those that share the zone (the first
 * whose timer finds the round due in the zone) sends each server of the
 * upstream "GET uri HTTP/1.0" on nginx's event loop, reads at most
 * "max_size" bytes of the answer within "timeout" through the metrics
 * reader (ngx_http_prefix_route_metrics.h), and keeps in the server's
 * record of the zone:
 *
 *   - the engine's waiting and running requests and, from those beyond
 *     the zone's own in flight there at that moment, a moving average of
 *     the load other clients give it;
 *   - its health: "fails" probes failed in a row (no connection, no
 *     answer within the timeout, not HTTP, a status other than 2xx) pass
 *     the server over, as if "down", until a probe is answered;
 *   - a counter that only a restart lowers: when it falls below half its
 *     last reading, the engine's cache is empty, and the index forgets
 *     the server's blocks.
 */


/*
 * Starts this worker's probes of the upstream of "prcf": one connection
 * record per server, allocated with ngx_alloc() and freed with the
 * cycle's pool (with "resolve", found again by name as the servers
 * change, reused for a new server once idle), and a timer.  From the
 * module's init_process; returns NGX_OK, or NGX_ERROR without memory.
 */
ngx_int_t ngx_http_prefix_route_probe_init(ngx_cycle_t *cycle,
    ngx_http_prefix_route_srv_conf_t *prcf);

/*
 * Whether the server's last reading may be used: one was kept, two
 * intervals ago at most (a signed difference of ms).  Returns 1 or 0.
 */
ngx_uint_t ngx_http_prefix_route_probe_fresh(
    ngx_http_prefix_route_srv_conf_t *prcf, ngx_http_prefix_route_probe_t *pb);

/*
 * The requests of other clients (other nginx instances, clients that go
 * straight to the engine) on the server of "sp", a moving average over
 * its last readings (NGX_HTTP_PREFIX_ROUTE_PROBE_AVERAGE), when the last
 * is fresh (read less than two intervals ago): *waiting queued, *running
 * in the running batch.  Returns 1, or 0 with both 0 when there is no
 * fresh reading or with load=off.  The caller holds the zone mutex.
 */
ngx_uint_t ngx_http_prefix_route_probe_foreign(
    ngx_http_prefix_route_srv_conf_t *prcf, ngx_http_prefix_route_peer_t *sp,
    ngx_uint_t *waiting, ngx_uint_t *running);


#endif /* _NGX_HTTP_PREFIX_ROUTE_PROBE_H_INCLUDED_ */
