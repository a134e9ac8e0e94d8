# nginx's failure semantics are kept: down, backup, max_fails/fail_timeout,
# max_conns, proxy_next_upstream retries to an untried server, and 502 when
# no server is usable.
#
# Several tests give the server under test a high weight: the cost model
# divides by the weight, so on an idle fleet that server is the first choice
# for any new prompt, and only the failure rule under test can keep a request
# away from it.
use Test::Nginx::Socket 'no_plan';

# an OpenAI chat body with a prompt of about 1 KB, different for each $i
sub chat {
    my $i = shift;
    my $text = "Question $i: tell me something about the number $i, in detail. " x 16;
    return "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"$text\"}]}";
}

no_shuffle();
run_tests();

__DATA__

=== TEST 1: a down server is never chosen, even with the highest weight
--- main_config
load_module $TEST_NGINX_MODULE;
--- http_config
upstream llm {
    prefix_route zone=llm:1m;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_2;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_3;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_4 weight=100 down;
}
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_1; return 200 "b1\n"; }
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_2; return 200 "b2\n"; }
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_3; return 200 "b3\n"; }
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_4; return 200 "b4\n"; }
--- config
location /v1/ {
    proxy_pass http://llm;
    add_header X-Prefix-Route "$prefix_route_status $prefix_route_match $prefix_route_length" always;
}
--- request eval
[map { "POST /v1/chat/completions\n" . main::chat($_) } 1 .. 8]
--- response_headers_like eval
[("X-Prefix-Route: MISS 0 \\d+") x 8]
--- response_body_like eval
[("^b[123]\n\\z") x 8]
--- no_error_log
[error]
[warn]



=== TEST 2: a backup server is not used while a primary is up, even with the highest weight
--- main_config
load_module $TEST_NGINX_MODULE;
--- http_config
upstream llm {
    prefix_route zone=llm:1m;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_2;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_3 weight=100 backup;
}
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_1; return 200 "b1\n"; }
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_2; return 200 "b2\n"; }
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_3; return 200 "b3\n"; }
--- config
location /v1/ {
    proxy_pass http://llm;
    add_header X-Prefix-Route "$prefix_route_status $prefix_route_match $prefix_route_length" always;
}
--- request eval
[(map { "POST /v1/chat/completions\n" . main::chat($_) } 1 .. 6),
 (map { "POST /v1/chat/completions\n" . main::chat($_) } 1 .. 2)]
--- response_headers_like eval
[("X-Prefix-Route: MISS 0 \\d+") x 6, ("X-Prefix-Route: HIT [1-9]\\d* \\d+") x 2]
--- response_body_like eval
[("^b[12]\n\\z") x 8]
--- no_error_log
[error]
[warn]



=== TEST 3: when all primaries are down the backups serve, with prefix affinity among them
--- main_config
load_module $TEST_NGINX_MODULE;
--- http_config
upstream llm {
    prefix_route zone=llm:1m;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_1 down;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_2 down;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_3 backup;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_4 backup weight=10;
}
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_1; return 200 "b1\n"; }
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_2; return 200 "b2\n"; }
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_3; return 200 "b3\n"; }
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_4; return 200 "b4\n"; }
--- config
location /v1/ {
    proxy_pass http://llm;
    add_header X-Prefix-Route "$prefix_route_status $prefix_route_match $prefix_route_length" always;
}
--- request eval
["POST /v1/chat/completions\n" . main::chat(1), "POST /v1/chat/completions\n" . main::chat(1),
 "GET /v1/models"]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 (\\d+)", "X-Prefix-Route: HIT [1-9]\\d* \\d+", "X-Prefix-Route: BYPASS 0 0"]
--- response_body_like eval
["^b4\n\\z", "^b4\n\\z", "^b[34]\n\\z"]
--- no_error_log
[error]
[warn]



=== TEST 4: when all primaries refuse connections the backup serves, and they are not tried again
max_fails=1: the first request tries both primaries, then the backup; the
second goes to the backup at once.
--- main_config
load_module $TEST_NGINX_MODULE;
--- http_config
upstream llm {
    prefix_route zone=llm:1m;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_1 max_fails=1 fail_timeout=10s;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_2 max_fails=1 fail_timeout=10s;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_3 backup;
}
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_3; return 200 "b3\n"; }
--- config
location /v1/ {
    proxy_pass http://llm;
    add_header X-Prefix-Route "$prefix_route_status $prefix_route_match $prefix_route_length" always;
    add_header X-Upstream-Status $upstream_status always;
}
--- request eval
["POST /v1/chat/completions\n" . main::chat(1), "POST /v1/chat/completions\n" . main::chat(1),
 "POST /v1/chat/completions\n" . main::chat(2)]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 \\d+\nX-Upstream-Status: 502, 502, 200",
 "X-Prefix-Route: HIT [1-9]\\d* \\d+\nX-Upstream-Status: 200",
 "X-Prefix-Route: MISS 0 \\d+\nX-Upstream-Status: 200"]
--- response_body eval
["b3\n", "b3\n", "b3\n"]
--- no_error_log
[alert]
[crit]
no live upstreams



=== TEST 5: a server that refuses connections is retried away from and temporarily disabled
--- main_config
load_module $TEST_NGINX_MODULE;
--- http_config
upstream llm {
    prefix_route zone=llm:1m;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_1 weight=10 max_fails=1 fail_timeout=10s;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_2;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_3;
}
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_2; return 200 "b2\n"; }
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_3; return 200 "b3\n"; }
--- config
location /v1/ {
    proxy_pass http://llm;
    add_header X-Prefix-Route "$prefix_route_status $prefix_route_match $prefix_route_length" always;
    add_header X-Upstream-Status $upstream_status always;
}
--- request eval
"POST /v1/chat/completions\n" . main::chat(1)
--- response_headers_like
X-Prefix-Route: MISS 0 \d+
X-Upstream-Status: 502, 200
--- response_body_like eval
"^b[23]\n\\z"
--- error_log eval
[qr/\[error\] .*connect\(\) failed \(111: Connection refused\) while connecting to upstream/,
 qr/\[warn\] .*upstream server temporarily disabled while connecting to upstream/]
--- no_error_log
[alert]
[crit]



=== TEST 6: after a failover the prompt sticks to the server that answered; new prompts avoid the disabled one
The same configuration as the previous test: the first request is retried
away from the refusing server, which holds the prompt too but is disabled.
--- main_config
load_module $TEST_NGINX_MODULE;
--- http_config
upstream llm {
    prefix_route zone=llm:1m;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_1 weight=10 max_fails=1 fail_timeout=10s;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_2;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_3;
}
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_2; return 200 "b2\n"; }
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_3; return 200 "b3\n"; }
--- config
location /v1/ {
    proxy_pass http://llm;
    add_header X-Prefix-Route "$prefix_route_status $prefix_route_match $prefix_route_length" always;
    add_header X-Upstream-Status $upstream_status always;
}
--- request eval
[map { "POST /v1/chat/completions\n" . main::chat($_) } 1, 1, 2, 3, 1]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 (\\d+)\nX-Upstream-Status: 502, 200",
 "X-Prefix-Route: HIT [1-9]\\d* \\d+\nX-Upstream-Status: 200",
 "X-Prefix-Route: MISS 0 \\d+\nX-Upstream-Status: 200",
 "X-Prefix-Route: MISS 0 \\d+\nX-Upstream-Status: 200",
 "X-Prefix-Route: HIT [1-9]\\d* \\d+\nX-Upstream-Status: 200"]
--- response_body_like eval
[("^b[23]\n\\z") x 5]
--- no_error_log
[alert]
[crit]



=== TEST 7: a holder that fails with 502 is retried away from (proxy_next_upstream http_502 non_idempotent), then the prompt sticks to the new server
b1 answers /v1/ but fails /flaky/ with 502.  The prompt goes to b1 (weight),
then /flaky/ fails on b1 and is retried on another server, which answers;
b1 is disabled (max_fails=1), so the prompt now is a HIT on that server.
A POST is retried after a 502 only with non_idempotent (nginx's rule).
--- main_config
load_module $TEST_NGINX_MODULE;
--- http_config
upstream llm {
    prefix_route zone=llm:1m;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_1 weight=10 max_fails=1 fail_timeout=10s;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_2;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_3;
}
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_1; location /flaky/ { return 502; } location / { return 200 "b1\n"; } }
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_2; return 200 "b2\n"; }
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_3; return 200 "b3\n"; }
--- config
location /v1/ {
    proxy_pass http://llm;
    proxy_next_upstream error timeout http_502 non_idempotent;
    add_header X-Prefix-Route "$prefix_route_status $prefix_route_match $prefix_route_length" always;
    add_header X-Upstream-Status $upstream_status always;
}
location /flaky/ {
    proxy_pass http://llm;
    proxy_next_upstream error timeout http_502 non_idempotent;
    add_header X-Prefix-Route "$prefix_route_status $prefix_route_match $prefix_route_length" always;
    add_header X-Upstream-Status $upstream_status always;
}
--- request eval
["POST /v1/chat/completions\n" . main::chat(1),
 "POST /v1/chat/completions\n" . main::chat(1),
 "POST /flaky/chat/completions\n" . main::chat(1),
 "POST /v1/chat/completions\n" . main::chat(1)]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 \\d+\nX-Upstream-Status: 200",
 "X-Prefix-Route: HIT [1-9]\\d* \\d+\nX-Upstream-Status: 200",
 "X-Prefix-Route: MISS 0 \\d+\nX-Upstream-Status: 502, 200",
 "X-Prefix-Route: HIT [1-9]\\d* \\d+\nX-Upstream-Status: 200"]
--- response_body_like eval
["^b1\n\\z", "^b1\n\\z", "^b[23]\n\\z", "^b[23]\n\\z"]
--- no_error_log
[error]
[alert]
[crit]



=== TEST 8: without non_idempotent a POST that got a 502 is not retried, and the server is not disabled
nginx passes a POST to the next server after a 502 only with
non_idempotent (ngx_http_upstream_test_next()): the 502 reaches the client,
b1 is not counted as failed and keeps the prompt.
--- main_config
load_module $TEST_NGINX_MODULE;
--- http_config
upstream llm {
    prefix_route zone=llm:1m;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_1 weight=10 max_fails=1 fail_timeout=10s;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_2;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_3;
}
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_1; location /flaky/ { return 502; } location / { return 200 "b1\n"; } }
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_2; return 200 "b2\n"; }
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_3; return 200 "b3\n"; }
--- config
location /v1/ {
    proxy_pass http://llm;
    proxy_next_upstream error timeout http_502;
    add_header X-Prefix-Route "$prefix_route_status $prefix_route_match $prefix_route_length" always;
    add_header X-Upstream-Status $upstream_status always;
}
location /flaky/ {
    proxy_pass http://llm;
    proxy_next_upstream error timeout http_502;
    add_header X-Prefix-Route "$prefix_route_status $prefix_route_match $prefix_route_length" always;
    add_header X-Upstream-Status $upstream_status always;
}
--- request eval
["POST /v1/chat/completions\n" . main::chat(1),
 "POST /v1/chat/completions\n" . main::chat(1),
 "POST /flaky/chat/completions\n" . main::chat(1),
 "POST /v1/chat/completions\n" . main::chat(1)]
--- error_code eval
[200, 200, 502, 200]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 \\d+\nX-Upstream-Status: 200",
 "X-Prefix-Route: HIT [1-9]\\d* \\d+\nX-Upstream-Status: 200",
 "X-Prefix-Route: HIT [1-9]\\d* \\d+\nX-Upstream-Status: 502",
 "X-Prefix-Route: HIT [1-9]\\d* \\d+\nX-Upstream-Status: 200"]
--- response_body_like eval
["^b1\n\\z", "^b1\n\\z", "502 Bad Gateway", "^b1\n\\z"]
--- no_error_log
[error]
[alert]
[crit]



=== TEST 9: max_conns: a server at its limit is skipped for a concurrent request
b1 (weight 10, max_conns=1) would take both prompts if it could; the two
subrequests run at the same time and each backend answers after 0.3 s, so
the second finds b1 busy and goes to b2.  A later prompt goes to b1 again.
--- main_config
load_module $TEST_NGINX_MODULE;
load_module /usr/lib/nginx/modules/ngx_http_echo_module.so;
--- http_config
upstream llm {
    prefix_route zone=llm:1m;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_1 weight=10 max_conns=1;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_2;
}
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_1; location / { echo_sleep 0.3; echo b1; } }
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_2; location / { echo_sleep 0.3; echo b2; } }
--- config eval
my $p = main::chat(1);
my $q = main::chat(2);
qq{
location /v1/ {
    proxy_pass http://llm;
    add_header X-Prefix-Route "\$prefix_route_status \$prefix_route_match \$prefix_route_length" always;
}
location = /both {
    echo_subrequest_async POST /v1/chat/completions -b '$p';
    echo_subrequest_async POST /v1/chat/completions -b '$q';
}
}
--- request eval
["GET /both", "POST /v1/chat/completions\n" . main::chat(3)]
--- response_body eval
["b1\nb2\n", "b1\n"]
--- no_error_log
[error]
[alert]
[crit]



=== TEST 10: all servers refuse connections: 502
--- main_config
load_module $TEST_NGINX_MODULE;
--- http_config
upstream llm {
    prefix_route zone=llm:1m;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_1 max_fails=1 fail_timeout=10s;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_2 max_fails=1 fail_timeout=10s;
}
--- config
location /v1/ {
    proxy_pass http://llm;
    add_header X-Prefix-Route "$prefix_route_status $prefix_route_match $prefix_route_length" always;
    add_header X-Upstream-Status $upstream_status always;
}
--- request eval
"POST /v1/chat/completions\n" . main::chat(1)
--- error_code: 502
--- response_headers_like
X-Prefix-Route: MISS 0 \d+
X-Upstream-Status: 502, 502
--- error_log
connect() failed (111: Connection refused) while connecting to upstream
upstream server temporarily disabled while connecting to upstream
--- no_error_log
no live upstreams
[alert]
[crit]



=== TEST 11: then, with both servers disabled, 502 at once with "no live upstreams"
The same nginx as the previous test (no --- config: it keeps running).
--- request eval
"POST /v1/chat/completions\n" . main::chat(2)
--- error_code: 502
--- response_headers_like
X-Upstream-Status: 502
--- error_log
no live upstreams while connecting to upstream
--- no_error_log
connect() failed
[alert]
[crit]
