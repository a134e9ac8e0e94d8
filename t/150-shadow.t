# Shadow mode (prefix_route ... shadow): the balancer configured before
# prefix_route (round robin when none) chooses every server; prefix_route
# reads each body, records which server received each prefix, and notes
# what it would have chosen.  Each request's X-Prefix-Route header says
# its status (for the server the configured balancer chose), its match
# there, the longest match on any server, and the match on the server
# prefix_route would have chosen.
use Test::Nginx::Socket 'no_plan';
use FindBin;
use lib $FindBin::Bin;
use PrefixRoute qw(:DEFAULT chat_body sys user text);

our $Sleep = "location = /sleep { echo_sleep \$arg_s; echo slept; }\n";

our $Header = '$prefix_route_status $prefix_route_match $prefix_route_longest '
            . '$prefix_route_predicted';

# upstream llm over the 4 backends, "prefix_route zone=llm:1m shadow"
# after the directives $before (a balancer) and before $after
sub shadowed {
    my ($before, $after) = @_;
    my $u = ::upstream("zone=llm:1m shadow", 1 .. 4);
    $u =~ s/(    prefix_route )/    $before\n$1/ if defined $before;
    $u =~ s/\n}\n\z/\n    $after\n}\n/ if defined $after;
    return $u . ::backends(1 .. 4);
}

# one long prompt, the same each time
sub ask {
    my ($query) = @_;
    return "POST /v1/chat/completions" . ($query // "") . "\n"
         . ::chat_body([::sys(::text("Shadow system prompt", 1200)),
                        ::user("the same question")]);
}

our $Status = "location = /status {\n    prefix_route_status;\n}\n";

add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value(main_config => $LoadModule) unless defined $block->main_config;
    $block->set_value(config => ::proxy(header => $Header) . $Status)
        unless defined $block->config;
    $block->set_value(no_error_log => $NoErrorLog) unless defined $block->no_error_log
                                                         || defined $block->must_die;
    return $block;
});

no_shuffle();
run_tests();

__DATA__

=== TEST 1: shadow over round robin: the same prompt goes round the 4 servers as without prefix_route, which says each time that it would have sent it where it was first
The first request is a MISS; each later one goes to a server that holds
nothing of it (SPILL 0), while the longest match and the one on
prefix_route's choice are the whole prompt's blocks.
--- http_config eval: ::shadowed()
--- request eval
[::ask(), ::ask(), ::ask(), ::ask(), "GET /status?format=json"]
--- response_body_like eval
["^b1\n\\z", "^b2\n\\z", "^b3\n\\z", "^b4\n\\z",
 '"matched_bytes":0,"longest_bytes":[1-9]\d*,"predicted_bytes":[1-9]\d*,"reusable":3,"jansson_bodies":0,"parse_stopped":0,"predicted_tokens":0,"reported_tokens":0,"shadow":1,"fail_open":0,"zone_started":\d+,"requests":\{"BYPASS":0,"MISS":1,"HIT":0,"SPILL":3,"NONE":0\}']
--- response_headers_like eval
["X-Prefix-Route: MISS 0 0 0",
 ("X-Prefix-Route: SPILL 0 ([1-9]\\d*) \\1") x 3, ""]



=== TEST 2: the same four requests without shadow all go where the prompt is
--- http_config eval: ::upstream(1 .. 4) . ::backends(1 .. 4)
--- request eval
[::ask(), ::ask(), ::ask(), ::ask(), "GET /status?format=json"]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 0 0",
 ("X-Prefix-Route: HIT ([1-9]\\d*) \\1 \\1") x 3, ""]
--- response_body_like eval
[qr/^b\d\n\z/, qr/^b\d\n\z/, qr/^b\d\n\z/, qr/^b\d\n\z/,
 '"reusable":3,"jansson_bodies":0,"parse_stopped":0,"predicted_tokens":0,"reported_tokens":0,"shadow":0,"fail_open":0,"zone_started":\d+,"requests":\{"BYPASS":0,"MISS":1,"HIT":3,"SPILL":0,"NONE":0\}']



=== TEST 3: shadow over "hash $arg_user": each user stays on its server whatever its prompt, and prefix_route sees where the prompt went
Users a and b share one prompt; a's second request finds it where a's
first left it (HIT), b's goes where the hash sends b.
--- http_config eval: ::shadowed('hash $arg_user;')
--- request eval
[::ask("?user=a"), ::ask("?user=a"), ::ask("?user=b"), ::ask("?user=b")]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 0 0", "X-Prefix-Route: HIT ([1-9]\\d*) \\1 \\1",
 "X-Prefix-Route: (?:HIT|SPILL) \\d+ ([1-9]\\d*) \\1",
 "X-Prefix-Route: HIT ([1-9]\\d*) \\1 \\1"]



=== TEST 4: shadow over least_conn, with keepalive after it: requests are served and counted
--- http_config eval: ::shadowed('least_conn;', 'keepalive 8;')
--- request eval
[::ask(), ::ask(), "GET /status?format=json"]
--- response_body_like eval
["^b[1-4]\n\\z", "^b[1-4]\n\\z",
 '"reported_tokens":0,"shadow":1,"fail_open":0,"zone_started":\d+,"requests":\{"BYPASS":0,"MISS":1,"HIT":\d,"SPILL":\d,"NONE":0\}']



=== TEST 5: a request without a prompt is balanced by the configured balancer too (BYPASS)
--- http_config eval: ::shadowed('hash $arg_user;')
--- request eval
["GET /v1/models?user=a", "GET /v1/models?user=a", "GET /status?format=json"]
--- response_headers_like eval
["X-Prefix-Route: BYPASS 0 0 0", "X-Prefix-Route: BYPASS 0 0 0", ""]
--- response_body_like eval
[qr/^b\d\n\z/, qr/^b\d\n\z/, '"requests":\{"BYPASS":2,"MISS":0,"HIT":0,"SPILL":0,"NONE":0\}']



=== TEST 6: another balancer after prefix_route replaces it, shadow or not: an error
--- http_config eval: ::shadowed(undef, 'least_conn;')
--- must_die
--- error_log eval
qr/another load balancing method replaces "prefix_route" in upstream "llm" in \S+: it follows "prefix_route" in \S+nginx\.conf:\d+; a method left in charge in shadow mode goes before "prefix_route"/



=== TEST 7: a balancer before prefix_route without shadow: an error that names the way out
--- http_config eval
my $u = ::upstream("zone=llm:1m", 1 .. 4);
$u =~ s/(    prefix_route )/    least_conn;\n$1/;
$u
--- must_die
--- error_log
"prefix_route" directive follows "keepalive" or a load balancing method ("least_conn", "hash", "random"...): put "prefix_route" first in the upstream ("shadow" instead leaves such a method in charge, prefix_route only watching it)



=== TEST 8: a retry the configured balancer finds no server for is a MISS of nothing, whatever the first attempt matched
Round robin sends the prompt to b2 first, which refuses and is disabled,
then to b1, which answers and holds it.  The second request goes to b1,
a HIT, whose 502 is retried: b1 tried, b2 disabled, round robin finds no
live upstream.  That request is logged and counted a MISS of 0 bytes,
not b1's HIT.
--- http_config eval
::upstream("zone=llm:1m shadow", "2 max_fails=1 fail_timeout=10s", "1 max_fails=1 fail_timeout=10s")
. "server {\n    listen " . ::addr(1) . ";\n    location /flaky/ { return 502; }\n"
. "    location / { return 200 \"b1\\n\"; }\n}\n"
--- config eval
"proxy_next_upstream error timeout http_502 non_idempotent;\n"
. ::proxy(header => $::Header) . ::proxy(path => "/flaky/", header => $::Header) . $::Status
--- request eval
["POST /v1/chat/completions\n" . ::chat_body([::user(::text("Shadow retry", 600))]),
 "POST /flaky/chat/completions\n" . ::chat_body([::user(::text("Shadow retry", 600))]),
 "GET /status?format=json"]
--- error_code eval
[200, 502, 200]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 0 \\d+", "X-Prefix-Route: NONE 0 0 0", ""]
--- response_body_like eval
["^b1\n\\z", "502 Bad Gateway",
 '"prompt_bytes":\d+,"matched_bytes":0,"longest_bytes":0,.*"requests":\{"BYPASS":0,"MISS":1,"HIT":0,"SPILL":0,"NONE":1\}']
--- no_error_log
[alert]
[crit]



=== TEST 9: the HTML page charts the last minutes: the hit rate, the current balancer's against prefix_route's prediction, requests by status, and each server's work
The zone samples its figures every 10 s, at a worker's first sweep (once
a second) in each interval: after 12 s at least one interval holds the
requests, and prefix_route's prediction has a point there.
--- main_config eval: $::LoadModule . $::LoadEcho
--- config eval: ::proxy(header => $::Header) . $::Status . $::Sleep
--- http_config eval: ::shadowed()
--- timeout: 20
--- request eval
["GET /status?format=html", "GET /sleep?s=1.5", ::ask(), ::ask(), ::ask(),
 "GET /sleep?s=12", "GET /status?format=html"]
--- response_body_like eval
[qr{<p>Charts of the last 30 minutes, a point every 10 s, from the second sample on.</p>},
 "slept", "b1", "b2", "b3", "slept",
 qr{<figure><figcaption><b>hit rate</b> <span style="color:#1f77b4">&#9632; prompt bytes matched</span> <span style="color:#ff7f0e">&#9632; engines' cached tokens</span> <span style="color:#2ca02c">&#9632; predicted by prefix_route</span></figcaption><svg [^>]*><g [^>]*><text [^>]*>100\.0%</text><text [^>]*>-3 min</text><text [^>]*>now</text></g><path fill="none" stroke="#1f77b4" d="[^"]*"/><path fill="none" stroke="#ff7f0e" d=""/><path fill="none" stroke="#2ca02c" d="(?: [ML][\d.]+ [\d.]+)+"/></svg></figure>\n<figure><figcaption><b>requests</b> .*?</svg></figure>\n<figure><figcaption><b>in flight</b> .*?&#9632; 127\.0\.0\.1:\d+</span>.*</svg></figure>\n<figure><figcaption><b>queued</b> }s]



=== TEST 10: a retried request's would-be prediction does not match what its failed attempt recorded
b1 answers every request with a 502 and is never disabled; round robin
retries those on b2.  Eight new prompts: each is a MISS of nothing on the
server that answers, and prefix_route would have found nothing of it
anywhere, retried or not.
--- http_config eval
::upstream("zone=llm:1m shadow", "1 max_fails=0", 2)
. "server {\n    listen " . ::addr(1) . ";\n    return 502;\n}\n" . ::backends(2)
--- config eval
"proxy_next_upstream error timeout http_502 non_idempotent;\n"
. ::proxy(header => $::Header) . $::Status
--- request eval
[map { "POST /v1/chat/completions\n" . ::chat_body([::user(::text("Shadow retry $_", 600))]) } 1 .. 8]
--- response_headers_like eval
[("X-Prefix-Route: MISS 0 0 0") x 8]
--- response_body_like eval
[("^b2\n\\z") x 8]
--- no_error_log
[alert]
[crit]
