
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


/*
 * nginx's ngx_read_file() for the unit tests and the fuzzer, which link
 * the module's sources without nginx's: pread() at the offset, and the
 * file's offset moved past what was read, as nginx's own does (its other
 * work, the log and the sys_offset bookkeeping, is not needed here).
 * Returns the bytes read, or NGX_ERROR.
 */


#include <ngx_config.h>
#include <ngx_core.h>


ssize_t
ngx_read_file(ngx_file_t *file, u_char *buf, size_t size, off_t offset)
{
    ssize_t  n;

    n = pread(file->fd, buf, size, offset);

    if (n == -1) {
        return NGX_ERROR;
    }

    file->offset += n;

    return n;
}
