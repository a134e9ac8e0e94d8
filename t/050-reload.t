# The prefix index lives in a shared memory zone that nginx keeps across a
# reload when its name and size do not change, and servers are known by
# their address: affinity survives "nginx -s reload", also when the server
# list is reordered; a new zone size starts an empty index.
#
# HUP mode: each block reloads the running nginx (master process on) instead
# of starting a new one, so the blocks share the zone and must run in order.
# The backends listen on fixed ports, so that their names stay the same from
# one block to the next.  On a fresh zone with idle backends the choice is a
# hash of the prompt and the server names: the backends written below are
# what that gives (found by running the tests); four distinct prompts sent
# one after another spread over the four backends.
#
# Each block's http_config is its upstream llm and the backends b1..b4 on
# ports 19101..19104, written with upstream() and backends() of
# t/PrefixRoute.pm: upstream("zone=llm:2m", 3, 1, 4, 2) is prefix_route
# zone=llm:2m over backends b3, b1, b4, b2 in that order.  Every block proxies
# /v1/ to llm and shows the routing variables in X-Prefix-Route, waits for
# the old workers (see wait_for_old_workers() in t/PrefixRoute.pm), and checks that error.log
# has no [error], [alert] or [crit] line.
use Test::Nginx::Socket 'no_plan';
use FindBin;
use lib $FindBin::Bin;
use PrefixRoute;

$PrefixRoute::FixedPort = 19100;

add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value(main_config => $LoadModule) unless defined $block->main_config;
    $block->set_value(init => "PrefixRoute::wait_for_old_workers();") unless defined $block->init;
    $block->set_value(config => proxy()) unless defined $block->config;
    $block->set_value(no_error_log => $NoErrorLog) unless defined $block->no_error_log;
    return $block;
});

# four distinct prompts of about 1 KB
sub chat {
    my $name = shift;
    my $text = "Conversation $name: let us talk about topic $name at length. " x 16;
    return "POST /v1/chat/completions\n"
           . "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"$text\"}]}";
}

use_hup();
no_shuffle();
run_tests();

__DATA__

=== TEST 1: a fresh zone: four distinct prompts A, B, C, D are MISSes spread over the four backends
--- http_config eval: ::upstream("zone=llm:1m", 1 .. 4) . ::backends(1 .. 4)
--- request eval
[map { main::chat($_) } qw(A B C D)]
--- response_headers_like eval
[("X-Prefix-Route: MISS 0 \\d+") x 4]
--- response_body eval
["b1\n", "b2\n", "b4\n", "b3\n"]



=== TEST 2: after a reload with the same zone, D, C, B, A are HITs on the same backends as before
--- http_config eval: ::upstream("zone=llm:1m", 1 .. 4) . ::backends(1 .. 4)
--- request eval
[map { main::chat($_) } qw(D C B A)]
--- response_headers_like eval
[("X-Prefix-Route: HIT [1-9]\\d* \\d+") x 4]
--- response_body eval
["b3\n", "b4\n", "b2\n", "b1\n"]



=== TEST 3: a new zone size starts an empty index: D, C, B, A are MISSes
The same requests as the previous test on an empty index are MISSes, which
shows that the previous test's HITs came from the index kept across the
reload; on an idle fleet they go by their rank and each backend's share
of the index, in this order: D first now.
--- http_config eval: ::upstream("zone=llm:2m", 1 .. 4) . ::backends(1 .. 4)
--- request eval
[map { main::chat($_) } qw(D C B A)]
--- response_headers_like eval
[("X-Prefix-Route: MISS 0 \\d+") x 4]
--- response_body eval
["b3\n", "b2\n", "b1\n", "b1\n"]



=== TEST 4: after a reload with the server list reordered, the prompts are HITs on the same backends
Servers are known by their address, not their position: A, B, C, D go
where the previous test sent them (b1, b1, b2, b3).
--- http_config eval: ::upstream("zone=llm:2m", 3, 1, 4, 2) . ::backends(1 .. 4)
--- request eval
[map { main::chat($_) } qw(A B C D)]
--- response_headers_like eval
[("X-Prefix-Route: HIT [1-9]\\d* \\d+") x 4]
--- response_body eval
["b1\n", "b1\n", "b2\n", "b3\n"]



=== TEST 5: after a reload without one server, its prompt is a MISS elsewhere and the others stay HITs
D was on b3, which is gone: it is a MISS on another backend; A, B, C stay
on b1, b1, b2.
--- http_config eval: ::upstream("zone=llm:2m", 1, 2, 4) . ::backends(1 .. 4)
--- request eval
[map { main::chat($_) } qw(A B C D)]
--- response_headers_like eval
[("X-Prefix-Route: HIT [1-9]\\d* \\d+") x 3, "X-Prefix-Route: MISS 0 \\d+"]
--- response_body_like eval
["^b1\n\\z", "^b1\n\\z", "^b2\n\\z", "^b[124]\n\\z"]
