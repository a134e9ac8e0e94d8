# nginx's failure semantics are kept: down, backup, max_fails/fail_timeout,
# max_conns, proxy_next_upstream retries to an untried server, and 502 when
# no server is usable.
#
# Several tests give the server under test a high weight: the cost model
# divides by the weight, so on an idle fleet that server is the first choice
# for any new prompt, and only the failure rule under test can keep a request
# away from it.
#
# Each block's http_config is its upstream llm, written with upstream() of
# t/PrefixRoute.pm: upstream(1, 2, "3 weight=100 backup") is prefix_route
# zone=llm:1m over backends 1, 2 and 3, the third with "weight=100 backup";
# and the backends that listen, backends(1, 2, 3): a backend not listed
# refuses connections.  Every block that starts nginx (that has an
# http_config) proxies /v1/ to llm and shows the routing variables in
# X-Prefix-Route and $upstream_status in X-Upstream-Status, and checks that
# error.log has no [error], [alert] or [crit] line, unless it says otherwise.
use Test::Nginx::Socket 'no_plan';
use FindBin;
use lib $FindBin::Bin;
use PrefixRoute;

# the proxy location of a block, at $path
sub location {
    my $path = shift // "/v1/";
    return proxy(path => $path, add => 'add_header X-Upstream-Status $upstream_status always;');
}

# a block without an http_config keeps the nginx of the previous block running
add_block_preprocessor(sub {
    my $block = shift;
    return $block unless defined $block->http_config;
    $block->set_value(main_config => $LoadModule . $LoadEcho) unless defined $block->main_config;
    $block->set_value(config => location()) unless defined $block->config;
    $block->set_value(no_error_log => $NoErrorLog) unless defined $block->no_error_log;
    return $block;
});

# b1 answers /flaky/ with 502 and anything else with its name
our $FlakyB1 = <<'_EOC_';
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_1; location /flaky/ { return 502; } location / { return 200 "b1\n"; } }
_EOC_

# b1 answers 500 to a request with "?fail=1" and its name to any other
our $FailB1 = <<'_EOC_';
server {
    listen 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
    location / {
        if ($arg_fail) {
            return 500;
        }
        return 200 "b1\n";
    }
}
_EOC_

# the text of chat($i): about 1 KB, different for each $i
sub chat_text {
    my $i = shift;
    return "Question $i: tell me something about the number $i, in detail. " x 16;
}

# an OpenAI chat body with the prompt chat_text($i)
sub chat {
    my $text = chat_text(shift);
    return "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"$text\"}]}";
}

no_shuffle();
run_tests();

__DATA__

=== TEST 1: a down server is never chosen, even with the highest weight
--- http_config eval
::upstream(1, 2, 3, "4 weight=100 down") . ::backends(1 .. 4)
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
--- http_config eval
::upstream(1, 2, "3 weight=100 backup") . ::backends(1, 2, 3)
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
--- http_config eval
::upstream("1 down", "2 down", "3 backup", "4 backup weight=10") . ::backends(1 .. 4)
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
--- http_config eval
::upstream("1 max_fails=1 fail_timeout=10s", "2 max_fails=1 fail_timeout=10s", "3 backup") . ::backends(3)
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
--- http_config eval
::upstream("1 weight=10 max_fails=1 fail_timeout=10s", 2, 3) . ::backends(2, 3)
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
--- http_config eval
::upstream("1 weight=10 max_fails=1 fail_timeout=10s", 2, 3) . ::backends(2, 3)
--- request eval
[map { "POST /v1/chat/completions\n" . main::chat($_) } 1, 1, 2, 3, 1]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 \\d+\nX-Upstream-Status: 502, 200",
 "X-Prefix-Route: HIT [1-9]\\d* \\d+\nX-Upstream-Status: 200",
 "X-Prefix-Route: MISS 0 \\d+\nX-Upstream-Status: 200",
 "X-Prefix-Route: MISS 0 \\d+\nX-Upstream-Status: 200",
 "X-Prefix-Route: HIT [1-9]\\d* \\d+\nX-Upstream-Status: 200"]
--- response_body_like eval
[("^b[23]\n\\z") x 5]
--- no_error_log
[alert]
[crit]



=== TEST 7: a server the prompt never reached is not recorded as holding it
Without max_fails the refusing server b1 stays usable.  The first request
chooses it (weight), fails over to b2 or b3, and b1's record of the prompt
is taken back: the repeat goes straight to the server that answered (HIT,
one attempt), not to b1 again.
--- http_config eval
::upstream("1 weight=10 max_fails=0", 2, 3) . ::backends(2, 3)
--- request eval
[map { "POST /v1/chat/completions\n" . main::chat($_) } 1, 1]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 \\d+\nX-Upstream-Status: 502, 200",
 "X-Prefix-Route: HIT [1-9]\\d* \\d+\nX-Upstream-Status: 200"]
--- response_body_like eval
[("^b[23]\n\\z") x 2]
--- no_error_log
[alert]
[crit]



=== TEST 8: a holder that fails with 502 is retried away from (proxy_next_upstream http_502 non_idempotent), then the prompt sticks to the new server
b1 answers /v1/ but fails /flaky/ with 502.  The prompt goes to b1 (weight),
then /flaky/ fails on b1 and is retried on another server, which answers;
b1 is disabled (max_fails=1), so the prompt now is a HIT on that server.
A POST is retried after a 502 only with non_idempotent (nginx's rule).
--- http_config eval
::upstream("1 weight=10 max_fails=1 fail_timeout=10s", 2, 3) . $::FlakyB1 . ::backends(2, 3)
--- config eval
"proxy_next_upstream error timeout http_502 non_idempotent;\n" . ::location("/v1/") . ::location("/flaky/")
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



=== TEST 9: without non_idempotent a POST that got a 502 is not retried, and the server is not disabled
nginx passes a POST to the next server after a 502 only with
non_idempotent (ngx_http_upstream_test_next()): the 502 reaches the client,
b1 is not counted as failed and keeps the prompt.
--- http_config eval
::upstream("1 weight=10 max_fails=1 fail_timeout=10s", 2, 3) . $::FlakyB1 . ::backends(2, 3)
--- config eval
"proxy_next_upstream error timeout http_502;\n" . ::location("/v1/") . ::location("/flaky/")
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



=== TEST 10: max_conns: a server at its limit is skipped for a concurrent request
b1 (weight 10, max_conns=1) would take both prompts if it could; the two
subrequests run at the same time and each backend answers after 0.3 s, so
the second finds b1 busy and goes to b2.  A later prompt goes to b1 again.
--- http_config eval
::upstream("1 weight=10 max_conns=1", 2) . ::backends({ sleep => 0.3 }, 1, 2)
--- config eval
::location() . ::fan("/both", main::chat(1), main::chat(2))
--- request eval
["GET /both", "POST /v1/chat/completions\n" . main::chat(3)]
--- response_body eval
["b1\nb2\n", "b1\n"]



=== TEST 11: all servers refuse connections: 502
--- http_config eval
::upstream("1 max_fails=1 fail_timeout=10s", "2 max_fails=1 fail_timeout=10s")
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



=== TEST 12: then, with both servers disabled, 502 at once with "no live upstreams", and NONE
The first request finds both servers refusing (two attempts, as in TEST
11) and disables them; the second tries none: a single 502, from the
upstream's name rather than a server's address, as nginx reports "no
live upstreams".  Its routing status is NONE, not a MISS: the fleet was
not short of the prompt, it was down.
--- http_config eval
::upstream("1 max_fails=1 fail_timeout=10s", "2 max_fails=1 fail_timeout=10s")
--- config eval
::proxy(add => 'add_header X-Upstream-Status $upstream_status always; '
             . 'add_header X-Upstream-Addr $upstream_addr always;')
--- request eval
["POST /v1/chat/completions\n" . main::chat(1),
 "POST /v1/chat/completions\n" . main::chat(2)]
--- error_code eval
[502, 502]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 \\d+\nX-Upstream-Status: 502, 502\nX-Upstream-Addr: 127\\.0\\.0\\.1:\\d+, 127\\.0\\.0\\.1:\\d+",
 "X-Prefix-Route: NONE 0 \\d+\nX-Upstream-Status: 502\nX-Upstream-Addr: llm"]
--- no_error_log
[alert]
[crit]



=== TEST 13: a response that is not 2xx leaves no prefix recorded: the same prompt is a MISS again, then a HIT after a 200
The server answers an unknown path with 404, as an engine answers a path or
model it does not serve: it never processed the prompt, so the index must
not believe it holds it.
--- http_config eval
::upstream(1) . <<'_EOC_'
server {
    listen 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
    location /v1/missing { return 404; }
    location /v1/broken { return 500; }
    location / { return 200 "b1\n"; }
}
_EOC_
--- request eval
["POST /v1/missing\n" . main::chat(13), "POST /v1/broken\n" . main::chat(13),
 "POST /v1/chat/completions\n" . main::chat(13),
 "POST /v1/chat/completions\n" . main::chat(13)]
--- error_code eval
[404, 500, 200, 200]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: MISS 0 \\d+",
 "X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: HIT [1-9]\\d* \\d+"]



=== TEST 14: a retry that finds no server left is NONE, whatever the first attempt matched
b2 (weight 10) refuses and is disabled by the first request, which b1
then answers and holds.  The second, the same prompt, is a HIT on b1,
whose 502 is retried: b1 tried, b2 disabled, nginx answers "no live
upstreams".  That request is logged and counted as README says, NONE
with 0 bytes matched, not as its first attempt's HIT.
--- http_config eval
::upstream("1 max_fails=1 fail_timeout=10s", "2 weight=10 max_fails=1 fail_timeout=10s") . $::FlakyB1
--- config eval
"proxy_next_upstream error timeout http_502 non_idempotent;\n" . ::location("/v1/") . ::location("/flaky/")
. "location = /status { prefix_route_status; }\n"
--- request eval
["POST /v1/chat/completions\n" . main::chat(14),
 "POST /flaky/chat/completions\n" . main::chat(14),
 "GET /status"]
--- error_code eval
[200, 502, 200]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 \\d+\nX-Upstream-Status: 502, 200",
 "X-Prefix-Route: NONE 0 \\d+\nX-Upstream-Status: 502, 502", ""]
--- response_body_like eval
["^b1\n\\z", "502 Bad Gateway",
 '"matched_bytes":0,"longest_bytes":0,.*"requests":\{"BYPASS":0,"MISS":1,"HIT":0,"SPILL":0,"NONE":1\}']
--- no_error_log
[alert]
[crit]



=== TEST 15: a server that answers every prompt with a quick 500 takes one at most, with proxy_next_upstream http_500 non_idempotent
Its answers leave it idle and holding nothing, so the cost model would
send it new prompts (least_conn does the same); nginx's passive health
check turns it off: the 500 is retried elsewhere and counts against
max_fails (1), so for fail_timeout no prompt goes to it.  Every client
gets a 200; b1's 500 shows in one X-Upstream-Status at most.
--- http_config eval
::upstream("1 weight=10", 2, 3, 4) . ::backends(2, 3, 4) . <<'_EOC_'
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_1; return 500; }
_EOC_
--- config eval
"proxy_next_upstream error timeout http_500 non_idempotent;\n" . ::location("/v1/")
--- request eval
[map { "POST /v1/chat/completions\n" . main::chat(150 + $_) } 1 .. 12]
--- error_code eval
[(200) x 12]
--- response_headers_like eval
["X-Upstream-Status: (?:500, )?200",
 ("X-Upstream-Status: 200") x 11]
--- response_body_like eval
[("^b[234]\n\\z") x 12]



=== TEST 16: without proxy_next_upstream, a server that answers every prompt with a quick 503 takes max_errors of them (3 here), then none for its fail_timeout, and the status says "erring"
As llama-server answers while it loads its model.  b1's weight makes it
the first choice for every new prompt on an idle fleet.  After its third
503 in a row it is passed over, by the cost model and by round robin (the
bodies that cannot be read), as if "down".
--- http_config eval
::upstream("zone=llm:1m max_errors=3", "1 weight=10 fail_timeout=60s", 2, 3, 4)
. ::backends(2, 3, 4) . <<'_EOC_'
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_1; return 503; }
_EOC_
--- config eval
::location() . "location = /status { prefix_route_status; }\n"
. "location = /log { alias logs/error.log; }\n"
--- request eval
[(map { "POST /v1/chat/completions\n" . main::chat(170 + $_) } 1 .. 12),
 ("POST /v1/chat/completions\nnot json") x 3, "GET /status", "GET /log"]
--- error_code eval
[(503) x 3, (200) x 14]
--- response_body_like eval
[("") x 3, ("^b[234]\n\\z") x 12,
 qr/\{"name":"127\.0\.0\.1:\d+","server":"[^"]*","state":"erring","inflight":0,"queued_bytes":0,"blocks":0,"dropping":0,"requests":3,"hits":0,"errors":3,(?:.*"state":"up",[^{}]*"errors":0,){3}/s,
 qr/\A(?:(?!answered 3 responses).)*\[warn\] [^\n]*prefix_route: server 127\.0\.0\.1:\d+ answered 3 responses of status 5xx in a row, the last 503: passed over for its fail_timeout while another server is usable(?:(?!answered 3 responses).)*\z/s]
--- no_error_log
[alert]
[crit]



=== TEST 17: with max_errors=off, the same server takes every new prompt
What the guard of TEST 16 prevents: its answers leave it idle and holding
nothing, so the cost model keeps choosing it.  The status counts its
errors and shows it up.
--- http_config eval
::upstream("zone=llm:1m max_errors=off", "1 weight=10 fail_timeout=60s", 2, 3, 4)
. ::backends(2, 3, 4) . <<'_EOC_'
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_1; return 500; }
_EOC_
--- config eval
::location() . "location = /status { prefix_route_status; }\n"
--- request eval
[(map { "POST /v1/chat/completions\n" . main::chat(170 + $_) } 1 .. 12),
 "GET /status"]
--- error_code eval
[(500) x 12, 200]
--- response_body_like eval
[("") x 12,
 qr/\A(?!.*"erring")\{"upstreams":\[\{"name":"llm",.*?\{"name":"127\.0\.0\.1:\d+","server":"[^"]*","state":"up","inflight":0,"queued_bytes":0,"blocks":0,"dropping":0,"requests":12,"hits":0,"errors":12,/s]
--- no_error_log
[alert]
[crit]
passed over



=== TEST 18: after its fail_timeout the server is tried again; a response that is not 5xx ends the run, so the next errors start a new one
b1 answers 500 to "?fail=1" and 200 otherwise, with fail_timeout=1 (s).
After 3 errors a prompt goes elsewhere; 2.1 s later b1 is "up" again and
takes the next prompt, whose 200 ends the run: 2 more errors leave it up.
--- http_config eval
::upstream("zone=llm:1m max_errors=3", "1 weight=10 fail_timeout=1", 2, 3, 4)
. ::backends(2, 3, 4) . $::FailB1
--- config eval
::location() . "location = /status { prefix_route_status; }\n"
. "location = /sleep { echo_sleep 2.1; echo ok; }\n"
. "location = /log { alias logs/error.log; }\n"
--- request eval
[(map { "POST /v1/chat/completions?fail=1\n" . main::chat(190 + $_) } 1 .. 3),
 "POST /v1/chat/completions\n" . main::chat(194),
 "GET /status", "GET /sleep", "GET /status",
 "POST /v1/chat/completions\n" . main::chat(195),
 (map { "POST /v1/chat/completions?fail=1\n" . main::chat(195 + $_) } 1 .. 2),
 "GET /status", "GET /log"]
--- error_code eval
[(500) x 3, (200) x 5, (500) x 2, 200, 200]
--- response_body_like eval
[("") x 3, "^b[234]\n\\z", qr/"state":"erring"/, "ok",
 qr/\A(?!.*"erring").*"state":"up","inflight":0,"queued_bytes":0,"blocks":0,"dropping":0,"requests":3,"hits":0,"errors":3,/s,
 "^b1\n\\z", ("") x 2,
 qr/\A(?!.*"erring").*"state":"up","inflight":0,"queued_bytes":0,"blocks":\d+,"dropping":0,"requests":6,"hits":\d+,"errors":5,/s,
 qr/\[warn\] [^\n]*prefix_route: server 127\.0\.0\.1:\d+ answered 3 responses of status 5xx in a row[^\n]*\n(?:(?!answered).)*\[notice\] [^\n]*prefix_route: server 127\.0\.0\.1:\d+ answered again, status 200(?:(?!answered).)*\z/s]
--- no_error_log
[alert]
[crit]



=== TEST 19: a prompt the engine rejects takes no room in its cache: with capacity for one prompt, the one held before stays whole
capacity=1k holds one of these prompts (15 blocks).  The second prompt
is refused with a 400, as vLLM refuses one longer than max_model_len:
the engine computed nothing, evicted nothing, and the first prompt is
still held whole.  Then the second is taken (200): its room is made
from the least recently used, the first prompt's blocks.
--- http_config eval
::upstream("zone=llm:1m capacity=1k", 1) . <<'_EOC_'
server {
    listen 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
    location /v1/reject { return 400; }
    location / { return 200 "b1\n"; }
}
_EOC_
--- request eval
["POST /v1/chat/completions\n" . main::chat(191),
 "POST /v1/reject\n" . main::chat(192),
 "POST /v1/chat/completions\n" . main::chat(191),
 "POST /v1/chat/completions\n" . main::chat(192),
 "POST /v1/chat/completions\n" . main::chat(191)]
--- error_code eval
[200, 400, 200, 200, 200]
--- response_headers_like eval
my $len = 7 + length(main::chat_text(191));
my $full = int($len / 64) * 64;
["X-Prefix-Route: MISS 0 $len", "X-Prefix-Route: MISS 0 $len",
 "X-Prefix-Route: HIT $full $len", "X-Prefix-Route: MISS 0 $len",
 "X-Prefix-Route: (?:MISS 0|HIT (?!$full )\\d+) $len"]



=== TEST 20: a server passed over for its errors still takes the request when round robin's rules leave no other
b2 refuses connections and max_fails=1 takes it out for 60 s; b1, the
only server left, answers 500 to "?fail=1".  After 2 of them in a row
(max_errors=2) b1 is erring, but with none other usable it is not passed
over: a body round robin balances, and the next prompt, get b1's 200,
not nginx's 502 (helper-47).
--- http_config eval
::upstream("zone=llm:1m max_errors=2", "1 fail_timeout=60s", "2 max_fails=1 fail_timeout=60s") . $::FailB1
--- config eval
::location() . "location = /status { prefix_route_status; }\n"
--- request eval
["POST /v1/chat/completions\n" . main::chat(201),
 "POST /v1/chat/completions\n" . main::chat(202),
 (map { "POST /v1/chat/completions?fail=1\n" . main::chat(202 + $_) } 1 .. 2),
 "GET /status",
 "POST /v1/chat/completions\nnot json",
 "POST /v1/chat/completions\n" . main::chat(205)]
--- error_code eval
[200, 200, 500, 500, 200, 200, 200]
--- response_body_like eval
["^b1\n\\z", "^b1\n\\z", "", "", qr/"state":"erring",.*"state":"failing"/s,
 "^b1\n\\z", "^b1\n\\z"]
--- no_error_log
[alert]
[crit]



=== TEST 21: a connection that fails at once is not blamed for the status of the attempt before
b1 (weight 10) answers 500, which nginx retries; the next choice is a
unix socket that does not exist, whose connect() fails at once, before
nginx resets the previous attempt's headers; b3 answers.  Only b1's 500s
count: the socket answered nothing (helper-47).  nginx logs each failed
connect() at crit.
--- http_config eval
"upstream llm {\n    prefix_route zone=llm:1m max_errors=3;\n"
. "    server " . ::addr(1) . " weight=10 max_fails=0;\n"
. "    server unix:/nonexistent/prefix-route-none.sock weight=5 max_fails=0;\n"
. "    server " . ::addr(3) . " max_fails=0;\n}\n"
. ::backends(3) . <<'_EOC_'
server { listen 127.0.0.1:$TEST_NGINX_RAND_PORT_1; return 500; }
_EOC_
--- config eval
"proxy_next_upstream error http_500 non_idempotent;\n" . ::location()
. "location = /status { prefix_route_status; }\n"
--- request eval
[(map { "POST /v1/chat/completions\n" . main::chat(210 + $_) } 1 .. 3),
 "GET /status"]
--- error_code eval
[200, 200, 200, 200]
--- response_body_like eval
[("^b3\n\\z") x 3,
 qr/"state":"erring",[^{}]*"requests":3,"hits":0,"errors":3,.*"name":"unix:[^"]*none\.sock","server":"[^"]*","state":"up",[^{}]*"requests":3,"hits":0,"errors":0,.*"state":"up",[^{}]*"errors":0,/s]
--- no_error_log
[alert]
[emerg]
