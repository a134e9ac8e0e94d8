# The index under memory pressure and the per-peer capacity: a zone of the
# minimum size flooded with distinct prompts keeps routing and forgets the
# least recently used prefixes; a peer's capacity makes the index forget
# that peer's least recently used blocks, as its own KV cache would.
#
# One backend only, so every prompt lands on it and what the index still
# holds shows in $prefix_route_status: HIT (remembered) or MISS (forgotten).
use Test::Nginx::Socket 'no_plan';
use JSON::PP ();

no_shuffle();

our $JSON = JSON::PP->new->canonical(1);

# a chat request whose prompt is about $len bytes of text tagged $tag
sub chat {
    my ($tag, $len) = @_;
    my ($s, $i) = ("", 0);
    $s .= "$tag w" . $i++ . " " while length $s < $len;
    return "POST /v1/chat/completions\n"
           . $JSON->encode({ model => "m",
                             messages => [{ role => "user",
                                            content => substr $s, 0, $len }]});
}

our $FLEET = <<'CONF';
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_1; location / { return 200 "b1\n"; } }
CONF

our $LOCATION = <<'CONF';
location /v1/ {
    proxy_pass http://llm;
    add_header X-Prefix-Route "$prefix_route_status" always;
}
CONF

our $MATCH = <<'CONF';
location /v1/ {
    proxy_pass http://llm;
    add_header X-Prefix-Route "$prefix_route_status $prefix_route_match" always;
}
CONF

run_tests();

__DATA__

=== TEST 1: a 128k zone flooded with 200 distinct 2 KB prompts serves every request and keeps the newest
200 prompts of 32 blocks need about 800 KB of index (128 bytes a block):
the zone holds a small part of it.  The newest prompt is still a HIT, the
first one was forgotten (MISS); no request fails and nothing is logged
above info by the module, nor "no memory" by the slab allocator.
--- main_config
load_module $TEST_NGINX_MODULE;
--- http_config eval
"upstream llm {\n    prefix_route zone=llm:128k capacity=0;\n"
. "    server 127.0.0.1:\$TEST_NGINX_RAND_PORT_1;\n}\n" . $::FLEET
--- config eval: $::LOCATION
--- request eval
[(map { ::chat("prompt$_", 2048) } 1 .. 200),
 ::chat("prompt200", 2048), ::chat("prompt1", 2048)]
--- error_code eval
[(200) x 202]
--- response_headers eval
[("X-Prefix-Route: MISS") x 200, "X-Prefix-Route: HIT", "X-Prefix-Route: MISS"]
--- no_error_log
[error]
[crit]
[alert]
no memory



=== TEST 2: capacity= forgets a peer's least recently used blocks
capacity=4k is 64 blocks of 64 bytes.  Each prompt is 1907 bytes of
canonical prompt, 29 full blocks (1856 bytes): two fit, a third (87
blocks) pushes out the 23 least recently used.  A is used again after B,
so C evicts B's deepest 23 blocks, and B keeps its first 6 (384 bytes):
the index forgets the end of a prefix first.
--- main_config
load_module $TEST_NGINX_MODULE;
--- http_config eval
"upstream llm {\n    prefix_route zone=llm:1m capacity=4k;\n"
. "    server 127.0.0.1:\$TEST_NGINX_RAND_PORT_1;\n}\n" . $::FLEET
--- config eval: $::MATCH
--- request eval
[::chat("A", 1900), ::chat("B", 1900), ::chat("A", 1900),
 ::chat("C", 1900), ::chat("A", 1900), ::chat("C", 1900), ::chat("B", 1900)]
--- response_headers eval
["X-Prefix-Route: MISS 0", "X-Prefix-Route: MISS 0", "X-Prefix-Route: HIT 1856",
 "X-Prefix-Route: MISS 0", "X-Prefix-Route: HIT 1856", "X-Prefix-Route: HIT 1856",
 "X-Prefix-Route: HIT 384"]
--- no_error_log
[error]



=== TEST 3: without capacity= (0) the same sequence keeps all three prompts
--- main_config
load_module $TEST_NGINX_MODULE;
--- http_config eval
"upstream llm {\n    prefix_route zone=llm:1m capacity=0;\n"
. "    server 127.0.0.1:\$TEST_NGINX_RAND_PORT_1;\n}\n" . $::FLEET
--- config eval: $::MATCH
--- request eval
[::chat("A", 1900), ::chat("B", 1900), ::chat("A", 1900),
 ::chat("C", 1900), ::chat("A", 1900), ::chat("C", 1900), ::chat("B", 1900)]
--- response_headers eval
["X-Prefix-Route: MISS 0", "X-Prefix-Route: MISS 0", "X-Prefix-Route: HIT 1856",
 "X-Prefix-Route: MISS 0", "X-Prefix-Route: HIT 1856", "X-Prefix-Route: HIT 1856",
 "X-Prefix-Route: HIT 1856"]
--- no_error_log
[error]



=== TEST 4: a prompt longer than the zone can index is recorded in part and still routed
A 64 KB prompt is 1024 blocks, 128 KB of index: more than a 128k zone
holds.  It is recorded up to what fits, so its repeat is a HIT on a
prefix of it, and both requests succeed.
--- main_config
load_module $TEST_NGINX_MODULE;
--- http_config eval
"upstream llm {\n    prefix_route zone=llm:128k capacity=0;\n"
. "    server 127.0.0.1:\$TEST_NGINX_RAND_PORT_1;\n}\n" . $::FLEET
--- config
location /v1/ {
    client_body_buffer_size 1m;
    proxy_pass http://llm;
    add_header X-Prefix-Route "$prefix_route_status $prefix_route_match $prefix_route_length" always;
}
--- request eval
[::chat("long", 65536), ::chat("long", 65536)]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 65536", "X-Prefix-Route: HIT [1-9]\\d* 65536"]
--- no_error_log
[error]
[crit]
no memory
