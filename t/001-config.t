# Configuration checks of the prefix_route directive: every mistake stops
# nginx with a message naming it (the C messages are in ngx_http_prefix_route()
# of ngx_http_prefix_route_module.c), and valid configurations start and
# serve requests.
#
# Every block loads the module (TEST 29 says it does not); a block that
# serves requests proxies /v1/ to upstream llm, shows the routing variables
# in X-Prefix-Route and expects no [error], [alert] or [crit] in error.log,
# unless it says otherwise.  upstream(), backends() and proxy() are in
# t/PrefixRoute.pm: upstream("zone=llm:1m block=8", 1) is upstream llm with
# "prefix_route zone=llm:1m block=8;" and one server, backend 1.
use Test::Nginx::Socket 'no_plan';
use FindBin;
use lib $FindBin::Bin;
use PrefixRoute;

add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value(main_config => $LoadModule) unless defined $block->main_config;
    # the real Test::Nginx wants a config section even where nginx must
    # not start
    $block->set_value(config => defined $block->must_die
                                ? "location = /t { return 204; }"
                                : proxy()) unless defined $block->config;
    if (!defined $block->must_die) {
        $block->set_value(no_error_log => $NoErrorLog) unless defined $block->no_error_log;
    }
    return $block;
});

# a request of a prompt of 100 bytes
sub completion {
    return "POST /v1/completions\n{\"model\":\"m\",\"prompt\":\"" . ("x" x 100) . "\"}";
}

no_shuffle();
run_tests();

__DATA__

=== TEST 1: prefix_route without the zone parameter
--- http_config eval: ::upstream("block=64", 1)
--- must_die
--- error_log
[emerg]
"prefix_route" must have the "zone=name:size" parameter



=== TEST 2: zone without a size
--- http_config eval: ::upstream("zone=llm", 1)
--- must_die
--- error_log
invalid zone size in "zone=llm", expected zone=name:size



=== TEST 3: zone with a size that is not a size
--- http_config eval: ::upstream("zone=llm:lots", 1)
--- must_die
--- error_log
invalid zone "zone=llm:lots", expected zone=name:size, the size in bytes with k or m



=== TEST 4: zone without a name
--- http_config eval: ::upstream("zone=:1m", 1)
--- must_die
--- error_log
invalid zone "zone=:1m", expected zone=name:size



=== TEST 5: zone smaller than 128k is refused
--- http_config eval: ::upstream("zone=llm:127k", 1)
--- must_die
--- error_log
[emerg]
zone "llm" is too small, prefix_route needs at least



=== TEST 6: the message for a zone smaller than 128k names the minimum
--- http_config eval: ::upstream("zone=llm:127k", 1)
--- must_die
--- error_log
zone "llm" is too small, prefix_route needs at least 128k



=== TEST 6a: a zone larger than the index can address (32768m) is refused
--- http_config eval: ::upstream("zone=llm:32769m", 1)
--- must_die
--- error_log
zone "llm" is too large, prefix_route takes at most 32768m



=== TEST 7: the same zone in two upstreams
--- http_config
upstream one {
    prefix_route zone=llm:1m;
    server 127.0.0.1:1;
}
upstream two {
    prefix_route zone=llm:1m;
    server 127.0.0.1:2;
}
--- must_die
--- error_log
zone "llm" is already used by another prefix_route upstream



=== TEST 8: the same zone name with another size in a second upstream
--- http_config
upstream one {
    prefix_route zone=llm:1m;
    server 127.0.0.1:1;
}
upstream two {
    prefix_route zone=llm:2m;
    server 127.0.0.1:2;
}
--- must_die
--- error_log
the size 2097152 of shared memory zone "llm" conflicts with already declared size 1048576



=== TEST 9: a zone name already used by another module
--- http_config
limit_req_zone $binary_remote_addr zone=llm:1m rate=1r/s;
upstream llm {
    prefix_route zone=llm:1m;
    server 127.0.0.1:1;
}
--- must_die
--- error_log
the shared memory zone "llm" is already declared for a different use



=== TEST 10: block below 16 bytes
--- http_config eval: ::upstream("zone=llm:1m block=8", 1)
--- must_die
--- error_log
invalid block size "block=8", it must be from 16 to 64k bytes



=== TEST 11: block that is not a size
--- http_config eval: ::upstream("zone=llm:1m block=abc", 1)
--- must_die
--- error_log
invalid block size "block=abc", it must be from 16 to 64k bytes



=== TEST 12: block above 64k
--- http_config eval: ::upstream("zone=llm:1m block=65537 max_prefix=1m", 1)
--- must_die
--- error_log
invalid block size "block=65537", it must be from 16 to 64k bytes



=== TEST 13: max_prefix of 0
--- http_config eval: ::upstream("zone=llm:1m max_prefix=0", 1)
--- must_die
--- error_log
invalid max_prefix "max_prefix=0", it must be from one block to 16m



=== TEST 14: max_prefix above 16m
--- http_config eval: ::upstream("zone=llm:1m max_prefix=17m", 1)
--- must_die
--- error_log
invalid max_prefix "max_prefix=17m", it must be from one block to 16m



=== TEST 15: max_prefix that is not a size
--- http_config eval: ::upstream("zone=llm:1m max_prefix=big", 1)
--- must_die
--- error_log
invalid max_prefix "max_prefix=big", it must be from one block to 16m



=== TEST 16: max_prefix smaller than block
--- http_config eval: ::upstream("zone=llm:1m block=128 max_prefix=100", 1)
--- must_die
--- error_log
max_prefix=100 is smaller than block=128



=== TEST 17: a capacity smaller than one block
--- http_config eval: ::upstream("zone=llm:1m capacity=32", 1)
--- must_die
--- error_log
capacity=32 is smaller than block=64



=== TEST 18: max_prefix smaller than the default block
--- http_config eval: ::upstream("zone=llm:1m max_prefix=32", 1)
--- must_die
--- error_log
max_prefix=32 is smaller than block=64



=== TEST 19: capacity that is not a size
--- http_config eval: ::upstream("zone=llm:1m capacity=all", 1)
--- must_die
--- error_log
invalid capacity "capacity=all", it must be a size in bytes with k or m, 0 for no limit



=== TEST 20: negative capacity
--- http_config eval: ::upstream("zone=llm:1m capacity=-1m", 1)
--- must_die
--- error_log
invalid capacity "capacity=-1m"



=== TEST 21: affinity above 10
--- http_config eval: ::upstream("zone=llm:1m affinity=11", 1)
--- must_die
--- error_log
invalid affinity "affinity=11", it must be a number from 0 to 10



=== TEST 22: affinity that is not a number
--- http_config eval: ::upstream("zone=llm:1m affinity=x", 1)
--- must_die
--- error_log
invalid affinity "affinity=x", it must be a number from 0 to 10



=== TEST 23: negative affinity
--- http_config eval: ::upstream("zone=llm:1m affinity=-1", 1)
--- must_die
--- error_log
invalid affinity "affinity=-1", it must be a number from 0 to 10



=== TEST 24: decay= is obsolete: nginx warns and starts
--- http_config eval: ::upstream("zone=llm:1m decay=5s", 1) . ::backends(1)
--- request eval
"POST /v1/completions\n{\"model\":\"m\",\"prompt\":\"" . ("x" x 100) . "\"}"
--- response_body
b1



=== TEST 25: unknown parameter
--- http_config eval: ::upstream("zone=llm:1m blocks=64", 1)
--- must_die
--- error_log
invalid parameter "blocks=64"



=== TEST 26: prefix_route in http{}
--- http_config
prefix_route zone=llm:1m;
--- must_die
--- error_log
"prefix_route" directive is not allowed here



=== TEST 27: prefix_route in a location
--- config
location /v1/ {
    prefix_route zone=llm:1m;
}
--- must_die
--- error_log
"prefix_route" directive is not allowed here



=== TEST 28: prefix_route after a server line
--- http_config
upstream llm {
    server 127.0.0.1:1;
    prefix_route zone=llm:1m;
}
--- must_die
--- error_log
"prefix_route" directive must come before the "server" directives



=== TEST 29: prefix_route twice in one upstream
--- http_config
upstream llm {
    prefix_route zone=llm:1m;
    prefix_route zone=other:1m;
    server 127.0.0.1:1;
}
--- must_die
--- error_log
"prefix_route" directive is duplicate



=== TEST 30: without load_module the directive is unknown
--- main_config
# no load_module
--- http_config
upstream llm {
    prefix_route zone=llm:1m;
    server 127.0.0.1:1;
}
--- must_die
--- error_log
unknown directive "prefix_route"



=== TEST 31: another balancer before prefix_route is an error
A balancer before it would be replaced without a word.
--- http_config
upstream llm {
    least_conn;
    prefix_route zone=llm:1m;
    server 127.0.0.1:1;
}
--- must_die
--- error_log
"prefix_route" directive follows "keepalive" or a load balancing method ("least_conn", "hash", "random"...): put "prefix_route" first in the upstream



=== TEST 32: keepalive before prefix_route is an error
Replacing the balancer keepalive wraps would turn keepalive off silently.
From nginx 1.29.7 on keepalive wraps it later, in any order (TEST 71).
--- skip_nginx: 2: >= 1.29.7
--- http_config
upstream llm {
    keepalive 4;
    prefix_route zone=llm:1m;
    server 127.0.0.1:1;
}
--- must_die
--- error_log
"prefix_route" directive follows "keepalive" or a load balancing method ("least_conn", "hash", "random"...): put "prefix_route" first in the upstream



=== TEST 33: the README configuration starts and serves requests with every server parameter
The servers use weight, max_fails, fail_timeout, max_conns, down and backup,
and keepalive wraps the balancer.  The down server and the backup are never
chosen while the others are up: their names are b4 and b5.
--- http_config eval
<<'_EOC_' . ::backends(1 .. 5)
log_format llm '$remote_addr "$request" $status $upstream_addr '
               'prefix=$prefix_route_status '
               'matched=$prefix_route_match/$prefix_route_length '
               'ttfb=$upstream_header_time total=$request_time';

upstream vllm {
    prefix_route zone=vllm_prefix:32m capacity=1800k;

    server 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_2 max_conns=100;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_3 weight=2 max_fails=2 fail_timeout=10s;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_4 down;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_5 backup;

    keepalive 32;
}
_EOC_
--- config
access_log logs/llm.log llm;

client_body_buffer_size 8m;

location /v1/ {
    proxy_pass http://vllm;
    proxy_http_version 1.1;
    proxy_set_header Connection "";

    proxy_buffering off;
    proxy_read_timeout 600s;

    proxy_next_upstream error timeout http_500 http_502 http_503;

    add_header X-Prefix-Route "$prefix_route_status $prefix_route_match $prefix_route_length" always;
}
--- request eval
my $sys = "You answer questions about the weather, briefly. " x 12;
my $req = "POST /v1/chat/completions\n{\"model\":\"llama\",\"messages\":[{\"role\":\"system\",\"content\":\"$sys\"},{\"role\":\"user\",\"content\":\"Rain?\"}]}";
[$req, $req, "GET /v1/models"]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 609", "X-Prefix-Route: HIT 576 609", "X-Prefix-Route: BYPASS 0 0"]
--- response_body_like eval
["^b[123]\n\\z", "^b[123]\n\\z", "^b[123]\n\\z"]
--- no_error_log
[error]
[alert]
[crit]
[emerg]



=== TEST 34: every parameter set to a valid non-default value
block=48 and max_prefix=1k: a prompt of more than 1k is cut at 1024 bytes,
and a repeat matches 21 whole blocks of 48 bytes, 1008 bytes.
--- http_config eval
::upstream("zone=llm:256k block=48 max_prefix=1k capacity=64k affinity=2.5 policy=ttft max_load=200% instances=3 tenant_share=25% max_parse=200ms", 1, 2)
. ::backends(1, 2)
--- request eval
my $sys = "Summarise the following document in one line. " x 40;
my $req = "POST /v1/chat/completions\n{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"$sys\"}]}";
[$req, $req]
--- response_headers eval
["X-Prefix-Route: MISS 0 1024", "X-Prefix-Route: HIT 1008 1024"]
--- response_body_like eval
["^b[12]\n\\z", "^b[12]\n\\z"]



=== TEST 35: the boundary values are accepted
zone=128k (the minimum), block=16, max_prefix=16 (= block), capacity=0,
affinity=0, max_load=100%, instances=1, tenant_share=1%, max_parse=1ms: a
40-byte prompt has 2 whole blocks of 16 bytes, and
the prefix index still records them (affinity=0 only stops them counting).
--- http_config eval
::upstream("zone=llm:128k block=16 max_prefix=16 capacity=0 affinity=0 max_load=100% instances=1 tenant_share=1% max_parse=1ms", 1) . ::backends(1)
--- request eval
my $req = "POST /v1/completions\n{\"model\":\"m\",\"prompt\":\"" . ("x" x 40) . "\"}";
[$req, $req]
--- response_headers eval
["X-Prefix-Route: MISS 0 16", "X-Prefix-Route: HIT 16 16"]
--- response_body eval
["b1\n", "b1\n"]



=== TEST 36: the upper boundary values are accepted
block=64k, max_prefix=16m, capacity=1024m, affinity=10, max_load=10000%,
instances=1000, tenant_share=100%, max_parse=10s
--- http_config eval
::upstream("zone=llm:1m block=64k max_prefix=16m capacity=1024m affinity=10 max_load=10000% instances=1000 tenant_share=100% max_parse=10s", 1) . ::backends(1)
--- request eval
"POST /v1/completions\n{\"model\":\"m\",\"prompt\":\"" . ("x" x 100) . "\"}"
--- response_headers_like
X-Prefix-Route: MISS 0 1\d\d
--- response_body
b1



=== TEST 37: with the upstream zone directive (peers in shared memory) prefix_route works
--- http_config eval
<<'_EOC_' . ::backends(1 .. 4)
upstream llm {
    zone llm_peers 64k;
    prefix_route zone=llm:1m;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_2;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_3 down;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_4 backup;
}
_EOC_
--- request eval
my $sys = "You are a careful assistant. " x 20;
my $req = "POST /v1/chat/completions\n{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"$sys\"},{\"role\":\"user\",\"content\":\"hi\"}]}";
[$req, $req, "GET /v1/models", "GET /v1/models"]
--- response_headers eval
["X-Prefix-Route: MISS 0 598", "X-Prefix-Route: HIT 576 598", "X-Prefix-Route: BYPASS 0 0", "X-Prefix-Route: BYPASS 0 0"]
--- response_body_like eval
["^b[12]\n\\z", "^b[12]\n\\z", "^b1\n\\z", "^b2\n\\z"]



=== TEST 38: a balancer after prefix_route is an error, not a silent switch to least_conn
--- http_config
upstream llm {
    prefix_route zone=llm:1m;
    least_conn;
    server 127.0.0.1:1;
}
--- must_die
--- error_log eval
qr/another load balancing method replaces "prefix_route" in upstream "llm" in \S+nginx\.conf:\d+: it follows "prefix_route" in \S+nginx\.conf:\d+; remove it, or put it before "prefix_route" with "shadow" to leave it in charge/



=== TEST 39: a bare prefix_route names the missing zone parameter
--- http_config eval: ::upstream("", 1)
--- must_die
--- error_log
"prefix_route" must have the "zone=name:size" parameter



=== TEST 40: a parameter given twice is an error
--- http_config eval: ::upstream("zone=llm:1m block=64 block=128", 1)
--- must_die
--- error_log
duplicate parameter "block=128"



=== TEST 41: an unknown policy
--- http_config eval: ::upstream("zone=llm:1m policy=random", 1)
--- must_die
--- error_log
invalid policy "policy=random", it must be "ttft" or "cache_aware"



=== TEST 42: max_load below the mean
--- http_config eval: ::upstream("zone=llm:1m max_load=99%", 1)
--- must_die
--- error_log
invalid max_load "max_load=99%", it must be a percentage from 100% to 10000%, or "off"



=== TEST 43: max_load without the percent sign
--- http_config eval: ::upstream("zone=llm:1m max_load=150", 1)
--- must_die
--- error_log
invalid max_load "max_load=150", it must be a percentage from 100% to 10000%, or "off"



=== TEST 44: policy=cache_aware and max_load=off: a repeat goes where the prompt is
--- http_config eval
::upstream("zone=llm:1m policy=cache_aware max_load=off", 1, 2, 3)
. ::backends(1, 2, 3)
--- request eval
my $p = "Classify the sentiment of the following review. " x 20;
my $req = "POST /v1/completions\n{\"model\":\"m\",\"prompt\":\"$p\"}";
[$req, $req]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: HIT [1-9]\\d* \\d+"]



=== TEST 45: an obsolete decay= must still be a time
--- http_config eval: ::upstream("zone=llm:1m decay=soon", 1)
--- must_die
--- error_log
invalid decay "decay=soon", it must be a time (500ms, 5s, 1m...)



=== TEST 46: feedback is on, correct or off
--- http_config eval: ::upstream("zone=llm:1m feedback=yes", 1)
--- must_die
--- error_log
invalid feedback "feedback=yes", it must be "on", "correct" or "off"



=== TEST 47: prefix_route_probe needs prefix_route in its upstream
--- http_config
upstream llm {
    prefix_route_probe;
    server 127.0.0.1:1;
}
--- must_die
--- error_log
"prefix_route_probe" needs "prefix_route" in upstream "llm"



=== TEST 48: prefix_route_probe's times are from 10ms to 1h
--- http_config eval
my $u = ::upstream(1);
$u =~ s/(prefix_route [^\n]*\n)/$1    prefix_route_probe interval=5ms;\n/;
$u
--- must_die
--- error_log
invalid time "interval=5ms", it must be from 10ms to 1h



=== TEST 49: prefix_route_probe's fails is a number from 1
--- http_config eval
my $u = ::upstream(1);
$u =~ s/(prefix_route [^\n]*\n)/$1    prefix_route_probe fails=0;\n/;
$u
--- must_die
--- error_log
invalid fails "fails=0", it must be a number from 1 to 1000



=== TEST 50: prefix_route_probe's uri is a path
--- http_config eval
my $u = ::upstream(1);
$u =~ s/(prefix_route [^\n]*\n)/$1    prefix_route_probe uri=metrics;\n/;
$u
--- must_die
--- error_log
invalid uri "uri=metrics", it must begin with "/" and hold no space or control character



=== TEST 51: prefix_route_probe's max_size is a size from 1k
--- http_config eval
my $u = ::upstream(1);
$u =~ s/(prefix_route [^\n]*\n)/$1    prefix_route_probe max_size=100;\n/;
$u
--- must_die
--- error_log
invalid max_size "max_size=100", it must be from 1k to 64m bytes



=== TEST 52: prefix_route_probe with an unknown parameter
--- http_config eval
my $u = ::upstream(1);
$u =~ s/(prefix_route [^\n]*\n)/$1    prefix_route_probe every=1s;\n/;
$u
--- must_die
--- error_log
invalid parameter "every=1s"



=== TEST 53: prefix_route_probe's load is on or off
--- http_config eval
my $u = ::upstream(1);
$u =~ s/(prefix_route [^\n]*\n)/$1    prefix_route_probe load=yes;\n/;
$u
--- must_die
--- error_log
invalid load "load=yes", it must be "on" or "off"



=== TEST 54: prefix_route_probe with all its parameters passes "nginx -t"
--- http_config eval
my $u = ::upstream(1);
$u =~ s/(prefix_route [^\n]*\n)/$1    prefix_route_probe uri=\/v1\/metrics interval=2s timeout=500ms fails=5 max_size=4m load=off;\n/;
$u . ::backends(1)
--- request eval
"POST /v1/chat/completions\n{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"
--- response_body
b1



=== TEST 55: instances is a whole number from 1
--- http_config eval: ::upstream("zone=llm:1m instances=0", 1)
--- must_die
--- error_log
invalid instances "instances=0", it must be a number from 1 to 1000



=== TEST 56: instances is a whole number to 1000
--- http_config eval: ::upstream("zone=llm:1m instances=2.5", 1)
--- must_die
--- error_log
invalid instances "instances=2.5", it must be a number from 1 to 1000



=== TEST 57: instances with policy=cache_aware starts (the simple rule ignores it; nginx warns on stderr, before the error log is open)
--- http_config eval
::upstream("zone=llm:1m policy=cache_aware instances=3", 1) . ::backends(1)
--- request eval
"POST /v1/completions\n{\"model\":\"m\",\"prompt\":\"hi\"}"
--- response_body
b1



=== TEST 58: tenant_share is a percentage from 1%
--- http_config eval: ::upstream("zone=llm:1m tenant_share=0%", 1)
--- must_die
--- error_log
invalid tenant_share "tenant_share=0%", it must be a percentage from 1% to 100%, or "off"



=== TEST 59: tenant_share is a percentage to 100%, with its sign
--- http_config eval: ::upstream("zone=llm:1m tenant_share=50", 1)
--- must_die
--- error_log
invalid tenant_share "tenant_share=50", it must be a percentage from 1% to 100%, or "off"



=== TEST 60: tenant_share above 100%
--- http_config eval: ::upstream("zone=llm:1m tenant_share=101%", 1)
--- must_die
--- error_log
invalid tenant_share "tenant_share=101%", it must be a percentage from 1% to 100%, or "off"



=== TEST 61: tenant_share=off, the default, is accepted
--- http_config eval
::upstream("zone=llm:1m tenant_share=off", 1) . ::backends(1)
--- request eval
"POST /v1/completions\n{\"model\":\"m\",\"prompt\":\"hi\"}"
--- response_body
b1



=== TEST 62: affinity of a dot alone is no number (ngx_atofp() reads it as 0)
--- http_config eval: ::upstream("zone=llm:1m affinity=.", 1)
--- must_die
--- error_log
invalid affinity "affinity=.", it must be a number from 0 to 10



=== TEST 63: affinity ending with a dot
--- http_config eval: ::upstream("zone=llm:1m affinity=1.", 1)
--- must_die
--- error_log
invalid affinity "affinity=1.", it must be a number from 0 to 10



=== TEST 64: affinity with three decimals: the message names the rule it breaks
--- http_config eval: ::upstream("zone=llm:1m affinity=1.234", 1)
--- must_die
--- error_log
invalid affinity "affinity=1.234", it must be a number from 0 to 10 with at most two decimals



=== TEST 65: prefix_route_probe's uri holds no tab: it would end the request line's target
--- http_config eval
my $u = ::upstream(1);
$u =~ s/(prefix_route [^\n]*\n)/$1    prefix_route_probe "uri=\/met\trics";\n/;
$u
--- must_die
--- error_log
invalid uri "uri=/met



=== TEST 66: a word given twice is an error too, not only a name=value
--- http_config eval: ::upstream("zone=llm:1m shadow shadow", 1)
--- must_die
--- error_log
duplicate parameter "shadow"



=== TEST 67: prefix_route_probe's parameter given twice is an error, not the last one winning
--- http_config eval
my $u = ::upstream(1);
$u =~ s/(prefix_route [^\n]*\n)/$1    prefix_route_probe interval=1s interval=2s;\n/;
$u
--- must_die
--- error_log
duplicate parameter "interval=2s"



=== TEST 68: max_errors is a whole number from 1, or off
--- http_config eval: ::upstream("zone=llm:1m max_errors=0", 1)
--- must_die
--- error_log
invalid max_errors "max_errors=0", it must be a number from 1 to 1000, or "off"



=== TEST 69: max_errors is a whole number to 1000
--- http_config eval: ::upstream("zone=llm:1m max_errors=1001", 1)
--- must_die
--- error_log
invalid max_errors "max_errors=1001", it must be a number from 1 to 1000, or "off"



=== TEST 70: max_errors given twice, off first, is an error
--- http_config eval: ::upstream("zone=llm:1m max_errors=off max_errors=3", 1)
--- must_die
--- error_log
duplicate parameter "max_errors=3"



=== TEST 71: from nginx 1.29.7 on, keepalive before prefix_route is accepted
There keepalive is on by default and wraps every upstream's balancer once
the whole configuration is read, whatever the order: the prompt is routed
by prefix_route (MISS, then HIT) through a keepalive upstream.
--- skip_nginx: 10: < 1.29.7
--- http_config eval
my $u = ::upstream(1, 2);
$u =~ s/(upstream llm \{\n)/$1    keepalive 4;\n/;
$u . ::backends(1, 2)
--- config eval
::proxy(add => "proxy_http_version 1.1;\n    proxy_set_header Connection \"\";")
--- request eval
my $req = "POST /v1/completions\n{\"model\":\"m\",\"prompt\":\"" . ("Say it again. " x 30) . "\"}";
[$req, $req]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: HIT [1-9]\\d* \\d+"]



=== TEST 72: from nginx 1.27.3 on, "resolve" without a resolver is nginx's own error
prefix_route's balancer lets round robin read the servers, and its checks
stand.  The name must not be an address ("127.0.0.1 resolve" is a plain
server).
--- skip_nginx: 2: < 1.27.3
--- http_config
upstream llm {
    zone llm_peers 64k;
    prefix_route zone=llm:1m;
    server localhost:1 resolve;
}
--- must_die
--- error_log
no resolver defined to resolve names at run time in upstream "llm"



=== TEST 73: the same without the upstream's zone, in shadow mode
--- skip_nginx: 2: < 1.27.3
--- http_config
upstream llm {
    resolver 127.0.0.1:1 valid=1s;
    least_conn;
    prefix_route zone=llm:1m shadow;
    server localhost:1 resolve;
}
--- must_die
--- error_log
resolving names at run time requires upstream "llm"



=== TEST 74: a status page where no upstream has prefix_route: nginx warns, naming the page, and the page lists none
--- http_config
upstream llm {
    server 127.0.0.1:1;
}
--- config
location = /status { prefix_route_status; }
--- request
GET /status
--- response_body_like: ^\{"upstreams":\[\],
--- error_log eval
qr/\[warn\] .*"prefix_route_status" in \S+nginx\.conf:\d+ has nothing to show: no upstream has "prefix_route"/



=== TEST 75: the same page with a prefix_route upstream: no warning
--- http_config eval: ::upstream("zone=llm:1m", 1)
--- config
location = /status { prefix_route_status; }
--- request
GET /status
--- response_body_like: ^\{"upstreams":\[\{
--- no_error_log
has nothing to show
[error]



=== TEST 76: max_parse is a time from 1ms
--- http_config eval: ::upstream("zone=llm:1m max_parse=0", 1)
--- must_die
--- error_log
invalid max_parse "max_parse=0", it must be a time from 1ms to 10s, or "off"



=== TEST 77: max_parse is a time to 10s
--- http_config eval: ::upstream("zone=llm:1m max_parse=11s", 1)
--- must_die
--- error_log
invalid max_parse "max_parse=11s", it must be a time from 1ms to 10s, or "off"



=== TEST 78: max_parse is a time, not a word
--- http_config eval: ::upstream("zone=llm:1m max_parse=fast", 1)
--- must_die
--- error_log
invalid max_parse "max_parse=fast", it must be a time from 1ms to 10s, or "off"



=== TEST 79: max_parse given twice, off first, is an error
--- http_config eval: ::upstream("zone=llm:1m max_parse=off max_parse=1s", 1)
--- must_die
--- error_log
duplicate parameter "max_parse=1s"



=== TEST 80: two server lines of one address: nginx warns, naming the address and the upstream, and starts
--- http_config eval
::upstream("zone=llm:1m", 1, 2, 1) . ::backends(1, 2)
--- request eval
[::completion()]
--- response_body_like eval
["^b[12]\n\\z"]
--- error_log eval
qr/\[warn\] .*server "127\.0\.0\.1:\d+" is named by more than one "server" line of upstream "llm" in \S+nginx\.conf:\d+: prefix_route counts them as one server/



=== TEST 81: distinct addresses, one in the backup list: no such warning
--- http_config eval
::upstream("zone=llm:1m", 1, "2 backup") . ::backends(1, 2)
--- request eval
[::completion(), ::completion()]
--- response_body_like eval
["^b1\n\\z", "^b1\n\\z"]
--- no_error_log
more than one "server" line
[error]



=== TEST 82: an address in the primary and the backup list: warned of too
--- http_config eval
::upstream("zone=llm:1m", 1, 2, "1 backup") . ::backends(1, 2)
--- request eval
[::completion()]
--- response_body_like eval
["^b[12]\n\\z"]
--- error_log eval
qr/\[warn\] .*server "127\.0\.0\.1:\d+" is named by more than one "server" line of upstream "llm"/



=== TEST 83: a ";" missing after prefix_route: the next directive's name is no duplicate of zone=, and the message says what is likely
--- http_config eval: ::upstream("zone=llm:1m\n    zone peers 64k", 1)
--- must_die
--- error_log
invalid parameter "zone": is a ";" missing before it?
