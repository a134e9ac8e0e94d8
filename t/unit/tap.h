
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


/*
 * TAP output shared by the unit tests of t/unit/, included once by each:
 * test_ok() reports one check, test_done() prints the plan last and gives
 * the exit status (1 when a check failed).
 */

#ifndef _TEST_TAP_H_INCLUDED_
#define _TEST_TAP_H_INCLUDED_


#include <stdio.h>


static ngx_uint_t  test_n;
static ngx_uint_t  test_failed;


static void
test_ok(ngx_uint_t ok, const char *name)
{
    test_n++;

    if (!ok) {
        test_failed++;
    }

    printf("%sok %u - %s\n", ok ? "" : "not ", (unsigned) test_n, name);
}


static int
test_done(void)
{
    printf("1..%u\n", (unsigned) test_n);

    return test_failed ? 1 : 0;
}


#endif /* _TEST_TAP_H_INCLUDED_ */
