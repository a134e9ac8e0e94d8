
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#ifndef _NGX_HTTP_PREFIX_ROUTE_HISTORY_H_INCLUDED_
#define _NGX_HTTP_PREFIX_ROUTE_HISTORY_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>

#include "ngx_http_prefix_route_index.h"


/*
 * The status page's charts: the zone keeps a sample of the upstream's
 * counters and of each server's gauges every NGX_HTTP_PREFIX_ROUTE_INTERVAL
 * seconds (10 s), the last NGX_HTTP_PREFIX_ROUTE_SAMPLES (180: 30
 * minutes), and the page draws the last ones as inline SVG, with no
 * script or font to fetch (docs/reference.md, "HTML").
 */


/*
 * Takes a sample into the zone's ring if none was taken in this interval;
 * any worker may, every worker tries once a second (its sweep timer).
 * Takes the zone mutex.  Never fails.
 */
void ngx_http_prefix_route_history_sample(ngx_http_prefix_route_index_t *idx);

/*
 * The bytes ngx_http_prefix_route_history_html() may write for an
 * upstream of "npeers" servers, names included ("names" bytes in all,
 * before escaping).
 */
size_t ngx_http_prefix_route_history_size(ngx_uint_t npeers, size_t names);

/*
 * Writes the charts of the samples "s" (NGX_HTTP_PREFIX_ROUTE_SAMPLES, a
 * copy of the ring, "last" the newest's place) and of the gauges of the
 * "npeers" servers named "names" ("gauges": npeers rings, the same
 * places), as HTML with inline SVG, at "p": the hit rate per interval
 * (prompt bytes matched; in shadow mode also what prefix_route predicted;
 * the engines' cached tokens where they reported), requests a second by
 * status, and each server's requests in flight and queued KiB.  Returns
 * the end of what it wrote; nothing but a note while fewer than two
 * samples exist.
 */
u_char *ngx_http_prefix_route_history_html(u_char *p,
    ngx_http_prefix_route_sample_t *s, ngx_uint_t last, ngx_uint_t shadow,
    ngx_uint_t npeers, ngx_str_t **names,
    ngx_http_prefix_route_gauge_t **gauges);


#endif /* _NGX_HTTP_PREFIX_ROUTE_HISTORY_H_INCLUDED_ */
