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
use PrefixRoute qw(:DEFAULT chat chat_body user text);

no_shuffle();

add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value(main_config => $LoadModule) unless defined $block->main_config;
    return $block;
});

# a chat request whose prompt is $len bytes of text tagged $tag
sub prompt { chat([user(text(@_))]) }

# location /flood: $n distinct 2 KB prompts one after the other (echo
# module), the files of flood_files($n), then 1.5 s for the module's sweep
# (once a second) before the answer ends.  One request, so that the
# sweep's warn falls in it.  With nginx 1.30.4 the echo module's 200
# subrequests never end, through round robin and without this module
# alike (1.26.3 is fine): the blocks that use it skip nginx 1.27 and later
# (seen 2026-12-08).
sub flood {
    my $n = shift;
    return "location = /flood {\n"
         . join("", map { "    echo_subrequest POST /v1/chat/completions"
                          . " -f \$TEST_NGINX_SERVER_ROOT/html/p$_.json;\n" }
                    1 .. $n)
         . "    echo_sleep 1.5;\n    echo slept;\n}\n";
}

sub flood_files {
    return join "", map { ">>> p$_.json\n" . chat_body([user(text("prompt$_", 2048))]) . "\n" }
                    1 .. $_[0];
}

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



=== TEST 5: a zone too small for capacity= says so in the error log, with the size it would take
TEST 1's flood, from one request (/flood), on a zone whose capacity=
(1m, one server) needs about 1 MiB: the sweep (once a second) logs a
warning naming the zone, the pairs it evicted and the size docs/tuning.md
gives, servers x capacity / block x 64 bytes x 1.04.
--- skip_nginx: 5: >= 1.27.0
--- main_config eval: $::LoadModule . $::LoadEcho
--- http_config eval: ::upstream("zone=llm:128k capacity=1m", 1) . ::backends(1)
--- config eval: ::proxy() . ::flood(200)
--- user_files eval: ::flood_files(200)
--- request
GET /flood
--- response_body_like: \A(?:b1\n){200}slept\n\z
--- error_log eval
qr/\[warn\] .*prefix_route: zone "llm" of 128 KiB is full: it evicted [1-9]\d* \(block, server\) pairs, prefixes the engines may still hold; servers \(1\) x capacity \(1048576 bytes\) take about 1064 KiB \(docs\/tuning\.md, "Zone size"\)/
--- no_error_log
[error]
[crit]



=== TEST 6: the same flood says nothing with capacity=0, where the zone is the limit chosen
--- skip_nginx: 4: >= 1.27.0
--- main_config eval: $::LoadModule . $::LoadEcho
--- http_config eval: ::upstream("zone=llm:128k capacity=0", 1) . ::backends(1)
--- config eval: ::proxy() . ::flood(200)
--- user_files eval: ::flood_files(200)
--- request
GET /flood
--- response_body_like: \A(?:b1\n){200}slept\n\z
--- no_error_log
is full
[error]



=== TEST 7: nor where capacity= is what forgets: a 1m zone, capacity=16k
256 blocks for the one server, about 17 KiB of zone: the server forgets
its least recently used blocks (TEST 2), the zone evicts nothing, and the
last prompt is still a HIT.
--- skip_nginx: 9: >= 1.27.0
--- main_config eval: $::LoadModule . $::LoadEcho
--- http_config eval: ::upstream("zone=llm:1m capacity=16k", 1) . ::backends(1)
--- config eval: ::proxy(header => '$prefix_route_status') . ::flood(200)
--- user_files eval: ::flood_files(200)
--- request eval
["GET /flood", ::prompt("prompt200", 2048)]
--- response_body_like eval
["\\A(?:b1\n){200}slept\n\\z", "\\Ab1\n\\z"]
--- response_headers eval
["", "X-Prefix-Route: HIT"]
--- no_error_log
is full
[error]
