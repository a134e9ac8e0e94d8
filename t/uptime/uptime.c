
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


/*
 * Preloaded into nginx by tests (t/PrefixRoute.pm, uptime()): its
 * monotonic clock reads as if the host had been up 50 days, past the
 * 2^32 ms (49.7 days) where the low 32 bits of ngx_current_msec, the
 * index's stamps, wrap around.
 */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <time.h>


#define UPTIME_S  (50L * 86400)


int
clock_gettime(clockid_t id, struct timespec *ts)
{
    int         rc;
    static int  (*real)(clockid_t, struct timespec *);

    if (real == NULL) {
        real = (int (*)(clockid_t, struct timespec *))
                   dlsym(RTLD_NEXT, "clock_gettime");
        if (real == NULL) {
            return -1;
        }
    }

    rc = real(id, ts);

    if (rc == 0
        && (id == CLOCK_MONOTONIC || id == CLOCK_MONOTONIC_COARSE
            || id == CLOCK_MONOTONIC_RAW || id == CLOCK_BOOTTIME))
    {
        ts->tv_sec += UPTIME_S;
    }

    return rc;
}
