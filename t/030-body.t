# Reading the request body: the prompt is found whether nginx keeps the body
# in one memory buffer, in several, or in the client body temporary file;
# the backend receives the body unchanged; requests without a usable prompt
# fall back to round robin quietly.
#
# The backends echo the body they receive and name themselves in X-Backend.
# They listen on fixed ports, b1..b4 on 19111..19114: on a fresh zone the
# first choice among idle backends is a hash of the prompt and the server
# names, so fixed names make it the same on every run (the values were found
# by running the tests).
#
# Every block runs with upstream llm over those 4 backends, unless it has its
# own http_config; its --- config (the server-level directives special to
# it, if any) is followed by "location /" proxying to llm, which shows the
# routing variables in X-Prefix-Route; and it checks that error.log has no
# [error], [alert] or [crit] line, unless it has its own --- no_error_log.
use Test::Nginx::Socket 'no_plan';
use FindBin;
use lib $FindBin::Bin;
use PrefixRoute;

$PrefixRoute::FixedPort = 19110;

# backends that echo the body they receive, named in X-Backend
sub echo_backends {
    return join "", map {
        "server { listen " . addr($_) . "; client_body_buffer_size 1m; location / { "
        . "add_header X-Backend b$_; echo_read_request_body; echo \$request_body; } }\n"
    } @_;
}

add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value(main_config => $LoadModule . $LoadEcho) unless defined $block->main_config;
    $block->set_value(http_config => upstream(1 .. 4) . echo_backends(1 .. 4))
        unless defined $block->http_config;
    $block->set_value(config => ($block->config // "")
                      . proxy(path => "/", add => 'add_header X-Bypass $prefix_route_bypass always;'));
    $block->set_value(no_error_log => $NoErrorLog) unless defined $block->no_error_log;
    return $block;
});

# requests that no prompt can be read from: quiet but for an info line, and
# the body text is never logged (the build's notice at start aside)
our $QuietBypass = [qr/\[(?:notice|warn|error|crit|alert|emerg)\].*prefix_route(?! module )/,
                    "[warn]", "[error]", qr/prefix_route.*fine prompt/];

# a system prompt of $n rules of about 55 bytes each
sub rules {
    my $n = shift;
    return CORE::join '', map { "Rule $_: answer in full sentences and cite the manual. " } 1 .. $n;
}

# an OpenAI chat body with that system prompt and one user turn
sub chat {
    my ($n, $user) = @_;
    my $sys = rules($n);
    return "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"$sys\"},"
           . "{\"role\":\"user\",\"content\":\"" . ($user // 'hello') . "\"}]}";
}

# 22,383 bytes of body, 22,313 bytes of canonical prompt
our $Chat20k = chat(400);

# a question about a 20 KB image sent inline (base64, escaped slashes as
# some encoders send them), then a text part: a part by identity
our $Image20k = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":["
    . "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,"
    . ("iVBORw0KGgo\\/AAAANSUhEUg+" x 800) . "\"}},{\"type\":\"text\",\"text\":\"what is it?\"}]}]}";

# 156,273 bytes of body: 7 user turns of 22,310 bytes, more than max_prefix
our $Chat150k = "{\"model\":\"m\",\"messages\":["
    . CORE::join(',', map { "{\"role\":\"user\",\"content\":\"" . rules(400) . "\"}" } 1 .. 7)
    . "]}";

# the body in HTTP/1.1 chunks of 1000 bytes
sub chunked {
    my $body = shift;
    return CORE::join('', map { sprintf "%x\r\n%s\r\n", length $_, $_ } unpack '(a1000)*', $body)
           . "0\r\n\r\n";
}

no_shuffle();
no_root_location();
run_tests();

__DATA__

=== TEST 1: a 20 KB chat body in the client body temporary file: MISS, then HIT on the same backend
--- config
client_body_buffer_size 1k;
--- request eval
[("POST /v1/chat/completions\n$main::Chat20k") x 2]
--- response_headers eval
["X-Prefix-Route: MISS 0 22313\nX-Backend: b1", "X-Prefix-Route: HIT 22272 22313\nX-Backend: b1"]
--- response_body eval
[("$main::Chat20k\n") x 2]
--- error_log
a client request body is buffered to a temporary file



=== TEST 2: the same body in one memory buffer has the same prompt length and backend
client_header_buffer_size 64k: the whole body arrives with the header and is
one buffer (the debug log line "preread 22383" is the whole body).
--- config
client_header_buffer_size 64k;
client_body_buffer_size 1m;
--- log_level: debug
--- request eval
[("POST /v1/chat/completions\n$main::Chat20k") x 2]
--- response_headers eval
["X-Prefix-Route: MISS 0 22313\nX-Backend: b1", "X-Prefix-Route: HIT 22272 22313\nX-Backend: b1"]
--- response_body eval
[("$main::Chat20k\n") x 2]
--- error_log
http client request body preread 22383
--- no_error_log
[error]
[alert]
[crit]
a client request body is buffered to a temporary file



=== TEST 3: the same body in several memory buffers, one per read, has the same prompt length and backend
The body arrives in 5 packets 50 ms apart: the part read with the header,
then one buffer per read.
--- config
client_body_buffer_size 1m;
--- log_level: debug
--- request eval
my @p = unpack '(a5000)*', $main::Chat20k;
my $req = [ "POST /v1/chat/completions\n" . shift(@p), map { { value => $_, delay_before => 0.05 } } @p ];
[$req, $req]
--- response_headers eval
["X-Prefix-Route: MISS 0 22313\nX-Backend: b1", "X-Prefix-Route: HIT 22272 22313\nX-Backend: b1"]
--- response_body eval
[("$main::Chat20k\n") x 2]
--- error_log eval
qr/http client request body recv 5000$/
--- no_error_log
[error]
[alert]
[crit]
a client request body is buffered to a temporary file



=== TEST 4: the same body in chunked encoding, one buffer per chunk, has the same prompt length and backend
Chunks of 1000 bytes: each is a buffer of its own, some split over two reads.
--- config
client_body_buffer_size 1m;
--- log_level: debug
--- request eval
["POST /v1/chat/completions\n" . main::chunked($main::Chat20k),
 "POST /v1/chat/completions\n" . main::chunked($main::Chat20k)]
--- more_headers
Transfer-Encoding: chunked
--- response_headers eval
["X-Prefix-Route: MISS 0 22313\nX-Backend: b1", "X-Prefix-Route: HIT 22272 22313\nX-Backend: b1"]
--- response_body eval
[("$main::Chat20k\n") x 2]
--- error_log eval
qr/http body new buf t:1 f:0 \w+, pos \w+, size: 1000 file: 0/
--- no_error_log
[error]
[alert]
[crit]
a client request body is buffered to a temporary file



=== TEST 5: a 150 KB body in the temporary file is read, cut at max_prefix, and sent unchanged
--- config
client_body_buffer_size 8k;
--- request eval
[("POST /v1/chat/completions\n$main::Chat150k") x 2]
--- response_headers eval
["X-Prefix-Route: MISS 0 65536\nX-Backend: b1", "X-Prefix-Route: HIT 65536 65536\nX-Backend: b1"]
--- response_body eval
[("$main::Chat150k\n") x 2]
--- error_log
a client request body is buffered to a temporary file



=== TEST 6: client_body_in_file_only: a small chat body in the temporary file is read
With client_body_in_file_only even a body that fits in memory is written to
the file, and nginx does not warn about it.
--- config
client_body_in_file_only clean;
client_body_buffer_size 1m;
--- request eval
["POST /v1/chat/completions\n" . main::chat(10), "POST /v1/chat/completions\n" . main::chat(10)]
--- response_headers eval
["X-Prefix-Route: MISS 0 562\nX-Backend: b1", "X-Prefix-Route: HIT 512 562\nX-Backend: b1"]
--- response_body eval
[main::chat(10) . "\n", main::chat(10) . "\n"]
--- log_level: debug
--- error_log eval
qr/http write client request body, bufs/
--- no_error_log
[warn]
[error]
[alert]
[crit]



=== TEST 7: requests without a body are balanced by round robin
--- http_config eval: ::upstream(1 .. 4) . ::backends(1 .. 4)
--- request eval
[("GET /v1/models") x 5]
--- response_headers eval
[("X-Prefix-Route: BYPASS 0 0\nX-Bypass: no_body") x 5]
--- response_body eval
["b1\n", "b2\n", "b3\n", "b4\n", "b1\n"]
--- no_error_log
[error]
[warn]



=== TEST 8: bodies that are not JSON are proxied unchanged by round robin, logged at info level
A text body, and a JSON body cut short.  The log names the error position,
never the body text.
--- request eval
my $long = "A sentence that would make a fine prompt if it were JSON." x 20;
["POST /v1/chat/completions\n$long",
 "POST /v1/chat/completions\n{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"$long"]
--- response_headers eval
["X-Prefix-Route: BYPASS 0 0\nX-Bypass: not_json\nX-Backend: b1", "X-Prefix-Route: BYPASS 0 0\nX-Bypass: not_json\nX-Backend: b2"]
--- response_body eval
my $long = "A sentence that would make a fine prompt if it were JSON." x 20;
["$long\n", "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"$long\n"]
--- error_log eval
qr/\[info\] .*prefix_route: request body is not JSON \((?:invalid syntax|premature end of input): error \d+ at byte \d+\), round robin/
--- no_error_log eval: $::QuietBypass



=== TEST 9: JSON bodies without a prompt are proxied unchanged by round robin, logged at info level
A JSON array, an object without a prompt field, "messages" that is not an
array, an empty "messages" array.
--- request eval
my $long = "A sentence that would make a fine prompt if it were JSON." x 20;
["POST /v1/chat/completions\n[{\"role\":\"user\",\"content\":\"$long\"}]",
 "POST /v1/chat/completions\n{\"model\":\"m\"}",
 "POST /v1/chat/completions\n{\"model\":\"m\",\"messages\":\"$long\"}",
 "POST /v1/chat/completions\n{\"model\":\"m\",\"messages\":[]}"]
--- response_headers eval
["X-Prefix-Route: BYPASS 0 0\nX-Bypass: no_prompt\nX-Backend: b1", "X-Prefix-Route: BYPASS 0 0\nX-Bypass: no_prompt\nX-Backend: b2",
 "X-Prefix-Route: BYPASS 0 0\nX-Bypass: no_prompt\nX-Backend: b3", "X-Prefix-Route: BYPASS 0 0\nX-Bypass: no_prompt\nX-Backend: b4"]
--- response_body eval
my $long = "A sentence that would make a fine prompt if it were JSON." x 20;
["[{\"role\":\"user\",\"content\":\"$long\"}]\n",
 "{\"model\":\"m\"}\n",
 "{\"model\":\"m\",\"messages\":\"$long\"}\n",
 "{\"model\":\"m\",\"messages\":[]}\n"]
--- error_log eval
qr/\[info\] .*prefix_route: request body has no prompt, round robin/
--- no_error_log eval: $::QuietBypass



=== TEST 10: an empty POST body is proxied by round robin
nginx 1.22 hands an empty body over as one empty buffer: the module sees
no body (a debug line), not a body that is not JSON.
--- request eval
[("POST /v1/chat/completions\n") x 2]
--- more_headers
Content-Length: 0
--- response_headers eval
["X-Prefix-Route: BYPASS 0 0\nX-Bypass: no_body\nX-Backend: b1", "X-Prefix-Route: BYPASS 0 0\nX-Bypass: no_body\nX-Backend: b2"]
--- response_body eval
[("\n") x 2]
--- error_log eval
qr/prefix_route: no request body, round robin/
--- no_error_log eval: $::QuietBypass



=== TEST 11: with proxy_request_buffering off a body still being read is not waited for: BYPASS, proxied unchanged
The 22 KB body is still arriving when nginx connects to the backend.
--- config
proxy_request_buffering off;
--- request eval
[("POST /v1/chat/completions\n$main::Chat20k") x 2]
--- response_headers eval
["X-Prefix-Route: BYPASS 0 0\nX-Bypass: unbuffered\nX-Backend: b1", "X-Prefix-Route: BYPASS 0 0\nX-Bypass: unbuffered\nX-Backend: b2"]
--- response_body eval
[("$main::Chat20k\n") x 2]
--- error_log eval
qr/\[info\] .*prefix_route: request body is still being read \(proxy_request_buffering off\?\), round robin/



=== TEST 12: with proxy_request_buffering off a body read whole with the header is routed
nginx turns request buffering back on when the whole body came with the
header (ngx_http_read_client_request_body() of nginx 1.22), so the prompt
is there to be read: MISS, then HIT on the same backend.
--- config
proxy_request_buffering off;
--- request eval
my $small = main::chat(10);
[("POST /v1/chat/completions\n$small") x 2]
--- response_headers eval
["X-Prefix-Route: MISS 0 562\nX-Backend: b1", "X-Prefix-Route: HIT 512 562\nX-Backend: b1"]
--- response_body eval
[main::chat(10) . "\n", main::chat(10) . "\n"]



=== TEST 13: max_prefix=1k: a 10 KB prompt counts as its first 1024 bytes
--- http_config eval
::upstream("zone=llm:1m max_prefix=1k", 1 .. 4) . ::backends(1 .. 4)
--- request eval
my $a = main::chat(200, "first question");
my $b = main::chat(200, "another question");
["POST /v1/chat/completions\n$a", "POST /v1/chat/completions\n$b"]
--- response_headers eval
["X-Prefix-Route: MISS 0 1024", "X-Prefix-Route: HIT 1024 1024"]
--- response_body eval
[("b3\n") x 2]



=== TEST 14: a body with an image inline in the temporary file: MISS, then HIT on the same backend
--- config
client_body_buffer_size 1k;
--- request eval
[("POST /v1/chat/completions\n$main::Image20k") x 2]
--- response_headers eval
["X-Prefix-Route: MISS 0 19301\nX-Backend: b3", "X-Prefix-Route: HIT 19264 19301\nX-Backend: b3"]
--- response_body eval
[("$main::Image20k\n") x 2]
--- error_log
a client request body is buffered to a temporary file



=== TEST 15: the same body in memory has the same prompt length and backend
--- config
client_header_buffer_size 64k;
client_body_buffer_size 1m;
--- request eval
[("POST /v1/chat/completions\n$main::Image20k") x 2]
--- response_headers eval
["X-Prefix-Route: MISS 0 19301\nX-Backend: b3", "X-Prefix-Route: HIT 19264 19301\nX-Backend: b3"]
--- response_body eval
[("$main::Image20k\n") x 2]
--- no_error_log
[error]
[alert]
[crit]
a client request body is buffered to a temporary file



=== TEST 16: a body proxy_set_body replaces is not the prompt: BYPASS, round robin, the backend gets the body set
The engine never sees the client's prompt, so the index must not record it.
--- config
proxy_set_body '{"model":"m","messages":[{"role":"user","content":"set"}]}';
--- request eval
[("POST /v1/chat/completions\n" . main::chat(10)) x 2]
--- response_headers eval
["X-Prefix-Route: BYPASS 0 0\nX-Bypass: body_replaced\nX-Backend: b1", "X-Prefix-Route: BYPASS 0 0\nX-Bypass: body_replaced\nX-Backend: b2"]
--- response_body eval
[("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"set\"}]}\n") x 2]
--- error_log eval
qr/\[info\] .*prefix_route: the body sent to the upstream is not the client's \(proxy_set_body\? proxy_pass_request_body off\?\), round robin/



=== TEST 17: proxy_set_body $request_body sends the client's body: routed as without it
--- config
client_header_buffer_size 64k;
client_body_buffer_size 1m;
proxy_set_body $request_body;
--- request eval
[("POST /v1/chat/completions\n$main::Chat20k") x 2]
--- response_headers eval
["X-Prefix-Route: MISS 0 22313\nX-Backend: b1\n!X-Bypass", "X-Prefix-Route: HIT 22272 22313\nX-Backend: b1\n!X-Bypass"]
--- response_body eval
[("$main::Chat20k\n") x 2]
--- no_error_log
[error]
[alert]
[crit]
the body sent to the upstream



=== TEST 18: proxy_pass_request_body off sends no body: BYPASS, round robin
--- config
proxy_pass_request_body off;
proxy_set_header Content-Length "";
--- request eval
[("POST /v1/chat/completions\n" . main::chat(10)) x 2]
--- response_headers eval
["X-Prefix-Route: BYPASS 0 0\nX-Bypass: body_replaced\nX-Backend: b1", "X-Prefix-Route: BYPASS 0 0\nX-Bypass: body_replaced\nX-Backend: b2"]
--- response_body eval
["\n", "\n"]
--- error_log eval
qr/\[info\] .*prefix_route: the body sent to the upstream is not the client's/



=== TEST 19: proxy_set_body $request_body with the body in the temporary file sends nothing of it: BYPASS
$request_body is empty when the body is in a file.
--- config
client_body_buffer_size 1k;
proxy_set_body $request_body;
--- request eval
[("POST /v1/chat/completions\n$main::Chat20k") x 2]
--- response_headers eval
["X-Prefix-Route: BYPASS 0 0\nX-Bypass: body_replaced\nX-Backend: b1", "X-Prefix-Route: BYPASS 0 0\nX-Bypass: body_replaced\nX-Backend: b2"]
--- response_body eval
["\n", "\n"]
--- error_log eval
qr/\[info\] .*prefix_route: the body sent to the upstream is not the client's/



=== TEST 20: a body set around the client's is another body: BYPASS (helper-57)
"x$request_body" ends with the client's bytes, but the engine gets more.
--- config
client_header_buffer_size 64k;
client_body_buffer_size 1m;
proxy_set_body "x$request_body";
--- request eval
[("POST /v1/chat/completions\n" . main::chat(10)) x 2]
--- response_headers eval
["X-Prefix-Route: BYPASS 0 0\nX-Bypass: body_replaced\nX-Backend: b1", "X-Prefix-Route: BYPASS 0 0\nX-Bypass: body_replaced\nX-Backend: b2"]
--- response_body eval
[("x" . main::chat(10) . "\n") x 2]
--- error_log eval
qr/\[info\] .*prefix_route: the body sent to the upstream is not the client's/



=== TEST 21: the client's body sent twice is another body: BYPASS
--- config
client_header_buffer_size 64k;
client_body_buffer_size 1m;
proxy_set_body "$request_body$request_body";
--- request eval
[("POST /v1/chat/completions\n" . main::chat(10)) x 2]
--- response_headers eval
["X-Prefix-Route: BYPASS 0 0\nX-Bypass: body_replaced\nX-Backend: b1", "X-Prefix-Route: BYPASS 0 0\nX-Bypass: body_replaced\nX-Backend: b2"]
--- response_body eval
[(main::chat(10) . main::chat(10) . "\n") x 2]
--- error_log eval
qr/\[info\] .*prefix_route: the body sent to the upstream is not the client's/
