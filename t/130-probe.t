# Engine probes (prefix_route_probe): the engines' metrics pages are read on
# a timer, never on a request.  Their queue and running gauges reach the
# status and the cost model; a server whose probes fail "fails" times in a
# row is passed over, by the cost model and by round robin, until a probe is
# answered again; a counter that falls (a restarted engine) makes the index
# forget the server's blocks; a page that hangs, is garbage or is huge
# leaves the worker serving and the index as it was.
#
# The backends are nginx servers that answer /metrics with a fixed page,
# and anything else with their name.  A page may depend on a flag file
# that the test sets with "PUT /state/<flag>" and clears with "DELETE"
# (WebDAV, in the server that proxies).  Every block's upstream is
# "llm", prefix_route zone=llm:1m with "prefix_route_probe interval=100ms
# timeout=300ms fails=2" unless the block says otherwise; GET /sleep waits
# 0.5 s, some rounds of probes; GET /log returns error.log, whose lines the
# blocks look for in a last request.  nginx runs as on a host up 50 days
# (long_uptime()), past where the index's 32-bit stamps wrap around.
use Test::Nginx::Socket 'no_plan';
use FindBin;
use lib $FindBin::Bin;
use PrefixRoute qw(:DEFAULT chat sys user text);
use IO::Socket::INET;
use POSIX ();

# upstream llm over the servers given, with "prefix_route_probe $probe"
sub probed {
    my ($probe, @servers) = @_;
    my $u = ::upstream(@servers);
    $u =~ s/(    prefix_route [^\n]*\n)/$1    prefix_route_probe $probe;\n/;
    return $u;
}

our $Probe = "interval=100ms timeout=300ms fails=2";

# upstream llm, probed, over the servers given as addresses ("host:port")
sub probed_at {
    return "upstream llm {\n    prefix_route zone=llm:1m;\n"
         . "    prefix_route_probe $::Probe;\n"
         . join("", map { "    server $_;\n" } @_) . "}\n";
}

# backend $n, whose /metrics location holds $metrics (nginx directives)
sub engine {
    my ($n, $metrics) = @_;
    return "server {\n    listen " . ::addr($n) . ";\n"
         . "    location = /metrics {\n        $metrics\n    }\n"
         . "    location / { return 200 \"b$n\\n\"; }\n}\n";
}

# a page of vLLM's gauges
sub vllm {
    my ($waiting, $running, $kv, $served) = @_;
    return "return 200 \"# TYPE vllm:num_requests_waiting gauge\\n"
         . "vllm:num_requests_waiting{model_name=\\\"m\\\"} $waiting\\n"
         . "vllm:num_requests_running{model_name=\\\"m\\\"} $running\\n"
         . "vllm:kv_cache_usage_perc{model_name=\\\"m\\\"} $kv\\n"
         . "vllm:prompt_tokens_total{model_name=\\\"m\\\"} $served\\n\";";
}

# a server of the test's own, on a port the kernel gives: it answers each
# connection with $answer (or the next of a list of answers in turn) and
# holds it open, or closes it if $close; it ends with the test file
our (@Raw, $Parent);
$Parent = $$;

sub raw_engine {
    my ($answers, $close) = @_;
    $answers = [$answers] unless ref $answers;
    my $l = IO::Socket::INET->new(Listen => 8, ReuseAddr => 1,
                                  LocalAddr => '127.0.0.1:0')
        or die "cannot listen: $!\n";
    my $pid = fork // die "fork: $!\n";
    if (!$pid) {
        alarm 300;
        my (@held, $n);
        while (my $c = $l->accept) {
            my $answer = $answers->[$n++ % @$answers];
            if ($close) {
                # the request read first: a close with it unread is a reset
                my $req = "";
                while ($req !~ /\r\n\r\n/ && sysread($c, my $buf, 4096)) {
                    $req .= $buf;
                }
                print $c $answer;
                close $c;
                next;
            }
            print $c $answer;
            push @held, $c;
        }
        POSIX::_exit(0);
    }
    push @Raw, $pid;
    my $port = $l->sockport;
    close $l;
    return $port;
}

END { kill 'TERM', @Raw if $$ == $Parent && @Raw; }

our $Locations = <<'_EOC_';
location = /status {
    prefix_route_status;
}
location = /sleep {
    echo_sleep 0.5;
    echo ok;
}
location /state/ {
    dav_methods PUT DELETE;
    create_full_put_path on;
}
location = /log {
    alias logs/error.log;
}
_EOC_

our $Config = ::proxy() . $Locations;

# a prompt of about 1 KB, tagged $tag
sub ask {
    my $tag = shift;
    return chat([sys(text("sys $tag", 900)), user(text($tag, 100))]);
}

add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value(main_config => $LoadModule . $LoadEcho) unless defined $block->main_config;
    $block->set_value(config => $Config) unless defined $block->config;
    $block->set_value(no_error_log => $NoErrorLog) unless defined $block->no_error_log;
    return $block;
});

no_shuffle();
long_uptime();
run_tests();

__DATA__

=== TEST 1: the engines' gauges reach the status, in JSON and Prometheus, by each engine's names, and the probes are counted
b1 is vLLM, b2 SGLang, b3 TGI (no KV gauge), b4 llama.cpp.
--- http_config eval
::probed($::Probe, 1 .. 4)
. ::engine(1, ::vllm(5, 2, 0.25, 100))
. ::engine(2, 'return 200 "sglang:num_queue_reqs{model_name=\"m\"} 3.0\nsglang:num_running_reqs{model_name=\"m\"} 4.0\nsglang:token_usage{model_name=\"m\"} 0.5\n";')
. ::engine(3, 'return 200 "tgi_queue_size 1\ntgi_batch_current_size 6\ntgi_request_count 9\n";')
. ::engine(4, 'return 200 "llamacpp:requests_processing 1\nllamacpp:requests_deferred 0\nllamacpp:prompt_tokens_total 77\n";')
--- request eval
["GET /sleep", "GET /status", "GET /status?format=prometheus"]
--- response_body_like eval
["ok",
 qr/"name":"127\.0\.0\.1:\d+","server":"[^"]*","state":"up",[^{}]*"probes":[1-9]\d*,"probe_failures":0,"probe_restarts":0,"engine":\{"waiting":5,"running":2,"age_ms":\d+,"kv_cache_usage":0\.250\}\}.*"engine":\{"waiting":3,"running":4,"age_ms":\d+,"kv_cache_usage":0\.500\}\}.*"engine":\{"waiting":1,"running":6,"age_ms":\d+\}\}.*"engine":\{"waiting":0,"running":1,"age_ms":\d+\}\}/s,
 qr/nginx_prefix_route_peer_engine_waiting_requests\{upstream="llm",peer="127\.0\.0\.1:\d+"\} 5\n.*nginx_prefix_route_peer_engine_kv_cache_usage_ratio\{upstream="llm",peer="127\.0\.0\.1:\d+"\} 0\.250\n/s]



=== TEST 2: without prefix_route_probe the status has no engine figures and no request asks for /metrics
--- http_config eval
::upstream(1, 2) . ::engine(1, ::vllm(5, 2, 0.25, 100)) . ::engine(2, ::vllm(0, 0, 0, 1))
--- request eval
["GET /sleep", "GET /status"]
--- response_body_like eval
["ok", qr/\A(?!.*"engine")(?!.*"probes":[1-9]).*"probes":0,"probe_failures":0.*\z/s]



=== TEST 3: a server whose probes fail is passed over, by the cost model and by round robin, and the status says "unhealthy", all its probes failed
b2's page answers 503.  Of 6 new prompts and 3 bodies that cannot be read
(balanced by round robin), none goes to b2.
--- http_config eval
::probed($::Probe, 1, 2) . ::engine(1, ::vllm(0, 0, 0, 1)) . ::engine(2, 'return 503;')
--- request eval
["GET /sleep", (map { ::ask("p$_") } 1 .. 6),
 ("POST /v1/chat/completions\nnot json") x 3, "GET /status", "GET /log"]
--- response_body_like eval
["ok", ("^b1\n\\z") x 9,
 qr/"fail_open":0,.*"state":"up",[^{}]*"probes":[1-9]\d*,"probe_failures":0,.*"state":"unhealthy","inflight":0,[^{}]*"probes":([1-9]\d*),"probe_failures":\1,/s,
 qr/\[warn\] .*prefix_route: 2 probes failed in a row \(answered with status 503, not 2xx\), the server is passed over until one is answered while probing server 127\.0\.0\.1:\d+ at "\/metrics"/]
--- no_error_log
[alert]
[crit]



=== TEST 4: when the probes fail on every server, none is passed over, and the status and the log say so
Both servers get some of 8 new prompts; "fail_open" is 1, and the second
server marked says every server's probes fail (helper-73: the status
and the log said both were passed over).
--- http_config eval
::probed($::Probe, 1, 2) . ::engine(1, 'return 503;') . ::engine(2, 'return 503;')
--- request eval
["GET /sleep", (map { ::ask("p$_") } 1 .. 8), "GET /status", "GET /status?format=prometheus", "GET /log"]
--- response_body_like eval
["ok", ("^b[12]\n\\z") x 8,
 qr/"fail_open":1,.*"state":"unhealthy","inflight":0,"queued_bytes":0,"blocks":\d+,"dropping":0,"requests":[1-9]\d*,.*"state":"unhealthy","inflight":0,"queued_bytes":0,"blocks":\d+,"dropping":0,"requests":[1-9]\d*,/s,
 qr/^nginx_prefix_route_fail_open\{upstream="llm"\} 1$/m,
 qr/\[warn\] .*prefix_route: 2 probes failed in a row \(answered with status 503, not 2xx\), the server is passed over until one is answered while probing(?:.*\n)*.*\[warn\] .*prefix_route: 2 probes failed in a row \(answered with status 503, not 2xx\), as on every primary server probed: none is passed over/]
--- no_error_log
[alert]
[crit]



=== TEST 5: a server is balanced again once its probe is answered
b2's page answers 503 while the flag "down" is set.
--- http_config eval
::probed($::Probe, 1, 2) . ::engine(1, ::vllm(0, 0, 0, 1))
. ::engine(2, 'root html; if (-f $document_root/state/down) { return 503; } ' . ::vllm(0, 0, 0, 1))
--- request eval
["PUT /state/down\nx", "GET /sleep", (map { ::ask("p$_") } 1 .. 4), "GET /status",
 "DELETE /state/down", "GET /sleep", "GET /status", (map { ::ask("q$_") } 1 .. 8),
 "GET /log"]
--- error_code eval
[201, (200) x 6, 204, (200) x 11]
--- response_body_like eval
["", "ok", ("^b1\n\\z") x 4, qr/"state":"unhealthy"/, "", "ok",
 qr/\A(?!.*unhealthy).*"state":"up".*"state":"up"/s, ("^b[12]\n\\z") x 8,
 qr/\[warn\] .*2 probes failed in a row.*\[notice\] .*prefix_route: the probe is answered again, the server is balanced again while probing server/s]
--- no_error_log
[alert]
[crit]



=== TEST 6: others' queue on a server, by its gauges, sends new prompts elsewhere
b1 reports 50 requests waiting that no request of this nginx sent; b2 none.
--- http_config eval
::probed($::Probe, 1, 2) . ::engine(1, ::vllm(50, 8, 0.9, 1)) . ::engine(2, ::vllm(0, 0, 0.1, 1))
--- request eval
["GET /sleep", (map { ::ask("p$_") } 1 .. 8)]
--- response_body_like eval
["ok", ("^b2\n\\z") x 8]



=== TEST 7: others' queue alike on every server changes no choice
Both report 50 requests waiting that no request of this nginx sent: new
prompts go to both servers, as without the gauges.
--- http_config eval
::probed($::Probe, 1, 2) . ::engine(1, ::vllm(50, 8, 0.9, 1)) . ::engine(2, ::vllm(50, 8, 0.9, 1))
--- request eval
["GET /sleep", (map { ::ask("p$_") } 1 .. 8), "GET /status"]
--- response_body_like eval
["ok", ("^b[12]\n\\z") x 8,
 qr/"requests":[1-9]\d*,[^{}]*"engine":\{"waiting":50,.*"requests":[1-9]\d*,[^{}]*"engine":\{"waiting":50,/s]



=== TEST 8: with load=off the gauges are shown but others' queue does not count
The engines of test 6: new prompts go to both servers.
--- http_config eval
::probed("$::Probe load=off", 1, 2) . ::engine(1, ::vllm(50, 8, 0.9, 1)) . ::engine(2, ::vllm(0, 0, 0.1, 1))
--- request eval
["GET /sleep", (map { ::ask("p$_") } 1 .. 8), "GET /status"]
--- response_body_like eval
["ok", ("^b[12]\n\\z") x 8,
 qr/"requests":[1-9]\d*,[^{}]*"engine":\{"waiting":50,.*"requests":[1-9]\d*,[^{}]*"engine":\{"waiting":0,/s]



=== TEST 9: an engine whose counter falls has restarted: the index forgets its blocks
b1's prompt counter reads 1000, then 5 once the flag "restarted" is set:
the prompt held before is a MISS again, once its blocks are dropped.
--- http_config eval
::probed($::Probe, 1)
. ::engine(1, 'root html; if (-f $document_root/state/restarted) { ' . ::vllm(0, 0, 0, 5) . ' } ' . ::vllm(0, 0, 0, 1000))
--- request eval
["GET /sleep", ::ask("a"), ::ask("a"), "PUT /state/restarted\nx",
 "GET /sleep", ::ask("a"), ::ask("a"), "GET /status", "GET /log"]
--- error_code eval
[200, 200, 200, 201, (200) x 5]
--- response_headers_like eval
["", "X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: HIT [1-9]\\d* \\d+", "", "",
 "X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: HIT [1-9]\\d* \\d+", "", ""]
--- response_body_like eval
["ok", ("^b1\n\\z") x 2, "", "ok", ("^b1\n\\z") x 2, qr/"probe_restarts":1,/,
 qr/\[notice\] .*prefix_route: the engine restarted \(its counter fell from 1000 to 5\), the index forgets its [1-9]\d* blocks.*\n.*\[notice\] .*prefix_route: the blocks of server 127\.0\.0\.1:\d+, whose engine restarted, are all dropped/s]
--- no_error_log
[alert]
[crit]



=== TEST 10: a page that hangs fails after the timeout, while the worker goes on serving
b1's page never comes within the timeout; requests go on being answered
at once, and b1 is then passed over.
--- http_config eval
::probed($::Probe, 1, 2) . ::engine(1, 'echo_sleep 10; echo late;') . ::engine(2, ::vllm(0, 0, 0, 1))
--- request eval
[(map { ::ask("p$_") } 1 .. 3), "GET /sleep", "GET /sleep", (map { ::ask("q$_") } 1 .. 4), "GET /status",
 "GET /log"]
--- response_body_like eval
[("^b[12]\n\\z") x 3, "ok", "ok", ("^b2\n\\z") x 4, qr/"state":"unhealthy"/,
 qr/\[info\] .*prefix_route: probe failed: timed out while probing server/]
--- no_error_log
[alert]
[crit]
--- timeout: 5



=== TEST 11: garbage and an HTML page are answers, not readings: the server stays up, balanced by the zone's own figures
--- http_config eval
::probed($::Probe, 1, 2)
. ::engine(1, 'return 200 "\x01\x02 garbage {{{ }}}\nvllm:num_requests_running NaN\n";')
. ::engine(2, 'default_type text/html; return 200 "<html><body>metrics</body></html>";')
--- request eval
["GET /sleep", (map { ::ask("p$_") } 1 .. 8), "GET /status", "GET /log"]
--- response_body_like eval
["ok", ("^b[12]\n\\z") x 8,
 qr/\A(?!.*("engine"|unhealthy))(.*"state":"up","inflight":0,"queued_bytes":0,"blocks":\d+,"dropping":0,"requests":[1-9]\d*,[^{}]*"probe_failures":0,){2}/s,
 qr/\[warn\] .*prefix_route: the metrics page is not read: the page has no queue and running gauges of a known engine; the server is balanced by the zone's own load figures while probing server/]
--- no_error_log
[alert]
[crit]



=== TEST 12: a 10 MB page is read no further than max_size; the worker goes on serving
--- http_config eval
::probed("$::Probe max_size=64k", 1, 2)
. ::engine(1, 'echo_duplicate 1048576 "vllm:num_requests_running 1\n";')
. ::engine(2, ::vllm(0, 0, 0, 1))
--- request eval
["GET /sleep", (map { ::ask("p$_") } 1 .. 4), "GET /status", "GET /log"]
--- response_body_like eval
["ok", ("^b[12]\n\\z") x 4, qr/\A(?!.*unhealthy)(?:(?!"engine").)*"probe_restarts":0\}.*"engine":\{"waiting":0,"running":0,/s,
 qr/\[warn\] .*prefix_route: the metrics page is not read: the page is longer than max_size/]
--- no_error_log
[alert]
[crit]



=== TEST 13: a server that closes the connection without an answer fails its probe
--- http_config eval
::probed($::Probe, 1, 2) . ::engine(1, 'return 444;') . ::engine(2, ::vllm(0, 0, 0, 1))
--- request eval
["GET /sleep", (map { ::ask("p$_") } 1 .. 4), "GET /status", "GET /log"]
--- response_body_like eval
["ok", ("^b2\n\\z") x 4, qr/"state":"unhealthy"/,
 qr/prefix_route: probe failed: closed before the answer ended while probing server/]
--- no_error_log
[alert]
[crit]



=== TEST 14: a server that refuses connections fails its probe and is passed over
--- http_config eval
::probed($::Probe, 1, 2) . ::engine(1, ::vllm(0, 0, 0, 1))
--- request eval
["GET /sleep", (map { ::ask("p$_") } 1 .. 4), "GET /status", "GET /log"]
--- response_body_like eval
["ok", ("^b1\n\\z") x 4, qr/"state":"up".*"state":"unhealthy"/s,
 qr/prefix_route: 2 probes failed in a row \(no connection\)/]
--- no_error_log
[alert]
[crit]



=== TEST 15: a backup whose probes fail is passed over too, by round robin as by the cost model
b1, the only primary, is down: the backups serve.  b2's page answers
503.  Of 6 new prompts and 6 bodies that cannot be read (round robin,
which clears its marks when it turns to the backups), none goes to b2.
--- http_config eval
::probed($::Probe, "1 down", "2 backup", "3 backup") . ::engine(1, ::vllm(0, 0, 0, 1))
. ::engine(2, 'return 503;') . ::engine(3, ::vllm(0, 0, 0, 1))
--- request eval
["GET /sleep", (map { ::ask("p$_") } 1 .. 6),
 ("POST /v1/chat/completions\nnot json") x 6, "GET /status"]
--- response_body_like eval
["ok", ("^b3\n\\z") x 12, qr/"state":"down".*"state":"unhealthy".*"state":"backup"/s]
--- no_error_log
[alert]
[crit]



=== TEST 16: a server marked down is not probed
Nothing listens at b2's address: a probe of it would fail.
--- http_config eval
::probed($::Probe, 1, "2 down") . ::engine(1, ::vllm(0, 0, 0, 1))
--- request eval
["GET /sleep", "GET /status"]
--- response_body_like eval
["ok", qr/"state":"up",[^{}]*"probe_failures":0,.*"state":"down",[^{}]*"probe_failures":0,/s]
--- no_error_log
[alert]
[crit]



=== TEST 17: a server marked down counts in neither: when every other server fails its probes, none is passed over
b1's page answers 503; b2 is marked down, nothing listens there.  New
prompts and bodies that cannot be read go to b1.
--- http_config eval
::probed($::Probe, 1, "2 down") . ::engine(1, 'return 503;')
--- request eval
["GET /sleep", (map { ::ask("p$_") } 1 .. 3),
 ("POST /v1/chat/completions\nnot json") x 2]
--- response_body_like eval
["ok", ("^b1\n\\z") x 5]
--- no_error_log
[alert]
[crit]



=== TEST 18: series whose sum no 64-bit count holds read as the largest queue, not as none: new prompts go elsewhere
b1's page has 30,000 series of 1e15 requests waiting (2^64 is 1.8e19):
1 MB. Under valgrind on a slower machine the prompts once came before it
was read (300 ms of timeout, 0.5 s of wait), and again with 3 s and 2 s
in a full valgrind run (2026-12-05), hence 5 s and 3 s here.  Read every
100 ms, a reading under valgrind was at times more than two intervals
old, no longer fresh, when a prompt came (2026-12-05), hence 1 s.
--- http_config eval
::probed("interval=1s timeout=5s fails=2", 1, 2)
. ::engine(1, 'echo_duplicate 30000 "vllm:num_requests_waiting 1e15\n"; echo "vllm:num_requests_running 0";')
. ::engine(2, ::vllm(0, 0, 0.1, 1))
--- request eval
[("GET /sleep") x 6, (map { ::ask("p$_") } 1 .. 6), "GET /status"]
--- response_body_like eval
[("ok") x 6, ("^b2\n\\z") x 6, qr/"engine":\{"waiting":1000000000000000,"running":0,.*"engine":\{"waiting":0,/s]
--- no_error_log
[alert]
[crit]



=== TEST 19: a Content-Length with white space around its value is read
b1's answer carries "Content-Length:  56<tab>", its page's length (echo
sends none of its own); it is not a failed probe.
--- http_config eval
my $page = "vllm:num_requests_waiting 3\nvllm:num_requests_running 1\n";
::probed($::Probe, 1, 2)
. ::engine(1, 'add_header Content-Length " ' . length($page) . '\t"; echo -n "'
           . ($page =~ s/\n/\\n/gr) . '";')
. ::engine(2, ::vllm(0, 0, 0.1, 1))
--- request eval
["GET /sleep", "GET /status"]
--- response_body_like eval
["ok", qr/\A(?!.*unhealthy)(?:(?!"engine").)*"probe_failures":0,"probe_restarts":0,"engine":\{"waiting":3,"running":1,/s]
--- no_error_log
[alert]
[crit]



=== TEST 20: a Content-Length line longer than the probe keeps is not guessed at: the page is not read, the server stays up
--- http_config eval
::probed($::Probe, 1, 2)
. ::engine(1, 'add_header Content-Length "' . ('0' x 60) . '56"; ' . ::vllm(3, 1, 0, 1))
. ::engine(2, ::vllm(0, 0, 0.1, 1))
--- request eval
["GET /sleep", "GET /status", "GET /log"]
--- response_body_like eval
["ok", qr/\A(?!.*unhealthy)(?:(?!"engine").)*"probe_failures":0,"probe_restarts":0\}/s,
 qr/\[warn\] .*prefix_route: the metrics page is not read: its Content-Length line is too long; the server is balanced/]
--- no_error_log
[alert]
[crit]



=== TEST 21: a 2xx page whose headers run past max_size is an answer: the page is not read, the server stays up
--- http_config eval
::probed("$::Probe max_size=1k", 1, 2)
. ::engine(1, 'add_header X-Pad "' . ('x' x 1100) . '"; ' . ::vllm(3, 1, 0, 1))
. ::engine(2, ::vllm(0, 0, 0.1, 1))
--- request eval
["GET /sleep", "GET /status", "GET /log"]
--- response_body_like eval
["ok", qr/\A(?!.*unhealthy)(?:(?!"engine").)*"probe_failures":0,"probe_restarts":0\}/s,
 qr/\[warn\] .*prefix_route: the metrics page is not read: the page is longer than max_size; the server is balanced/]
--- no_error_log
[alert]
[crit]



=== TEST 22: shadow mode: an engine's restart drops what prefix_route would hold there too
Round robin over b1 alone chooses; prefix_route's would-be placement (the
last field) held the prompt before the restart, and holds nothing of it
after, as the real placement (the second field).
--- http_config eval
::probed($::Probe, "zone=llm:1m shadow", 1)
. ::engine(1, 'root html; if (-f $document_root/state/restarted) { ' . ::vllm(0, 0, 0, 5) . ' } ' . ::vllm(0, 0, 0, 1000))
--- config eval
::proxy(header => '$prefix_route_status $prefix_route_match $prefix_route_predicted') . $::Locations
--- request eval
["GET /sleep", ::ask("a"), ::ask("a"), "PUT /state/restarted\nx",
 "GET /sleep", ::ask("a"), ::ask("a"), "GET /log"]
--- error_code eval
[200, 200, 200, 201, (200) x 4]
--- response_headers_like eval
["", "X-Prefix-Route: MISS 0 0", "X-Prefix-Route: HIT ([1-9]\\d*) \\1", "", "",
 "X-Prefix-Route: MISS 0 0", "X-Prefix-Route: HIT ([1-9]\\d*) \\1", ""]
--- response_body_like eval
["ok", ("^b1\n\\z") x 2, "", "ok", ("^b1\n\\z") x 2,
 qr/\[notice\] .*prefix_route: the blocks of server shadow of 127\.0\.0\.1:\d+, whose engine restarted, are all dropped/]
--- no_error_log
[alert]
[crit]



=== TEST 23: two server lines with one address are one engine: it is probed once a round, as often as the other
Upstream over b1, b2 and b1 again; each /metrics request is logged with
the port it came to.  Over 0.5 s (about 5 rounds) b1 is asked no more
than once more than b2, not twice as often.
--- http_config eval
::probed($::Probe, 1, 2, 1)
. "log_format probe \$server_port;\n"
. ::engine(1, 'access_log logs/probes.log probe; ' . ::vllm(0, 0, 0, 1))
. ::engine(2, 'access_log logs/probes.log probe; ' . ::vllm(0, 0, 0, 1))
--- config eval
$::Config . "location = /probes {\n    alias logs/probes.log;\n}\n"
--- request eval
["GET /sleep", "GET /probes"]
--- response_body_like eval
["ok",
 qr/\A(.*)\z(?(?{ my %n; $n{$_}++ for split m{\n}, $^N; my @c = sort { $a <=> $b } values %n; @c == 2 && $c[0] >= 2 && $c[1] <= $c[0] + 1 })|(*FAIL))/s]



=== TEST 24: a server on a unix socket is probed with Host: localhost, as nginx's proxy sends: it answers, and stays up
nginx answers a Host header holding the socket's path with a 400
("client sent invalid host header"): sent that, the server would be
passed over as unhealthy.
--- http_config eval
"upstream llm {\n    prefix_route zone=llm:1m;\n    prefix_route_probe $::Probe;\n"
. "    server unix:/tmp/prefix-route-t130-24.sock;\n}\n"
. "server {\n    listen unix:/tmp/prefix-route-t130-24.sock;\n"
. "    location = /metrics {\n        " . ::vllm(3, 1, 0.5, 7) . "\n    }\n"
. "    location / { return 200 \"b1\\n\"; }\n}\n"
--- request eval
["GET /sleep", "GET /status"]
--- response_body_like eval
["ok", qr/"name":"unix:\/tmp\/prefix-route-t130-24\.sock","server":"[^"]*","state":"up",[^{}]*"probe_failures":0,"probe_restarts":0,"engine":\{"waiting":3,"running":1,/]



=== TEST 25: a server passed over is still probed each round, but nginx's line for each refused connect() is not logged again until one is answered
Nothing listens on b2's port: each probe's connect() is refused (nginx
logs it at error).  In 1.5 s, some 15 rounds, the lines stop once 2 have
failed in a row and the warn says the server is passed over; the probes
go on (3 failures or more).
--- http_config eval
::probed($::Probe, 1, 2) . ::engine(1, ::vllm(0, 0, 0, 1))
--- request eval
["GET /sleep", "GET /sleep", "GET /sleep", "GET /status", "GET /log"]
--- response_body_filters eval
[([sub { $_[0] }]) x 4, [sub {
    my @refused = $_[0] =~ /connect\(\) failed \(111: Connection refused\) while probing server/g;
    my $warned = $_[0] =~ /2 probes failed in a row/ ? "warned" : "not warned";
    return "$warned, " . (@refused <= 3 ? "at most 3" : scalar(@refused)) . " refused lines\n";
}]]
--- response_body_like eval
["ok", "ok", "ok", qr/"state":"unhealthy",[^{}]*"probe_failures":(?:[3-9]|[1-9]\d+),/,
 "^warned, at most 3 refused lines\n\\z"]
--- no_error_log
[alert]
[crit]



=== TEST 26: a 2xx page of "Content-Length: 0" on a connection left open ends with its headers: an answer, the server stays up
Until 2026-12-07 the probe waited for the connection to close and failed
at its timeout (helper-72).  The first server, the test's own, sends
its headers and holds the connection.
--- http_config eval
::probed_at("127.0.0.1:" . ::raw_engine("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 0\r\n\r\n"), ::addr(2))
. ::engine(2, ::vllm(0, 0, 0.1, 1))
--- request eval
["GET /sleep", "GET /status", "GET /log"]
--- response_body_like eval
["ok", qr/\A(?!.*unhealthy)(?:(?!"engine").)*"probe_failures":0,"probe_restarts":0\}/s,
 qr/\A(?![\s\S]*probe failed)(?:.*\n)*.*\[warn\] .*prefix_route: the metrics page is not read: the page has no queue and running gauges of a known engine/]
--- no_error_log
[alert]
[crit]



=== TEST 27: a 2xx page that stops in the middle of its body is an answer: the server stays up
As a page cut short is: the engine answered, its page is not read.
Until 2026-12-07 it failed at the timeout and the server was passed over
(helper-72).
--- http_config eval
::probed($::Probe, 1, 2)
. ::engine(1, 'echo -n "vllm:num_requests_waiting 3\n"; echo_flush; echo_sleep 10; echo late;')
. ::engine(2, ::vllm(0, 0, 0.1, 1))
--- request eval
["GET /sleep", "GET /status", "GET /log"]
--- response_body_like eval
["ok", qr/\A(?!.*unhealthy)(?:(?!"engine").)*"probe_failures":0,"probe_restarts":0\}/s,
 qr/\A(?![\s\S]*probe failed)(?:.*\n)*.*\[warn\] .*prefix_route: the metrics page is not read: the page timed out; the server is balanced/]
--- no_error_log
[alert]
[crit]
--- timeout: 5



=== TEST 28: a 2xx page whose headers pass 16 KiB is an answer: the page is not read, the server stays up
Until 2026-12-07 it failed as "not an HTTP response" and the server was
passed over (helper-72).
--- http_config eval
::probed_at("127.0.0.1:" . ::raw_engine("HTTP/1.1 200 OK\r\nX-Padding: " . ("a" x 20000) . "\r\n\r\nvllm:num_requests_waiting 0\n"), ::addr(2))
. ::engine(2, ::vllm(0, 0, 0.1, 1))
--- request eval
["GET /sleep", "GET /status", "GET /log"]
--- response_body_like eval
["ok", qr/\A(?!.*unhealthy)(?:(?!"engine").)*"probe_failures":0,"probe_restarts":0\}/s,
 qr/\A(?![\s\S]*probe failed)(?:.*\n)*.*\[warn\] .*prefix_route: the metrics page is not read: its headers are longer than 16 KiB; the server is balanced/]
--- no_error_log
[alert]
[crit]



=== TEST 29: a 2xx status line and then a close is an answer too; a close within the status line fails, as in TEST 13
--- http_config eval
::probed_at("127.0.0.1:" . ::raw_engine("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n", 1),
            "127.0.0.1:" . ::raw_engine("HTTP/1.1 200", 1))
--- request eval
["GET /sleep", "GET /status", "GET /log"]
--- response_body_like eval
["ok", qr/\A(?:(?!"engine").)*"probe_failures":0,"probe_restarts":0\}.*"state":"unhealthy"/s,
 qr/\A(?:.*\n)*.*\[warn\] .*prefix_route: the metrics page is not read: closed before the answer ended; the server is balanced(?:.*\n)*.*probe failed: closed before the answer ended/]
--- no_error_log
[alert]
[crit]



=== TEST 30: a page read and not in turn warns once, and then says so at debug, not again at warn
helper-72 saw a warn every other round from such a page.
--- http_config eval
::probed($::Probe, 1, 2) . ::engine(1, ::vllm(0, 0, 0, 1))
. ::engine(2, 'root html; if (-f $document_root/state/bad) { return 200 "garbage\n"; } ' . ::vllm(0, 0, 0, 1))
--- request eval
["PUT /state/bad\nx", "GET /sleep", "DELETE /state/bad", "GET /sleep",
 "PUT /state/bad\nx", "GET /sleep", "DELETE /state/bad", "GET /sleep",
 "PUT /state/bad\nx", "GET /sleep", "GET /status", "GET /log"]
--- error_code eval
[201, 200, 204, 200, 201, 200, 204, 200, 201, 200, 200, 200]
--- response_body_like eval
["", "ok", "", "ok", "", "ok", "", "ok", "", "ok",
 qr/\A(?!.*unhealthy)(?:(?!"engine").)*"probe_failures":0,.*"probe_failures":0,/s,
 qr/\A(?!(?:.*\n)*.*\[warn\] .*metrics page is not read(?:.*\n)*.*\[warn\] .*metrics page is not read)(?:.*\n)*.*\[warn\] .*prefix_route: the metrics page is not read: the page has no queue(?:.*\n)*.*\[debug\] .*prefix_route: the metrics page is not read: the page has no queue(?:.*\n)*.*\[debug\] .*prefix_route: the metrics page is not read: the page has no queue/]
--- no_error_log
[alert]
[crit]




=== TEST 31: a reading older than two intervals is not shown, as the balancer no longer uses it: only its age is
b2's page answers 503 once the flag "down" is set: its last reading,
waiting 7, grows old.  Until 2026-12-07 the status kept showing it
(helper-73).
--- http_config eval
::probed($::Probe, 1, 2) . ::engine(1, ::vllm(0, 0, 0, 1))
. ::engine(2, 'root html; if (-f $document_root/state/down) { return 503; } ' . ::vllm(7, 1, 0.5, 1))
--- request eval
["GET /sleep", "GET /status", "PUT /state/down\nx", "GET /sleep",
 "GET /status", "GET /status?format=prometheus"]
--- error_code eval
[200, 200, 201, 200, 200, 200]
--- response_body_like eval
["ok", qr/"engine":\{"waiting":7,"running":1,"age_ms":\d+,"kv_cache_usage":0\.500\}/, "", "ok",
 qr/\A(?!.*"waiting":7).*"engine":\{"waiting":0,"running":0,"age_ms":\d+,"kv_cache_usage":0\.000\}\}.*"engine":\{"age_ms":(?:[3-9]\d\d|\d{4,})\}\}/s,
 qr/\A(?![\s\S]*nginx_prefix_route_peer_engine_waiting_requests\{[^}]*\} 7\n)(?:.*\n)*nginx_prefix_route_peer_engine_waiting_requests\{[^}]*\} 0\n(?:.*\n)*nginx_prefix_route_peer_engine_reading_age_seconds\{[^}]*\} (?:0\.[3-9]|[1-9]\d*\.\d)\d\d\n/]
--- no_error_log
[alert]
[crit]



=== TEST 32: a page whose counter falls and comes back answers for two engines: one restart is taken, then none, and a warn says why
One address, two engines behind it, answering in turn: a counter of 10
million prompt tokens and one of 5,000.  The first fall is a restart;
the counter that comes back to 10 million marks the page, and later
falls are not.  Until 2026-12-07 each fall was a restart and the
server's blocks went every other round (helper-73).
--- http_config eval
my $page = sub { my $body = "vllm:num_requests_waiting 0\nvllm:num_requests_running 0\nvllm:prompt_tokens_total $_[0]\n";
                 "HTTP/1.1 200 OK\r\nContent-Length: " . length($body) . "\r\n\r\n$body" };
::probed_at("127.0.0.1:" . ::raw_engine([$page->(10000000), $page->(5000)]), ::addr(2))
. ::engine(2, ::vllm(0, 0, 0.1, 1))
--- request eval
["GET /sleep", "GET /status", "GET /log"]
--- response_body_like eval
["ok", qr/\A(?!.*"probe_restarts":(?:[2-9]|\d\d)).*"probe_restarts":1,"engine".*"probe_restarts":0,"engine"/s,
 qr/\A(?![\s\S]*the engine restarted \(its counter[\s\S]*the engine restarted \(its counter)(?![\s\S]*counter came back[\s\S]*counter came back)(?:.*\n)*.*\[warn\] .*prefix_route: the engine's counter came back to 10000000 after it fell from 10000000, taken for a restart: the page answers for more than one engine \(replicas behind one address\?\); no fall is taken for a restart until 10 minutes after it last came back while probing/]
--- no_error_log
[alert]
[crit]

