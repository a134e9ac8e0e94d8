# The zone under pressure from requests in flight:
# when the zone is full, counting a request must not free index entries a
# request is using, and every request in flight must be counted, whatever
# the zone holds.  What the module did before:
#
#   - a long prompt, sent again while about 130 requests are in flight on a
#     zone it fills, made a worker crash holding the zone mutex (the charge
#     freed entries of the prompt's matched chain, the index update then
#     wrote into them); the zone, kept across a reload, crashed every
#     routed request after that;
#   - on a zone full of a flood of distinct prompts, requests in flight
#     beyond the first 127 were not counted by the status endpoint.
#
# Requests in flight are subrequests sent all at once by one request
# (burst() below, echo module) to a backend that answers after 0.2 s: nginx
# starts them one after the other in one pass, and the last one reads the
# status before any answer is read, while all the others are in flight.
# After each pressure phase "GET /status?check=1" walks the index:
# "index_errors" of an upstream is the number of inconsistencies found.
#
# HUP mode, two workers: the blocks reload one running nginx, so a crash
# shows as the master's "[alert] ... exited on signal", and a zone of the
# same name and size is kept from one block to the next (TEST 2 relies on
# it; the other blocks use zones of their own).  Backend b1 listens on the
# fixed port 19131.
use Test::Nginx::Socket 'no_plan';
use FindBin;
use lib $FindBin::Bin;
use PrefixRoute qw(:DEFAULT chat chat_body user text);

$PrefixRoute::FixedPort = 19130;

# a long prompt: 40 KB, 2500 blocks of 16 bytes, more than a 128k zone
# holds (about 900 blocks): it fills the zone
our $Long = text("long", 40000);

# short questions, under one block of 16 bytes of canonical prompt: they
# add nothing to the index, only their charges press on the zone
sub short { chat_body([user(sprintf "q%03d", $_[0])]) }

# a prompt of $len bytes, tagged $tag
sub prompt { chat_body([user(text(@_))]) }

# a location $uri that sends @reqs as subrequests all at once (echo
# module), in order: each a Chat Completions body (up to 4 KB), the name of
# a file of html/ that holds one (user_files: longer bodies), or "status"
# (GET /status, JSON)
sub burst {
    my ($uri, @reqs) = @_;
    my $c = "location = $uri {\n";
    for (@reqs) {
        $c .= "    echo_subrequest_async "
            . ($_ eq "status" ? "GET /status -q format=json"
               : /^\{/ ? "POST /v1/chat/completions -b '$_'"
               : "POST /v1/chat/completions -f \$TEST_NGINX_SERVER_ROOT/html/$_")
            . ";\n";
    }
    return "$c}\n";
}

# the routing location (X-Prefix-Route: $prefix_route_status) to upstream
# $to, and the status; bodies of up to 1 MB stay in memory
sub front {
    my $to = shift;
    return proxy(to => $to, header => '$prefix_route_status',
                 add => "client_body_buffer_size 1m;")
           . "location = /status {\n    prefix_route_status;\n}\n";
}

# JSON in a regex: (?&str) a string, (?&val) any value
our $Json = '(?(DEFINE)(?<str>"(?:[^"\\\\]|\\\\.)*")'
          . '(?<val>(?&str)|[-+.\w]+|\{(?:(?&str):(?&val),?)*\}|\[(?:(?&val),?)*\]))';

# the status JSON, after a burst of $n subrequests that b1 answered: one
# peer, with $n requests in flight (the burst's, counted from a zone that
# is full)
sub inflight {
    my $n = shift;
    return qr/\A(?:b1\n){$n}\{"upstreams":\[.*\{"name":"127\.0\.0\.1:19131"(?:,(?&str):(?&val))*?,"inflight":$n[,}]$Json/s;
}

# GET /status?check=1: the index walk of every upstream @names found no
# inconsistency, and nothing is in flight any more
sub consistent {
    my $re = join "", map { qq/(?=.*?\\{"name":"$_"(?:,(?&str):(?&val))*?,"index_errors":0[,}])/ } @_;
    return qr/\A\{"upstreams":\[$re(?!.*"inflight":[1-9])$Json/s;
}

add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value(main_config => $LoadModule . $LoadEcho) unless defined $block->main_config;
    $block->set_value(init => "PrefixRoute::wait_for_old_workers();") unless defined $block->init;
    $block->set_value(no_error_log => $NoErrorLog . "exited on signal\n")
        unless defined $block->no_error_log;
    $block->set_value(timeout => 5) unless defined $block->timeout;
    return $block;
});

master_on();
workers(2);
# a burst at debug level writes tens of MB of error.log
log_level("warn");
# a burst of 400 requests in flight: 400 connections to b1 and 400 of b1
worker_connections(2048);
use_hup();
no_shuffle();
run_tests();

__DATA__

=== TEST 1: a long prompt sent again while ~130 requests are in flight on a zone it fills: no crash, all counted
The long prompt fills the 128k zone; then /burst holds 100 short questions
in flight, and 30 more each followed by the long prompt again, so that the
long prompt comes back while the requests in flight fill the zone (about
130 in the report), whatever the exact point.  Every subrequest is
answered by b1, the status read last counts all 160 in flight, and the
index is sound after it and still routes: the long prompt is a HIT, a new
prompt a MISS.
--- http_config eval: ::upstream("zone=llm:128k block=16 capacity=0", 1) . ::backends({ sleep => 0.2 }, 1)
--- config eval
::front("llm")
. ::burst("/burst", (map { ::short($_) } 1 .. 100),
                    (map { (::short($_), "long.json") } 101 .. 130),
                    "status")
--- user_files eval
">>> long.json\n" . ::chat_body([::user($::Long)])
--- request eval
[::chat([::user($::Long)]),
 "GET /burst",
 ::chat([::user($::Long)]),
 "POST /v1/chat/completions\n" . ::prompt("after", 1000),
 "GET /status?check=1&format=json"]
--- error_code eval
[(200) x 5]
--- response_headers eval
["X-Prefix-Route: MISS", "", "X-Prefix-Route: HIT", "X-Prefix-Route: MISS", ""]
--- response_body_like eval
["^b1\n\$", ::inflight(160), "^b1\n\$", "^b1\n\$", ::consistent("llm")]



=== TEST 2: after a reload that keeps the zone, the index is sound and routes
Same configuration: the zone of TEST 1, with what the pressure left in
it, is kept.  Only check=1 walks the index: check=0 does not.
--- http_config eval: ::upstream("zone=llm:128k block=16 capacity=0", 1) . ::backends({ sleep => 0.2 }, 1)
--- config eval
::front("llm")
--- request eval
["GET /status?check=1&format=json",
 "POST /v1/chat/completions\n" . ::prompt("reloaded", 1000),
 ::chat([::user($::Long)]),
 "GET /status?check=1&format=json",
 "GET /status?check=0&format=json"]
--- error_code eval
[(200) x 5]
--- response_headers eval
["", "X-Prefix-Route: MISS", "X-Prefix-Route: HIT", "", ""]
--- response_body_like eval
[::consistent("llm"), "^b1\n\$", "^b1\n\$", ::consistent("llm"),
 qr/\A(?!.*"index_errors")\{"upstreams":\[\{"name":"llm"/s]



=== TEST 3: one long prompt sent by 160 concurrent requests on a zone it fills: all counted
A hot prompt: 160 requests in flight, each matching the long prompt's
chain while the zone is full; all are counted (the old code counted 127).
--- http_config eval: ::upstream("zone=hot:128k block=16 capacity=0", 1) . ::backends({ sleep => 0.2 }, 1)
--- config eval
::front("hot") . ::burst("/burst", ("long.json") x 160, "status")
--- user_files eval
">>> long.json\n" . ::chat_body([::user($::Long)])
--- request eval
[::chat([::user($::Long)]),
 "GET /burst",
 ::chat([::user($::Long)]),
 "GET /status?check=1&format=json"]
--- error_code eval
[(200) x 4]
--- response_headers eval
["X-Prefix-Route: MISS", "", "X-Prefix-Route: HIT", ""]
--- response_body_like eval
["^b1\n\$", ::inflight(160), "^b1\n\$", ::consistent("hot")]



=== TEST 4: 400 requests in flight on a zone full of distinct prompts are all counted
/flood sends 60 distinct 2 KB prompts (about 1900 blocks of 64 bytes
where the 128k zone holds about 900): the zone is full, its pages shared
by many prompts.  Then /burst holds 400 distinct prompts in flight and
reads the status: the sum of the peers' "inflight" (one peer) is 400.
--- http_config eval: ::upstream("zone=busy:128k", 1) . ::backends({ sleep => 0.2 }, 1)
--- config eval
::front("busy")
. ::burst("/flood", map { ::prompt("flood$_", 2000) } 1 .. 60)
. ::burst("/burst", (map { ::prompt("busy$_", 300) } 1 .. 400), "status")
--- request eval
["GET /flood",
 "GET /burst",
 "POST /v1/chat/completions\n" . ::prompt("after", 1000),
 "GET /status?check=1&format=json"]
--- error_code eval
[(200) x 4]
--- response_headers eval
["", "", "X-Prefix-Route: MISS", ""]
--- response_body_like eval
[qr/\A(?:b1\n){60}\z/, ::inflight(400), "^b1\n\$", ::consistent("busy")]
