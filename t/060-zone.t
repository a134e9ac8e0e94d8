# The index under memory pressure and the per-peer capacity: a zone of the
# minimum size flooded with distinct prompts keeps routing and forgets the
# least recently used prefixes; a peer's capacity makes the index forget
# that peer's least recently used blocks, as its own KV cache would.
#
# One backend only, so every prompt lands on it and what the index still
# holds shows in $prefix_route_status: HIT (remembered) or MISS (forgotten).
#
# Each block's upstream llm is written with upstream() of t/PrefixRoute.pm:
# upstream("zone=llm:1m capacity=4k", 1) is "prefix_route zone=llm:1m
# capacity=4k;" over backend b1.  Every block loads the module.
use Test::Nginx::Socket 'no_plan';
use FindBin;
use lib $FindBin::Bin;
use PrefixRoute qw(:DEFAULT chat user text);

no_shuffle();

add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value(main_config => $LoadModule) unless defined $block->main_config;
    return $block;
});

# a chat request whose prompt is $len bytes of text tagged $tag
sub prompt { chat([user(text(@_))]) }

run_tests();

__DATA__

=== TEST 1: a 128k zone flooded with 200 distinct 2 KB prompts serves every request and keeps the newest
200 prompts of 32 blocks need about 800 KB of index (128 bytes a block):
the zone holds a small part of it.  The newest prompt is still a HIT, the
first one was forgotten (MISS); no request fails and nothing is logged
above info by the module, nor "no memory" by the slab allocator.
--- http_config eval: ::upstream("zone=llm:128k capacity=0", 1) . ::backends(1)
--- config eval: ::proxy(header => '$prefix_route_status')
--- request eval
[(map { ::prompt("prompt$_", 2048) } 1 .. 200),
 ::prompt("prompt200", 2048), ::prompt("prompt1", 2048)]
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
--- http_config eval: ::upstream("zone=llm:1m capacity=4k", 1) . ::backends(1)
--- config eval: ::proxy(header => '$prefix_route_status $prefix_route_match')
--- request eval
[map { ::prompt($_, 1900) } qw(A B A C A C B)]
--- response_headers eval
["X-Prefix-Route: MISS 0", "X-Prefix-Route: MISS 0", "X-Prefix-Route: HIT 1856",
 "X-Prefix-Route: MISS 0", "X-Prefix-Route: HIT 1856", "X-Prefix-Route: HIT 1856",
 "X-Prefix-Route: HIT 384"]
--- no_error_log
[error]



=== TEST 3: without capacity= (0) the same sequence keeps all three prompts
--- http_config eval: ::upstream("zone=llm:1m capacity=0", 1) . ::backends(1)
--- config eval: ::proxy(header => '$prefix_route_status $prefix_route_match')
--- request eval
[map { ::prompt($_, 1900) } qw(A B A C A C B)]
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
--- http_config eval: ::upstream("zone=llm:128k capacity=0", 1) . ::backends(1)
--- config eval: ::proxy(add => "client_body_buffer_size 1m;")
--- request eval
[::prompt("long", 65536), ::prompt("long", 65536)]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 65536", "X-Prefix-Route: HIT [1-9]\\d* 65536"]
--- no_error_log
[error]
[crit]
no memory
