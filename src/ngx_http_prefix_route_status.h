
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

/*
 * The module's version: debian/changelog's, without the Debian revision
 * (t/080-status.t checks that they agree).
 */
#define NGX_HTTP_PREFIX_ROUTE_VERSION  "0.1.0"

/*
 * The GNU build ID of the module's file as nginx loaded it (the linker's
 * note; "readelf -n" or "file" show it on disk), in hex, or "" when it has
 * none: a reload keeps the build already in memory, so only this tells an
 * upgrade that took (a restart) from one that did not (a reload).  Read
 * from the loaded image once, then kept.
 */
u_char *ngx_http_prefix_route_build_id(void);


#endif /* _NGX_HTTP_PREFIX_ROUTE_STATUS_H_INCLUDED_ */
