# A repeated system prompt keeps going to the backend that holds it.
use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__

=== TEST 1: the second request with the same system prompt is a HIT on the same backend
--- main_config
load_module $TEST_NGINX_MODULE;
--- http_config
upstream llm {
    prefix_route zone=llm:1m;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_2;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_3;
}
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_1; return 200 "b1\n"; }
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_2; return 200 "b2\n"; }
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_3; return 200 "b3\n"; }
--- config
location /v1/ {
    proxy_pass http://llm;
    add_header X-Prefix-Route "$prefix_route_status $prefix_route_match $prefix_route_length";
}
--- request eval
my $sys = "You are a terse assistant. " x 20;
[map { "POST /v1/chat/completions\n{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"$sys\"},{\"role\":\"user\",\"content\":\"q$_\"}]}" } 1 .. 2]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: HIT 5\\d\\d \\d+"]
--- response_body_like eval
["^b\\d\$", "^b\\d\$"]
--- no_error_log
[error]
