
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#ifndef _NGX_HTTP_PREFIX_ROUTE_STATUS_H_INCLUDED_
#define _NGX_HTTP_PREFIX_ROUTE_STATUS_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>


/*
 * The content handler of "prefix_route_status": the figures of every
 * upstream that uses prefix_route, as JSON, in Prometheus text format
 * with "?format=prometheus", or as an HTML page with "?format=html" or to
 * a browser that accepts text/html.  Hashes, lengths and counters only, never
 * prompt text.  Returns an HTTP status or NGX_ERROR, as content handlers
 * do: 405 for methods other than GET and HEAD, 400 for an unknown format.
 */
ngx_int_t ngx_http_prefix_route_status_handler(ngx_http_request_t *r);


#endif /* _NGX_HTTP_PREFIX_ROUTE_STATUS_H_INCLUDED_ */
