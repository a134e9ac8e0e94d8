# prefix_route_status: the figures of every prefix_route upstream as JSON,
# or in Prometheus text format with ?format=prometheus; the request
# counters are shared by the workers and survive a reload with the zone;
# access is limited with allow/deny; no prompt text is ever shown.
#
# HUP mode: the blocks reload one running nginx (two workers) and share its
# zones, so they run in order.  Backends b1 and b2 listen on fixed ports
# 19401 and 19402 (upstream llm), b3 on 19403 (upstream other).
use Test::Nginx::Socket 'no_plan';
use FindBin;
use lib $FindBin::Bin;
use PrefixRoute qw(:DEFAULT chat sys user text);

$PrefixRoute::FixedPort = 19400;

our $Http = ::upstream("zone=llm:1m", 1, 2)
          . ::upstream("zone=other:1m", 3)
          . ::backends(1 .. 3);

our $Config = ::proxy() . ::proxy(path => "/other/", to => "other") . <<'CONF';
location = /status {
    prefix_route_status;
}
location = /private {
    allow 192.0.2.1;
    deny all;
    prefix_route_status;
}
CONF

# a 1000-byte system prompt with the marker word "Zanzibarian", then $q
our $System = text("Zanzibarian assistant", 1000);

# TEST 15: 200,000 distinct keys and an escaped one (2.8 MB): some 0.2 s of
# jansson's parse, 200 times the 1 ms that upstream other then allows
our $Keys = '{"model":"m","messages":[{"role":"user","content":"keys"}],"\\u0061":1'
    . join("", map { sprintf ',"k%07d":1', $_ } 1 .. 200_000) . "}";

sub ask { chat([sys($System), user(text($_[0], 100))]) }

# the samples of a Prometheus metric of upstream llm, by their other labels
sub samples {
    my ($page, $metric) = @_;
    my %v;
    while ($page =~ /^nginx_prefix_route_$metric\{upstream="llm"(?:,(\w+="[^"]*"))?\} (\S+)$/mg) {
        $v{$1 // ""} = $2;
    }
    return %v;
}

# TEST 18: the BYPASS counters before the requests
our (%Bypassed, $Bypass);

# TEST 16: a question about an image of 9 MB inline, over the 8 MiB a
# worker keeps to gather a body in one piece
our $Image9m = PrefixRoute::chat_body([sys($System), { role => "user", content => [
    { type => "text", text => "What is in this image?" },
    { type => "image_url",
      image_url => { url => "data:image/png;base64," . ("iVBORw0KGgo" x 820_000) } }] }]);

add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value(main_config => $LoadModule) unless defined $block->main_config;
    $block->set_value(http_config => $Http) unless defined $block->http_config;
    $block->set_value(config => $Config) unless defined $block->config;
    $block->set_value(init => "PrefixRoute::wait_for_old_workers();") unless defined $block->init;
    $block->set_value(no_error_log => $NoErrorLog) unless defined $block->no_error_log;
    return $block;
});

master_on();
workers(2);
use_hup();
no_shuffle();
run_tests();

__DATA__

=== TEST 1: JSON: counters by status, prompt and matched bytes, index and peers
A MISS then a HIT of the same system prompt (the 1009-byte system segment
is 15 full blocks, 960 bytes), and a GET without a prompt (BYPASS).  A
prompt is 1116 bytes: RS "system" US "c" + 1000, RS "user" US "c" + 100,
17 full blocks; the two share 15, so the index holds 19, all on the
backend that got both: 19 entries and 19 pairs of 32 bytes, 1216 bytes;
the 15 the backend was sent again are protected.
--- request eval
[::ask("first"), ::ask("second"), "GET /v1/models", "GET /status"]
--- response_body_like eval
["^b[12]\n\$", "^b[12]\n\$", "^b[12]\n\$",
 qr/\A\{"upstreams":\[\{"name":"llm","zone":"llm","zone_size":1048576,"zone_used":\d+,"blocks":19,"holders":19,"protected":15,"held_back":0,"tenants":1,"evictions":0,"forgotten":0,"index_bytes":1216,"capped":0,"mending":0,"records":2,"prompt_bytes":2232,"matched_bytes":960,"longest_bytes":960,"predicted_bytes":960,"reusable":1,"jansson_bodies":0,"parse_stopped":0,"predicted_tokens":0,"reported_tokens":0,"shadow":0,"fail_open":0,"zone_started":\d+,"requests":\{"BYPASS":1,"MISS":1,"HIT":1,"SPILL":0,"NONE":0\},"bypassed":\{"no_body":1,"unbuffered":0,"body_replaced":0,"not_json":0,"no_prompt":0,"parse_budget":0,"max_parse":0,"no_memory":0,"lists_changed":0\},"lock_hold_ns_log2":\[(?:\d+,){31}\d+\],"lock_hold_ns_sum":[1-9]\d*,"models":\[\],"peers":\[\{"name":"127\.0\.0\.1:19401","server":"127\.0\.0\.1:19401","state":"up","inflight":0,"queued_bytes":0,"blocks":(?:19|0),"dropping":0,"requests":(?:2|0),"hits":(?:1|0),"errors":0,"feedback_responses":0,"reported_prompt_tokens":0,"reported_cached_tokens":0,"predicted_cached_tokens":0,"feedback_agreed":0,"feedback_under":0,"feedback_over":0,"feedback_dropped":0,"learned_capacity":0,"probes":0,"probe_failures":0,"probe_restarts":0\},\{"name":"127\.0\.0\.1:19402","server":"127\.0\.0\.1:19402","state":"up","inflight":0,"queued_bytes":0,"blocks":(?:19|0),"dropping":0,"requests":(?:2|0),"hits":(?:1|0),"errors":0,"feedback_responses":0,"reported_prompt_tokens":0,"reported_cached_tokens":0,"predicted_cached_tokens":0,"feedback_agreed":0,"feedback_under":0,"feedback_over":0,"feedback_dropped":0,"learned_capacity":0,"probes":0,"probe_failures":0,"probe_restarts":0\}\]\},\{"name":"other","zone":"other",.*"requests":\{"BYPASS":0,"MISS":0,"HIT":0,"SPILL":0,"NONE":0\}.*\],"version":"[^"]+","build_id":"[0-9a-f]*"\}\n\z/s]
--- response_headers eval
["", "", "", "Content-Type: application/json"]



=== TEST 2: the counters are shared by the workers and survive a reload with the zone
Same configuration: nginx reloads and keeps the zones.  One more HIT.
--- request eval
[::ask("third"), "GET /status"]
--- response_body_like eval
["^b[12]\n\$",
 qr/"name":"llm".*"requests":\{"BYPASS":1,"MISS":1,"HIT":2,"SPILL":0,"NONE":0\}/s]



=== TEST 3: Prometheus text format
--- request
GET /status?format=prometheus
--- response_headers
Content-Type: text/plain; version=0.0.4; charset=utf-8
--- response_body_like eval
my @lines = (
    '# HELP nginx_prefix_route_build_info [^\n]+',
    '# TYPE nginx_prefix_route_build_info gauge',
    'nginx_prefix_route_build_info\{version="[^"]+",build_id="[0-9a-f]*"\} 1',
    '# HELP nginx_prefix_route_zone_size_bytes [^\n]+',
    '# TYPE nginx_prefix_route_zone_size_bytes gauge',
    'nginx_prefix_route_zone_size_bytes\{upstream="llm"\} 1048576',
    'nginx_prefix_route_zone_size_bytes\{upstream="other"\} 1048576',
    '(?:.*\n)*?# TYPE nginx_prefix_route_requests_total counter',
    'nginx_prefix_route_requests_total\{upstream="llm",status="BYPASS"\} 1',
    'nginx_prefix_route_requests_total\{upstream="llm",status="MISS"\} 1',
    'nginx_prefix_route_requests_total\{upstream="llm",status="HIT"\} 2',
    'nginx_prefix_route_requests_total\{upstream="llm",status="SPILL"\} 0',
    'nginx_prefix_route_requests_total\{upstream="llm",status="NONE"\} 0',
    '(?:.*\n)*?nginx_prefix_route_peer_state\{upstream="llm",peer="127\.0\.0\.1:19401",state="up"\} 1',
    '(?:.*\n)*?# TYPE nginx_prefix_route_peer_requests_total counter',
    'nginx_prefix_route_peer_requests_total\{upstream="llm",peer="127\.0\.0\.1:19401"\} \d+',
    'nginx_prefix_route_peer_requests_total\{upstream="llm",peer="127\.0\.0\.1:19402"\} \d+',
    'nginx_prefix_route_peer_requests_total\{upstream="other",peer="127\.0\.0\.1:19403"\} 0',
);
my $re = CORE::join "\n", @lines;
qr/\A$re\n/



=== TEST 4: the status shows no prompt text
--- request
GET /status?format=prometheus
--- response_body_unlike
Zanzibarian



=== TEST 5: an unknown format is a 400, a POST a 405
--- request eval
["GET /status?format=xml", "POST /status\nx"]
--- error_code eval
[400, 405]



=== TEST 6: allow and deny limit access to it as to any location
--- request
GET /private
--- error_code: 403
--- no_error_log
[alert]
[crit]



=== TEST 7: every Prometheus line is a HELP or TYPE comment or a sample with labels and a number, an integer but for the lock histogram's seconds
--- request
GET /status?format=prometheus
--- response_body_like eval
qr/\A(?:(?:# HELP nginx_prefix_route_\w+ [^\n]+|# TYPE nginx_prefix_route_\w+ (?:gauge|counter|histogram)|nginx_prefix_route_\w+\{\w+="[^"\n]*"(?:,\w+="[^"\n]*")*\} \d+|nginx_prefix_route_lock_hold_seconds_(?:bucket\{upstream="\w+",le="(?:\d+\.\d{9}|\+Inf)"\} \d+|sum\{upstream="\w+"\} \d+\.\d{9}|count\{upstream="\w+"\} \d+))\n)+\z/



=== TEST 8: HTML for a browser (Accept: text/html) or ?format=html: a row per peer with its state
--- request eval
["GET /status", "GET /status?format=html"]
--- more_headers eval
["Accept: text/html,application/xhtml+xml,*/*;q=0.8", ""]
--- response_headers eval
["Content-Type: text/html; charset=utf-8", "Content-Type: text/html; charset=utf-8"]
--- response_body_like eval
[(qr{<meta http-equiv="refresh" content="5">.*<h2>upstream llm</h2>\n<p>zone llm: \d+ of 1024 KiB used; blocks indexed: 21; pairs protected: \d+ of 21 \(held back 0 times\); tenants: 1; evicted: 0; forgotten: 0<br>requests: BYPASS 1 MISS 1 HIT 2 SPILL 0 NONE 0 \(BYPASS: no_body 1\); prompt bytes matched: [\d.]+%; held by the best server: [\d.]+%</p>\n<table>.*<tr><td>127\.0\.0\.1:19401</td><td class="up">up</td>.*<tr><td>127\.0\.0\.1:19402</td><td class="up">up</td>.*<h2>upstream other</h2>.*<tr><td>127\.0\.0\.1:19403</td><td class="up">up</td><td>0</td><td>0</td><td>0</td><td>0</td><td>-</td><td>0</td><td>-</td><td>-</td><td>-</td><td>-</td><td>-</td><td>-</td></tr>\n</table>\n(?:<p>Charts of the last 30 minutes[^<]*</p>\n|<div class="charts">.*?</div>\n)</body></html>\n\z}s) x 2]



=== TEST 9: names that need escaping stay valid JSON, Prometheus text and HTML
An upstream named a"b\c<d> over a unix socket named with a quote and a
backslash: JSON escapes them (\" and \\), Prometheus label values too,
HTML with entities.
--- http_config eval
$::Http . <<'_EOC_'
upstream "a\"b\\c<d>" {
    prefix_route zone=odd:1m;
    server "unix:/tmp/x\"y\\z.sock";
}
_EOC_
--- request eval
["GET /status", "GET /status?format=prometheus", "GET /status?format=html"]
--- response_body_like eval
[qr/\{"name":"a\\"b\\\\c<d>","zone":"odd",.*"peers":\[\{"name":"unix:\/tmp\/x\\"y\\\\z\.sock","server":"unix:\/tmp\/x\\"y\\\\z\.sock","state":"up"/s,
 qr/nginx_prefix_route_zone_size_bytes\{upstream="a\\"b\\\\c<d>"\} 1048576\n.*nginx_prefix_route_peer_state\{upstream="a\\"b\\\\c<d>",peer="unix:\/tmp\/x\\"y\\\\z\.sock",state="up"\} 1\n/s,
 qr/<h2>upstream a&quot;b\\c&lt;d&gt;<\/h2>.*<tr><td>unix:\/tmp\/x&quot;y\\z\.sock<\/td>/s]



=== TEST 10: two server lines with one address are one server: a prompt HITs it again whichever line took it, and the status shows it once
Upstream dup over b1, b2 and b1 again.  Each Prometheus series of a
server appears once (a repeated label set is an invalid page), and the
JSON lists two servers.
--- http_config eval
$::Http . ::upstream("zone=dup:1m", 1, 2, 1)
--- config eval
$::Config . ::proxy(path => "/dup/", to => "dup")
--- request eval
my @r = map { (my $q = ::ask("dup")) =~ s{^POST /v1/}{POST /dup/v1/}; $q } 1 .. 3;
[@r, "GET /status?format=prometheus", "GET /status"]
--- response_headers eval
["X-Prefix-Route: MISS 0 1116", ("X-Prefix-Route: HIT 1088 1116") x 2, "", ""]
--- response_body_like eval
my $one = sub { my $s = quotemeta shift; qr/\A(?:(?!$s).)*$s(?:(?!$s).)*\z/s };
["^(b[12])\n\$", "^b[12]\n\$", "^b[12]\n\$",
 $one->('nginx_prefix_route_peer_requests_total{upstream="dup",peer="127.0.0.1:19401"}'),
 qr/"name":"dup","zone":"dup",.*"peers":\[\{"name":"127\.0\.0\.1:19401",[^\]]*\},\{"name":"127\.0\.0\.1:19402",[^\]]*\}\]\}/s]



=== TEST 11: the status names the module's version, debian/changelog's, and the build ID of the file nginx loaded, in every format
The build ID is the linker's note in the module's file ("readelf -n"): a
reload keeps the build in memory, so after an upgrade the status tells
whether the new one runs.
--- request eval
["GET /status", "GET /status?format=prometheus", "GET /status?format=html"]
--- response_body_like eval
open my $f, '<', "$FindBin::Bin/../debian/changelog" or die "changelog: $!";
my ($v) = <$f> =~ /\(([^)-]+)/ or die "no version in debian/changelog";
# a file linked without one (-Wl,--build-id=none): ""
my ($id) = `readelf -n $ENV{TEST_NGINX_MODULE}` =~ /Build ID: ([0-9a-f]+)/;
$id //= "";
[qr/\A\{"upstreams":\[.*\],"version":"\Q$v\E","build_id":"$id"\}\n\z/s,
 qr/\A# HELP nginx_prefix_route_build_info [^\n]+\n# TYPE nginx_prefix_route_build_info gauge\nnginx_prefix_route_build_info\{version="\Q$v\E",build_id="$id"\} 1\n/,
 qr/<h1>prefix_route<\/h1>\n<p>version \Q$v\E, build ID $id<\/p>\n/]



=== TEST 12: names with bytes that are not UTF-8 stay valid JSON and Prometheus text: each such byte is U+FFFD, a well-formed character stays
An upstream named u, the byte 0xFF, v over a unix socket whose name has a
lead byte without its continuation (C3 then "("), an encoded surrogate
(ED A0 80: three bytes, none well formed) and an e with acute accent (C3
A9, kept).  nginx takes any bytes in these names; the pages are UTF-8.
--- http_config eval
$::Http . "upstream \"u\xffv\" {\n"
        . "    prefix_route zone=bytes:1m;\n"
        . "    server \"unix:/tmp/x\xc3(\xed\xa0\x80y\xc3\xa9.sock\";\n"
        . "}\n"
--- request eval
["GET /status", "GET /status?format=prometheus"]
--- response_body_like eval
my $r = "\xef\xbf\xbd";
my $sock = "unix:\\/tmp\\/x$r\\($r$r${r}y\xc3\xa9\\.sock";
# the whole page is well-formed UTF-8 (RFC 3629, section 4)
my $utf8 = '\A(?:[\x00-\x7f]|[\xc2-\xdf][\x80-\xbf]|\xe0[\xa0-\xbf][\x80-\xbf]'
         . '|[\xe1-\xec\xee\xef][\x80-\xbf]{2}|\xed[\x80-\x9f][\x80-\xbf]'
         . '|\xf0[\x90-\xbf][\x80-\xbf]{2}|[\xf1-\xf3][\x80-\xbf]{3}'
         . '|\xf4[\x80-\x8f][\x80-\xbf]{2})*\z';
[qr/(?=$utf8).*"name":"u${r}v","zone":"bytes",.*"peers":\[\{"name":"$sock","server":"$sock","state":"up"/s,
 qr/(?=$utf8).*nginx_prefix_route_peer_state\{upstream="u${r}v",peer="$sock",state="up"\} 1\n/s]



=== TEST 13: a server whose first line is down and another line not takes the requests, and the status shows it up, once; a server down on its only line shows down
Upstream twice: b1 down, b1, b2 down.  Round robin counts the lines
apart: the second line of b1 takes every request.
--- http_config eval
$::Http . ::upstream("zone=twice:1m", "1 down", 1, "2 down")
--- config eval
$::Config . ::proxy(path => "/twice/", to => "twice")
--- request eval
my @r = map { (my $q = ::ask("twice $_")) =~ s{^POST /v1/}{POST /twice/v1/}; $q } 1 .. 2;
[@r, "GET /status?format=prometheus", "GET /status"]
--- response_body_like eval
my $p = 'nginx_prefix_route_peer_state\{upstream="twice",peer="127\.0\.0\.1:1940';
["^b1\n\$", "^b1\n\$",
 qr/\A(?=(?:(?!${p}1").)*${p}1",state="up"\} 1\n(?:(?!${p}1").)*\z)(?=.*${p}2",state="down"\} 1\n)/s,
 qr/"name":"twice","zone":"twice",.*"peers":\[\{"name":"127\.0\.0\.1:19401","server":"127\.0\.0\.1:19401","state":"up",[^\]]*\},\{"name":"127\.0\.0\.1:19402","server":"127\.0\.0\.1:19402","state":"down",/s]



=== TEST 14: bodies the fast path reads (a chat, tools with real numbers and exponents) leave jansson_bodies as it was; one it leaves to jansson (an escaped key) adds one, in JSON and Prometheus text
--- request eval
["GET /status", ::ask("fast"),
 "POST /v1/chat/completions\n"
 . '{"model":"m","temperature":0.7,"top_p":9.5e-1,"tools":[{"type":'
 . '"function","function":{"name":"f","parameters":{"type":"object",'
 . '"properties":{"x":{"type":"number","minimum":-0.5,"maximum":1E+3,'
 . '"default":2.5e-7}}}}}],"messages":[{"role":"user","content":"reals"}]}',
 "POST /v1/chat/completions\n"
 . '{"model":"m","messages":[{"role":"user","cont\\u0065nt":"escaped"}]}',
 "GET /status", "GET /status?format=prometheus"]
--- response_body_like eval
["\"name\":\"llm\",.*\"jansson_bodies\":0,", "^b[12]\n\$", "^b[12]\n\$",
 "^b[12]\n\$",
 "\"name\":\"llm\",.*\"jansson_bodies\":1,.*\"name\":\"other\",.*\"jansson_bodies\":0,",
 qr/# TYPE nginx_prefix_route_jansson_bodies_total counter\nnginx_prefix_route_jansson_bodies_total\{upstream="llm"\} 1\nnginx_prefix_route_jansson_bodies_total\{upstream="other"\} 0\n/]



=== TEST 15: a body whose parse is stopped at max_parse adds one to parse_stopped, to the bypassed for max_parse and to jansson_bodies, in JSON and Prometheus text; the escaped key parsed in time did not
--- http_config eval
::upstream("zone=llm:1m", 1, 2) . ::upstream("zone=other:1m max_parse=1ms", 3)
. ::backends(1 .. 3)
--- request eval
["GET /status", "POST /other/v1/chat/completions\n$::Keys", "GET /status",
 "GET /status?format=prometheus"]
--- response_body_like eval
["\"name\":\"other\",.*\"jansson_bodies\":0,\"parse_stopped\":0,", "^b3\n\$",
 "\"name\":\"llm\",.*\"jansson_bodies\":1,\"parse_stopped\":0,.*\"name\":\"other\",.*\"jansson_bodies\":1,\"parse_stopped\":1,.*\"requests\":\\{\"BYPASS\":1,.*\"bypassed\":\\{[^}]*\"max_parse\":1,",
 qr/# TYPE nginx_prefix_route_parse_stopped_total counter\nnginx_prefix_route_parse_stopped_total\{upstream="llm"\} 0\nnginx_prefix_route_parse_stopped_total\{upstream="other"\} 1\n.*nginx_prefix_route_bypassed_total\{upstream="other",reason="max_parse"\} 1\n/s]



=== TEST 16: a body over 8 MiB (an image inline, in the temporary file) is read by the fast path: MISS then HIT, jansson_bodies stays 0
--- http_config eval
::upstream("zone=llm:1m", 1, 2) . ::upstream("zone=big:1m max_parse=off", 3)
. ::backends(1 .. 3)
--- config eval
::proxy(path => "/big/", to => "big") . <<'CONF';
location = /status {
    prefix_route_status;
}
CONF
--- request eval
["POST /big/v1/chat/completions\n$::Image9m", "POST /big/v1/chat/completions\n$::Image9m",
 "GET /status"]
--- response_body_like eval
["^b3\n\$", "^b3\n\$",
 "\"name\":\"big\",.*\"jansson_bodies\":0,\"parse_stopped\":0,.*\"requests\":\\{\"BYPASS\":0,\"MISS\":1,\"HIT\":1,"]



=== TEST 17: zone_started is when the zone was made, in s since the epoch, for each zone, in JSON and Prometheus text
--- request eval
["GET /status", "GET /status?format=prometheus"]
--- response_body_filters eval
my $near = sub { my @t = @_; (@t == 2 && !grep { abs(time() - $_) > 600 } @t) ? "now\n" : "not now: @t\n" };
[[sub { $near->($_[0] =~ /"zone_started":(\d+),/g) }],
 [sub { $near->($_[0] =~ /^nginx_prefix_route_zone_start_time_seconds\{upstream="(?:llm|other)"\} (\d+)$/mg) }]]
--- response_body eval
["now\n", "now\n"]



=== TEST 18: each BYPASS is counted by why, in JSON and Prometheus text, and the reasons add up to the BYPASS requests
A GET without a body, a body that is not JSON, two without a prompt.
--- request eval
["GET /status?format=prometheus", "GET /v1/models", "POST /v1/chat/completions\nnot JSON",
 "POST /v1/chat/completions\n{\"model\":\"m\"}", "POST /v1/chat/completions\n{\"model\":\"m\"}",
 "GET /status?format=prometheus", "GET /status"]
--- response_body_filters eval
my $sum = sub { my %v = @_; my $n = 0; $n += $_ for values %v; $n };
[[sub { %::Bypassed = main::samples($_[0], "bypassed_total");
        my %r = main::samples($_[0], "requests_total");
        $::Bypass = $r{'status="BYPASS"'};
        "before\n" }],
 [], [], [], [],
 [sub { my %v = main::samples($_[0], "bypassed_total");
        my %r = main::samples($_[0], "requests_total");
        CORE::join("", map { "$_ +" . ($v{qq{reason="$_"}} - $::Bypassed{qq{reason="$_"}}) . "\n" }
                   qw(no_body not_json no_prompt unbuffered body_replaced parse_budget max_parse no_memory lists_changed))
        . "BYPASS +" . ($r{'status="BYPASS"'} - $::Bypass) . "\n"
        . ($sum->(%v) == $r{'status="BYPASS"'} ? "adds up\n" : "reasons " . $sum->(%v) . " of $r{'status=\"BYPASS\"'}\n") }],
 [sub { my ($b) = $_[0] =~ /"name":"llm",.*?"requests":\{"BYPASS":(\d+),/;
        my ($w) = $_[0] =~ /"name":"llm",.*?"bypassed":\{([^}]*)\}/;
        my $n = 0; $n += $_ for $w =~ /:(\d+)/g;
        $n == $b ? "JSON adds up\n" : "JSON: reasons $n of $b\n" }]]
--- response_body_like eval
["^before\n\$", ("^b[12]\n\$") x 4,
 "^no_body \\+1\nnot_json \\+1\nno_prompt \\+2\nunbuffered \\+0\nbody_replaced \\+0\nparse_budget \\+0\nmax_parse \\+0\nno_memory \\+0\nlists_changed \\+0\nBYPASS \\+4\nadds up\n\$",
 "^JSON adds up\n\$"]
--- no_error_log
[error]
[alert]
[crit]




=== TEST 19: the zone mutex hold times in Prometheus text are a histogram of the JSON's buckets: bounds rising, counts never falling, +Inf the count, one hold per balancer call
Two prompts, then the pages.  Each routed request holds the mutex at least
once (the choice), so the count is at least the MISS and HIT requests.
--- request eval
[::ask("hold one"), ::ask("hold two"), "GET /status?format=prometheus"]
--- response_body_filters eval
[[], [],
 [sub { my $page = shift;
        my (@le, @n);
        while ($page =~ /^nginx_prefix_route_lock_hold_seconds_bucket\{upstream="llm",le="([^"]+)"\} (\d+)$/mg) {
            push @le, $1; push @n, $2;
        }
        my ($count) = $page =~ /^nginx_prefix_route_lock_hold_seconds_count\{upstream="llm"\} (\d+)$/m;
        my ($sum) = $page =~ /^nginx_prefix_route_lock_hold_seconds_sum\{upstream="llm"\} ([\d.]+)$/m;
        my %r = main::samples($page, "requests_total");
        my @bad;
        push @bad, "no +Inf last" unless @le && $le[-1] eq "+Inf";
        push @bad, "bounds not rising" if grep { $le[$_] >= $le[$_ + 1] } 0 .. $#le - 2;
        push @bad, "a count falls" if grep { $n[$_] > $n[$_ + 1] } 0 .. $#n - 1;
        push @bad, "+Inf $n[-1] is not the count $count" unless $n[-1] == $count;
        push @bad, "count $count under the routed requests"
            if $count < $r{'status="MISS"'} + $r{'status="HIT"'} + $r{'status="SPILL"'};
        push @bad, "no time held" unless $sum > 0;
        push @bad, "first bound $le[0]" unless $le[0] eq "0.000000255";
        @bad ? CORE::join("\n", @bad) . "\n" : "a histogram\n" }]]
--- response_body_like eval
["^b[12]\n\$", "^b[12]\n\$", "^a histogram\n\$"]



=== TEST 20: ?check=1 adds each upstream's index_errors to the Prometheus text, 0 for a sound index; without it there is none
--- request eval
["GET /status?format=prometheus&check=1", "GET /status?format=prometheus"]
--- response_body_like eval
[qr/# TYPE nginx_prefix_route_index_errors gauge\nnginx_prefix_route_index_errors\{upstream="llm"\} 0\nnginx_prefix_route_index_errors\{upstream="other"\} 0\n/,
 qr/\A(?![\s\S]*index_errors)/]
