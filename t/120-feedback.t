# Feedback from the engines: the "usage" of each prefix_route response, JSON
# or a stream, is read as it passes (its head and tail only) and compared
# with the index's prediction; the response reaches the client unchanged;
# a response that cannot be read leaves the index and the counters as they
# were; with feedback=correct, when the engine held less than half the
# prediction, what the index recorded for that server before the evicted
# prefix is dropped.
#
# The backends answer like engines: each location returns a fixed body
# with a fixed usage, whatever the prompt.  Every block's upstream is
# "llm", prefix_route zone=llm:1m over b1 alone unless the block says
# otherwise; /v1/ proxies to it and shows the routing variables in
# X-Prefix-Route; logs/fb.log gets $prefix_route_cached_tokens of each
# request ("-": none reported), which GET /fb returns; GET /status is the
# JSON status.  nginx runs as on a host up 50 days (long_uptime()): TEST 9
# once dropped the blocks there, comparing a 32-bit stamp with the 64-bit
# clock.
use Test::Nginx::Socket 'no_plan';
use FindBin;
use lib $FindBin::Bin;
use PrefixRoute qw(:DEFAULT chat chat_body sys user text);

# a body of usage JSON: prompt and cached tokens
sub usage {
    my ($prompt, $cached) = @_;
    return "{\\\"usage\\\":{\\\"prompt_tokens\\\":$prompt,"
         . "\\\"prompt_tokens_details\\\":{\\\"cached_tokens\\\":$cached}}}";
}

# backend b1: an engine whose answers carry usage in different shapes
our $Engine = "server {\n    listen " . ::addr(1) . ";\n" . <<'_EOC_' . "}\n";
    default_type application/json;
    location /v1/json {
        return 200 '{"id":"c1","choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":100,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":64}}}';
    }
    location /v1/sse {
        default_type text/event-stream;
        return 200 'data: {"choices":[{"delta":{"content":"x"}}],"usage":null}\n\ndata: {"choices":[],"usage":{"prompt_tokens":90,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":80}}}\n\ndata: [DONE]\n\n';
    }
    location /v1/anthropic {
        default_type text/event-stream;
        echo 'event: message_start';
        echo 'data: {"type":"message_start","message":{"id":"m","role":"assistant","content":[],"usage":{"input_tokens":7,"cache_creation_input_tokens":3,"cache_read_input_tokens":60,"output_tokens":1}}}';
        echo '';
        echo_duplicate 3000 'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"type":"text_delta","text":"xxxxxxxx"}}\n\n';
        echo 'event: message_delta';
        echo 'data: {"type":"message_delta","usage":{"output_tokens":3000}}';
        echo '';
    }
    location /v1/big {
        echo_duplicate 100000 '{"choices":[{"delta":{"content":"usage"}}]}\n';
        echo '{"usage":{"prompt_tokens":70,"prompt_tokens_details":{"cached_tokens":0}}}';
    }
    location /v1/none {
        return 200 '{"choices":[{"message":{"content":"x"}}]}';
    }
    location /v1/gzip {
        add_header Content-Encoding gzip;
        return 200 '{"usage":{"prompt_tokens":100,"prompt_tokens_details":{"cached_tokens":64}}}';
    }
    location /v1/identity {
        add_header Content-Encoding identity;
        return 200 '{"usage":{"prompt_tokens":100,"prompt_tokens_details":{"cached_tokens":64}}}';
    }
    location /v1/one-token {
        return 200 '{"usage":{"prompt_tokens":1,"prompt_tokens_details":{"cached_tokens":0}}}';
    }
    location /v1/truncated {
        return 200 '{"choices":[],"usage":{"prompt_tokens":100,"prompt_tokens_details":{"cached_tok';
    }
    location /v1/range {
        return 200 '{"usage":{"prompt_tokens":100,"prompt_tokens_details":{"cached_tokens":101}}}';
    }
    location /v1/huge {
        return 200 '{"usage":{"prompt_tokens":99999999999999999999,"prompt_tokens_details":{"cached_tokens":1}}}';
    }
    location /v1/error {
        return 400 '{"error":"bad","usage":{"prompt_tokens":100,"prompt_tokens_details":{"cached_tokens":64}}}';
    }
    location /v1/cold {
        return 200 '{"usage":{"prompt_tokens":250,"prompt_tokens_details":{"cached_tokens":0}}}';
    }
    location /v1/slow {
        echo_sleep 0.3;
        echo '{"usage":{"prompt_tokens":250,"prompt_tokens_details":{"cached_tokens":0}}}';
    }
    location /v1/warm {
        return 200 '{"usage":{"prompt_tokens":250,"prompt_tokens_details":{"cached_tokens":240}}}';
    }
    location /v1/sglang {
        default_type text/event-stream;
        echo 'data: {"text":" P","output_ids":[47],"meta_info":{"id":"s1","finish_reason":null,"prompt_tokens":120,"completion_tokens":1,"cached_tokens":0}}';
        echo '';
        echo 'data: {"text":" Paris.","output_ids":[47,13],"meta_info":{"id":"s1","finish_reason":{"type":"stop"},"prompt_tokens":120,"completion_tokens":2,"cached_tokens":96}}';
        echo '';
        echo 'data: [DONE]';
        echo '';
    }
    location /v1/llama {
        return 200 '{"index":0,"content":" Paris.","stop":true,"tokens_evaluated":110,"prompt":"the prompt echoed","tokens_cached":113,"timings":{"cache_n":48,"prompt_n":62,"prompt_ms":21.7,"predicted_n":3,"predicted_ms":40.2}}';
    }
    location /v1/llama-short {
        return 200 '{"content":"x","timings":{"prompt_n":62,"prompt_ms":21.7}}';
    }
    location /v1/full {
        return 200 '{"usage":{"prompt_tokens":250,"prompt_tokens_details":{"cached_tokens":250}}}';
    }
    location /v1/full-huge {
        return 200 '{"usage":{"prompt_tokens":4000000000,"prompt_tokens_details":{"cached_tokens":4000000000}}}';
    }
    location /v1/template {
        return 200 '{"usage":{"prompt_tokens":250,"prompt_tokens_details":{"cached_tokens":200}}}';
    }
    location /v1/ids-cold {
        return 200 '{"text":"x","meta_info":{"id":"s2","finish_reason":{"type":"stop"},"prompt_tokens":600,"completion_tokens":1,"cached_tokens":0}}';
    }
    location /v1/ids-slow {
        echo_sleep 0.3;
        echo '{"text":"x","meta_info":{"id":"s3","finish_reason":{"type":"stop"},"prompt_tokens":600,"completion_tokens":1,"cached_tokens":0}}';
    }
    location /v1/ids-logprob {
        echo -n '{"text":"x","output_ids":[13],"meta_info":{"id":"s5","finish_reason":{"type":"length"},"prompt_tokens":600,"input_token_logprobs":[[-2.5,1599,null]],"output_token_logprobs":[[-0.5,13,null]';
        echo_duplicate 799 ',[-1.25,1001,null]';
        echo '],"completion_tokens":800,"cached_tokens":592,"e2e_latency":0.1}}';
    }
    location /v1/ids-score {
        return 200 '{"text":"","meta_info":{"id":"s6","finish_reason":{"type":"length"},"prompt_tokens":600,"input_token_logprobs":[[null,1000,null]],"completion_tokens":0,"cached_tokens":0}}';
    }
    location /v1/ids-short {
        return 200 '{"text":"x","meta_info":{"id":"s7","finish_reason":{"type":"stop"},"prompt_tokens":40,"completion_tokens":1,"cached_tokens":0}}';
    }
    location /v1/ids-warm {
        return 200 '{"text":"x","meta_info":{"id":"s4","finish_reason":{"type":"stop"},"prompt_tokens":600,"completion_tokens":1,"cached_tokens":592}}';
    }
_EOC_

our $Config = ::proxy(add => "access_log logs/fb.log fb;") . <<'_EOC_';
location = /status {
    prefix_route_status;
}
location = /fb {
    alias logs/fb.log;
}
location = /errlog {
    alias logs/error.log;
}
_EOC_

our $Log = "log_format fb '\$prefix_route_cached_tokens';\n";

# a request of the prompt tagged $tag (about 1 KB) to the engine's $path
sub ask {
    my ($path, $tag) = @_;
    my $req = chat([sys(text("sys $tag", 900)), user(text($tag, 100))]);
    $req =~ s{^POST /v1/chat/completions}{POST /v1/$path};
    return $req;
}

# a request of a prompt tagged $tag of about 4 KB, longer than max_prefix=2k
sub ask_long {
    my ($path, $tag) = @_;
    my $req = chat([sys(text("sys $tag", 4000)), user(text($tag, 100))]);
    $req =~ s{^POST /v1/chat/completions}{POST /v1/$path};
    return $req;
}

# the capacity learned in a status (a response_body_filters list for
# each of @_, "" for a request, "status" for a status): "none", else
# "learned" the first time in the block, then "same", "fell", or "rose"
# when by at most $rise bytes
our $Learned;
sub learned {
    my $rise = shift;
    $Learned = undef;
    return [map {
        $_ eq "status"
        ? [sub {
              my ($c) = $_[0] =~ /"learned_capacity":(\d+)/
                  or return "no figure\n";
              my $was = $Learned;
              $Learned = $c;
              return $c == 0 ? "none\n"
                     : !$was ? "learned\n"
                     : $c == $was ? "same\n"
                     : $c < $was ? "fell\n"
                     : $c - $was <= $rise ? "rose\n"
                     : "rose by " . ($c - $was) . " bytes\n";
          }]
        : [sub { "" }]
    } @_];
}

# a request of the prompt tagged $tag to the engine's $path, with an image
# after its text
sub ask_image {
    my ($path, $tag) = @_;
    my $req = chat([sys(text("sys $tag", 900)),
                    user([{ type => "text", text => text($tag, 100) },
                          { type => "image_url",
                            image_url => { url => "http://img/$tag.png" } }])]);
    $req =~ s{^POST /v1/chat/completions}{POST /v1/$path};
    return $req;
}

# ask() with "cache_salt" $salt in the body
sub ask_salted {
    my ($path, $tag, $salt) = @_;
    my $req = ask($path, $tag);
    $req =~ s/"model":"m"/"cache_salt":"$salt","model":"m"/ or die;
    return $req;
}

# ask() with a chat template of its own (vLLM's "chat_template")
sub ask_templated {
    my ($path, $tag) = @_;
    my $req = ask($path, $tag);
    $req =~ s/"model":"m"/"chat_template":"{{ messages }}","model":"m"/ or die;
    return $req;
}

# SGLang's /generate at the engine's $path with $n (600) token ids from
# $first on, as RL rollouts send them, and $more members
sub ids {
    my ($path, $first, $more, $n) = @_;
    my $ids = join(",", $first .. $first + ($n // 600) - 1);
    $more //= "";
    return qq|POST /v1/$path\n{"input_ids":[$ids],"sampling_params":{"max_new_tokens":1}$more}|;
}

# a request of a prompt of its own to /v1/json with the model $model, a
# JSON string
sub modeled {
    my $model = shift;
    my $body = chat_body([user(text("model $model", 300))]);
    $body =~ s/"model":"m"/"model":$model/ or die "no model in $body";
    return "POST /v1/json\n$body";
}

add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value(main_config => $LoadModule . $LoadEcho) unless defined $block->main_config;
    $block->set_value(http_config => ::upstream(1) . $Engine . $Log) unless defined $block->http_config;
    $block->set_value(config => $Config) unless defined $block->config;
    $block->set_value(no_error_log => $NoErrorLog) unless defined $block->no_error_log;
    return $block;
});

long_uptime();
run_tests();

__DATA__

=== TEST 1: a JSON answer's usage: counted for its server, in $prefix_route_cached_tokens, and the answer is unchanged
The model "m" learns its bytes of prompt per token from the whole prompt.
--- request eval
[::ask("json", "a"), "GET /fb", "GET /status"]
--- response_body_like eval
['\A\{"id":"c1","choices":\[\{"message":\{"content":"x"\}\}\],"usage":\{"prompt_tokens":100,"completion_tokens":2,"prompt_tokens_details":\{"cached_tokens":64\}\}\}\z',
 '\A64\n\z',
 '"models":\[\{"name":"m","bytes_per_token":\d+\.\d\d,"samples":1,"offset_tokens":0,"answer_offset_tokens":0\}\].*"feedback_responses":1,"reported_prompt_tokens":100,"reported_cached_tokens":64,"predicted_cached_tokens":0,"feedback_agreed":0,"feedback_under":0,"feedback_over":1,']



=== TEST 2: the last chunk of an OpenAI stream, and message_start of an Anthropic stream past 300 KB of deltas
--- request eval
[::ask("sse", "a"), ::ask("anthropic", "b"), "GET /fb", "GET /status"]
--- response_body_like eval
['\Adata: \{"choices":\[\{"delta".*\ndata: \[DONE\]\n\n\z',
 '\Aevent: message_start\n.*"output_tokens":3000\}\}\n\n\z',
 '\A80\n60\n\z',
 '"feedback_responses":2,"reported_prompt_tokens":160,"reported_cached_tokens":140,']



=== TEST 3: usage at the end of a 4.5 MB answer of many buffers, whose text says "usage" everywhere
--- config eval
$::Config =~ s{(proxy_pass http://llm;)}{$1\n    proxy_max_temp_file_size 0;}r
--- request eval
[::ask("big", "a"), "GET /fb", "GET /status"]
--- response_body_like eval
['\A(?:\{"choices":\[\{"delta":\{"content":"usage"\}\}\]\}\n){50000}(?:\{"choices":\[\{"delta":\{"content":"usage"\}\}\]\}\n){50000}\{"usage":\{"prompt_tokens":70,"prompt_tokens_details":\{"cached_tokens":0\}\}\}\n\z',
 '\A0\n\z',
 '"feedback_responses":1,"reported_prompt_tokens":70,"reported_cached_tokens":0,']



=== TEST 4: answers that cannot be read, or that are not a success, leave the counters and the index as they were, and reach the client unchanged
No usage; compressed; truncated; more cached than prompted; a count out of
range; a 400.
--- request eval
[::ask("none", "a"), ::ask("gzip", "b"), ::ask("truncated", "c"),
 ::ask("range", "d"), ::ask("huge", "e"), ::ask("error", "f"),
 "GET /fb", "GET /status"]
--- error_code eval
[200, 200, 200, 200, 200, 400, 200, 200]
--- response_body_like eval
['\A\{"choices":\[\{"message":\{"content":"x"\}\}\]\}\z',
 '\A\{"usage":\{"prompt_tokens":100,"prompt_tokens_details":\{"cached_tokens":64\}\}\}\z',
 'cached_tok\z', 'cached_tokens":101\}\}\}\z', '99999999999999999999',
 '"error":"bad"',
 '\A-\n-\n-\n-\n-\n-\n\z',
 '"models":\[\],.*"feedback_responses":0,"reported_prompt_tokens":0,"reported_cached_tokens":0,"predicted_cached_tokens":0,"feedback_agreed":0,"feedback_under":0,"feedback_over":0,"feedback_dropped":0,"learned_capacity":0,"probes":0,"probe_failures":0,"probe_restarts":0\}']



=== TEST 5: feedback=off: the usage is not read
--- http_config eval
::upstream("zone=llm:1m feedback=off", 1) . $::Engine . $::Log
--- request eval
[::ask("json", "a"), "GET /fb", "GET /status"]
--- response_body_like eval
['"cached_tokens":64', '\A-\n\z',
 '"models":\[\],.*"feedback_responses":0,']



=== TEST 6: the engine held a prompt it was sent before: the prediction agrees, and nothing is dropped
Prompt a, then prompt b, then b and a again: the engine says it held 240
of their 250 tokens, as the index predicted.
--- request eval
[::ask("cold", "a"), ::ask("slow", "b"), ::ask("warm", "b"), ::ask("warm", "a"),
 "GET /status"]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: HIT [1-9]\\d* \\d+",
 "X-Prefix-Route: HIT [1-9]\\d* \\d+", ""]
--- response_body_like eval
["", "", "", "",
 '"feedback_responses":4,"reported_prompt_tokens":1000,"reported_cached_tokens":480,"predicted_cached_tokens":[1-9]\d*,"feedback_agreed":4,"feedback_under":0,"feedback_over":0,"feedback_dropped":0,"learned_capacity":0,"probes":0,"probe_failures":0,"probe_restarts":0\}']



=== TEST 7: feedback=correct: the engine evicted a prompt the index believed it held: what was recorded before it is dropped
As TEST 6, but the engine says it held none of b the second time (the
error log says so at the info level, counts and server only).  It
evicts the least recently used first, so a, recorded before b, is gone
too: a is a MISS again.  The engine holds at most what is left, b: the
status shows that capacity learned, and a's record makes room for a by
dropping b, a MISS again too (TEST 25).
--- http_config eval
::upstream("zone=llm:1m feedback=correct", 1) . $::Engine . $::Log
--- request eval
[::ask("cold", "a"), ::ask("slow", "b"), ::ask("cold", "b"), ::ask("cold", "a"),
 ::ask("cold", "b"), "GET /status", "GET /errlog"]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: HIT [1-9]\\d* \\d+",
 "X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: MISS 0 \\d+", "", ""]
--- response_body_like eval
["", "", "", "", "",
 '"feedback_responses":5,"reported_prompt_tokens":1250,"reported_cached_tokens":0,"predicted_cached_tokens":[1-9]\d*,"feedback_agreed":4,"feedback_under":1,"feedback_over":0,"feedback_dropped":[1-9]\d*,"learned_capacity":[1-9]\d*,"probes":0,"probe_failures":0,"probe_restarts":0\}',
 qr/\[info\] .*prefix_route: 127\.0\.0\.1:\d+ held 0 of [1-9]\d* cached tokens predicted, an eviction: [1-9]\d* index pairs recorded before the prefix dropped/]



=== TEST 8: feedback=on (the default) counts the same eviction and changes nothing
The requests of TEST 7: the engine's "none" is counted, a stays a HIT.
--- request eval
[::ask("cold", "a"), ::ask("slow", "b"), ::ask("cold", "b"), ::ask("cold", "a"),
 "GET /status", "GET /errlog"]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: HIT [1-9]\\d* \\d+",
 "X-Prefix-Route: HIT [1-9]\\d* \\d+", "", ""]
--- response_body_like eval
["", "", "", "",
 '"feedback_responses":4,.*"feedback_under":2,"feedback_over":0,"feedback_dropped":0,"learned_capacity":0,"probes":0,"probe_failures":0,"probe_restarts":0\}',
 qr/\A(?!.*an eviction)/s]



=== TEST 9: feedback=correct: a prefix recorded by a request still in flight proves no eviction
Prompt z first; then two requests with prompt a at once (echo module
subrequests): the second is sent while the first is in flight, its
prediction counts the first's blocks, and its engine says it held none.
That proves nothing: z, recorded before a, is not dropped.
--- config eval
$::Config . ::fan("/two", ::chat_body([::sys(::text("sys a", 900)), ::user(::text("a", 100))]),
                          ::chat_body([::sys(::text("sys a", 900)), ::user(::text("a", 100))]))
--- http_config eval
::upstream("zone=llm:1m feedback=correct", 1) . $::Log . "server {\n    listen " . ::addr(1) . ";\n"
. "    location / { echo_sleep 0.3; echo '{\"usage\":{\"prompt_tokens\":250,\"prompt_tokens_details\":{\"cached_tokens\":0}}}'; }\n}\n"
--- request eval
[::ask("cold", "z"), "GET /two", ::ask("cold", "z"), "GET /status"]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 \\d+", "", "X-Prefix-Route: HIT [1-9]\\d* \\d+", ""]
--- response_body_like eval
['"cached_tokens":0', '"cached_tokens":0.*"cached_tokens":0', '"cached_tokens":0',
 '"feedback_responses":4,.*"feedback_under":2,"feedback_over":0,"feedback_dropped":0,"learned_capacity":0,"probes":0,"probe_failures":0,"probe_restarts":0\}']



=== TEST 10: a streamed answer ends its prefill at its first byte: queued work leaves then, the request stays in flight
The engine sends its headers at once, then, as its first token, what the
status says 0.15 s later, and as its last, what it says 0.5 s after
that: the request's prefill was queued until the first token, and after
it the request is in flight with nothing queued.  With feedback off,
which reads nothing of the response, and on.
--- http_config eval
::upstream("zone=llm:1m feedback=off", 1) . ::upstream("zone=on:1m", 1) . $::Log
. "server {\n    listen " . ::addr(1) . ";\n"
. "    postpone_output 0;\n"
. "    location / { echo_flush; echo_sleep 0.15; echo_location /snap; echo_flush; echo_sleep 0.5; echo_location /snap; }\n"
. "    location = /snap { proxy_pass http://127.0.0.1:\$TEST_NGINX_SERVER_PORT/status; }\n}\n"
--- config eval
::proxy(add => "proxy_buffering off;") . ::proxy(path => "/on/", to => "on", add => "proxy_buffering off;")
. "location = /status {\n    prefix_route_status;\n}\n"
--- request eval
[::chat([::user("probe the queue")]), ::chat([::user("probe the queue")]) =~ s{/v1/}{/on/}r]
--- response_body_like eval
[qr/\A\{"upstreams":\[\{"name":"llm".*?"inflight":1,"queued_bytes":[1-9]\d*,.*\n\{"upstreams":\[\{"name":"llm".*?"inflight":1,"queued_bytes":0,.*\n\z/s,
 qr/\A\{"upstreams":\[.*?\{"name":"on".*?"inflight":1,"queued_bytes":[1-9]\d*,.*\n\{"upstreams":\[.*?\{"name":"on".*?"inflight":1,"queued_bytes":0,.*\n\z/s]



=== TEST 11: nginx's own gzip to the client leaves the engine's usage readable
The engine answers uncompressed; nginx compresses for a client that
accepts gzip, after this module has read the answer.
--- config eval
$::Config =~ s{(proxy_pass http://llm;)}{$1\n    gzip on;\n    gzip_types application/json;\n    gzip_min_length 0;}r
--- request eval
[::ask("json", "a"), "GET /status"]
--- more_headers
Accept-Encoding: gzip
--- response_headers_like eval
["Content-Encoding: gzip", ""]
--- response_body_like eval
[qr/./s, '"feedback_responses":1,"reported_prompt_tokens":100,"reported_cached_tokens":64,']



=== TEST 12: an engine whose cached tokens run steadily below the prediction (its chat template's tokens): the model's offset learns it, and later predictions agree
The engine says it held 200 of 250 tokens of a prompt it holds whole,
some 45 fewer than the index's bytes per token predict.  The first
reports disagree; each moves the offset by 2 tokens at most, and the
last ones agree.  The figures change nothing in the index: a stays a HIT.
--- request eval
[::ask("cold", "a"), (::ask("template", "a")) x 40, "GET /status"]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 \\d+", ("X-Prefix-Route: HIT [1-9]\\d* \\d+") x 40, ""]
--- response_body_like eval
[("") x 41,
 '"models":\[\{"name":"m","bytes_per_token":\d+\.\d\d,"samples":41,"offset_tokens":[1-9]\d,"answer_offset_tokens":0\}\].*"feedback_responses":41,"reported_prompt_tokens":10250,"reported_cached_tokens":8000,"predicted_cached_tokens":[1-9]\d*,"feedback_agreed":[1-9]\d*,"feedback_under":[1-9]\d*,"feedback_over":0,']



=== TEST 13: models whose names would look alike in the status (cut to 127 bytes, or with bytes replaced by "_") show apart
A name that fits and has only the bytes the status keeps shows as it is
(a Hugging Face id, 35 bytes, was cut at 31 until 2026-12-05); one cut or
changed ends in "~" and 8 hex digits of its hash, so that no two models
make the same Prometheus series.
--- request eval
[map({ ::modeled($_) } '"meta-llama/Meta-Llama-3-8B-Instruct"', '"' . ('a' x 127) . '"',
                       '"' . ('a' x 127) . 'b"', '"org/model v1"', '"org/model_v1"', '"\\u0000nul"'),
 "GET /status"]
--- response_body_like eval
[("") x 6,
 '"models":\[\{"name":"meta-llama/Meta-Llama-3-8B-Instruct",[^{}]*\},\{"name":"a{127}",[^{}]*\},\{"name":"a{118}~[0-9a-f]{8}",[^{}]*\},\{"name":"org/model_v1~[0-9a-f]{8}",[^{}]*\},\{"name":"org/model_v1",[^{}]*\},\{"name":"_nul~[0-9a-f]{8}",[^{}]*\}\]']



=== TEST 14: feedback=correct: no eviction is read from a prompt with an image, whose tokens do not follow its bytes
As TEST 7, b with an image after its text (a URL of 17 bytes, hundreds
of tokens to a vision model): the engine's "none" is counted, nothing is
dropped, a stays a HIT.
--- http_config eval
::upstream("zone=llm:1m feedback=correct", 1) . $::Engine . $::Log
--- request eval
[::ask("cold", "a"), ::ask_image("slow", "b"), ::ask_image("cold", "b"), ::ask("cold", "a"),
 "GET /status"]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: HIT [1-9]\\d* \\d+",
 "X-Prefix-Route: HIT [1-9]\\d* \\d+", ""]
--- response_body_like eval
["", "", "", "",
 '"feedback_responses":4,.*"feedback_under":2,"feedback_over":0,"feedback_dropped":0,']



=== TEST 15: prefix_route_salt ... cache_salt=off: no eviction is read from a prompt whose cache_salt the engine keys by and the index does not
As TEST 7, b sent with a cache_salt of its own each time, which nginx's
salt replaces in the index's key: the index predicts b held, the engine
(keying by the body's salt) held none.  That is the client's doing, not
an eviction: a, another client's prompt recorded before, stays a HIT.
--- http_config eval
::upstream("zone=llm:1m feedback=correct", 1) =~ s/(    prefix_route [^\n]*\n)/$1    prefix_route_salt \$http_x_tenant cache_salt=off;\n/r
. $::Engine . $::Log
--- more_headers
X-Tenant: t1
--- request eval
[::ask("cold", "a"), ::ask_salted("slow", "b", "s1"), ::ask_salted("cold", "b", "s2"), ::ask("cold", "a"),
 "GET /status"]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: HIT [1-9]\\d* \\d+",
 "X-Prefix-Route: HIT [1-9]\\d* \\d+", ""]
--- response_body_like eval
["", "", "", "",
 '"feedback_responses":4,.*"feedback_under":2,"feedback_over":0,"feedback_dropped":0,']



=== TEST 16: the engines' native APIs: SGLang's meta_info in the last event of a stream, llama.cpp server's timings (computed + cached); timings without cache_n are not read
--- request eval
[::ask("sglang", "a"), ::ask("llama", "b"), ::ask("llama-short", "c"),
 "GET /fb", "GET /status"]
--- response_body_like eval
['\Adata: \{"text":" P".*\ndata: \[DONE\]\n\n\z',
 '"timings":\{"cache_n":48,', '"prompt_n":62,',
 '\A96\n48\n-\n\z',
 '"feedback_responses":2,"reported_prompt_tokens":230,"reported_cached_tokens":144,']



=== TEST 17: a batch (several texts, or SGLang's parallel sampling) is not read: its native answers count each sequence apart
--- request eval
my $t = ::text("batch", 300);
[qq|POST /v1/sglang\n{"text":"$t"}|, qq|POST /v1/sglang\n{"text":["$t","$t b"]}|,
 qq|POST /v1/sglang\n{"text":"$t","sampling_params":{"n":2}}|, "GET /fb", "GET /status"]
--- response_body_like eval
['\Adata: ', '\Adata: ', '\Adata: ', '\A96\n-\n-\n\z',
 '"feedback_responses":1,"reported_prompt_tokens":120,"reported_cached_tokens":96,']



=== TEST 18: feedback=correct: a request with a chat template of its own is a chain of its own, so the engine holding none of it drops nothing
As TEST 7, but b's third request asks for its own chat_template, which
the engine renders otherwise: it is a MISS, and a stays a HIT.
--- http_config eval
::upstream("zone=llm:1m feedback=correct", 1) . $::Engine . $::Log
--- request eval
[::ask("cold", "a"), ::ask("slow", "b"), ::ask_templated("cold", "b"), ::ask("warm", "a"),
 "GET /status"]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: MISS 0 \\d+",
 "X-Prefix-Route: HIT [1-9]\\d* \\d+", ""]
--- response_body_like eval
["", "", "", "", '"feedback_under":0,"feedback_over":\d+,"feedback_dropped":0,']



=== TEST 19: a prompt of token ids: the prediction is the ids its match holds, counted, not guessed from bytes
The engine held 592 of the 600 ids the second time (vLLM caches whole
blocks of 16, and computes the last token again): the prediction, the
ids in the matched blocks, agrees.  Before, the ids were taken for text
at 4 bytes a token: 750 tokens predicted, "under".
--- request eval
[::ids("ids-cold", 1000), ::ids("ids-warm", 1000), "GET /fb", "GET /status"]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: HIT [1-9]\\d* \\d+", "", ""]
--- response_body_like eval
['"meta_info"', '"meta_info"', '\A0\n592\n\z',
 '"feedback_responses":2,"reported_prompt_tokens":1200,"reported_cached_tokens":592,"predicted_cached_tokens":(59[2-9]|600),"feedback_agreed":2,"feedback_under":0,"feedback_over":0,']



=== TEST 20: feedback=correct: the engine evicted a prompt of token ids the index believed it held: what was recorded before it is dropped
TEST 7 with token ids: a, then b (slow), then b again, which the engine
says it held none of: a, recorded before b, is gone too, a MISS again.
The prediction is the ids' own count, so it may correct the index as a
prompt of text seen whole may.
--- http_config eval
::upstream("zone=llm:1m feedback=correct", 1) . $::Engine . $::Log
--- request eval
[::ids("ids-cold", 1000), ::ids("ids-slow", 2000), ::ids("ids-cold", 2000), ::ids("ids-cold", 1000),
 "GET /status"]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: HIT [1-9]\\d* \\d+",
 "X-Prefix-Route: MISS 0 \\d+", ""]
--- response_body_like eval
["", "", "", "",
 '"feedback_responses":4,.*"feedback_under":1,"feedback_over":0,"feedback_dropped":[1-9]\d*,']



=== TEST 21: SGLang's return_logprob: a list for each generated token comes before meta_info's counts; for a prompt of token ids, its cached_tokens are read from the tail
The answer to 800 generated tokens is 15 KB, its meta_info's start lost
with the head and the tail.  The ids' count stands for prompt_tokens; a
prompt of text, whose tokens nginx cannot count, is not read from such
an answer.
--- request eval
[::ids("ids-cold", 1000), ::ids("ids-logprob", 1000), ::ask("ids-logprob", "a"), "GET /fb", "GET /status"]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: HIT [1-9]\\d* \\d+", "X-Prefix-Route: MISS 0 \\d+", "", ""]
--- response_body_like eval
['"meta_info"', '\A\{"text":"x".*"completion_tokens":800,"cached_tokens":592,"e2e_latency":0\.1\}\}\n\z', '"meta_info"', '\A0\n592\n-\n\z',
 '"feedback_responses":2,"reported_prompt_tokens":1200,"reported_cached_tokens":592,"predicted_cached_tokens":(59[2-9]|600),"feedback_agreed":2,']



=== TEST 22: feedback=correct: an answer to a request that asked the engine not to read its cache is not compared, and drops nothing
As TEST 20, b's third request scores its prompt (SGLang's
return_logprob from logprob_start_len 0, as RL reference models do):
SGLang matches no prefix then, and reports 0 cached of a prompt it
holds.  Nor does a chat request with vLLM's prompt_logprobs count: a
stays a HIT, and 3 answers are compared, none under.
--- http_config eval
::upstream("zone=llm:1m feedback=correct", 1) . $::Engine . $::Log
--- request eval
my $chat = ::ask("cold", "b");
$chat =~ s/"model":"m"/"prompt_logprobs":1,"model":"m"/ or die;
[::ids("ids-cold", 1000), ::ids("ids-slow", 2000),
 ::ids("ids-score", 2000, ',"return_logprob":true,"logprob_start_len":0'), $chat,
 ::ids("ids-warm", 1000), "GET /fb", "GET /status"]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: HIT [1-9]\\d* \\d+",
 "X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: HIT [1-9]\\d* \\d+", "", ""]
--- response_body_like eval
["", "", "", "", "", '\A0\n0\n0\n0\n592\n\z',
 '"feedback_responses":3,.*"feedback_agreed":3,"feedback_under":0,"feedback_over":0,"feedback_dropped":0,']



=== TEST 23: feedback=correct: a prediction shorter than an engine page (64 tokens) is counted, and drops nothing
A prompt of 40 token ids, recorded, then sent again: the engine (pages
of 64 tokens) holds none of it.  That is under the prediction, and no
eviction: z, recorded before, stays a HIT.
--- http_config eval
::upstream("zone=llm:1m feedback=correct", 1) . $::Engine . $::Log
--- request eval
[::ids("ids-cold", 1000), ::ids("ids-slow", 5000, "", 40), ::ids("ids-short", 5000, "", 40),
 ::ids("ids-warm", 1000), "GET /status"]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: HIT [1-9]\\d* \\d+",
 "X-Prefix-Route: HIT [1-9]\\d* \\d+", ""]
--- response_body_like eval
["", "", "", "",
 '"feedback_responses":4,.*"feedback_agreed":3,"feedback_under":1,"feedback_over":0,"feedback_dropped":0,']



=== TEST 24: feedback=correct behind several nginx instances (instances=2) works as feedback=on: the eviction of TEST 7 drops nothing
Another instance's requests refresh a server's blocks on the engine, not in
this instance's index, so an eviction this one hears of cannot date its
other blocks: a stays a HIT, as with feedback=on (TEST 8).  nginx -t warns
(t/090-examples.t).
--- http_config eval
::upstream("zone=llm:1m feedback=correct instances=2", 1) . $::Engine . $::Log
--- request eval
[::ask("cold", "a"), ::ask("slow", "b"), ::ask("cold", "b"), ::ask("cold", "a"),
 "GET /status", "GET /errlog"]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: HIT [1-9]\\d* \\d+",
 "X-Prefix-Route: HIT [1-9]\\d* \\d+", "", ""]
--- response_body_like eval
["", "", "", "",
 '"feedback_responses":4,.*"feedback_under":2,"feedback_over":0,"feedback_dropped":0,"learned_capacity":0,"probes":0,"probe_failures":0,"probe_restarts":0\}',
 qr/\A(?!.*index pairs recorded before)/s]



=== TEST 25: feedback=correct learns each engine's capacity from its evictions, at most, and raises it when the engine held more
a's eviction (TEST 7) shows that the engine holds at most one prompt:
c's record drops b, and b's then drops c, each a MISS where
feedback=on leaves them HITs (TEST 8).  Then the engine reports it held
all of c, which the index had dropped: the capacity it learned was too
small by about c, and grows by as much: b and c both fit, and c is a HIT.
--- http_config eval
::upstream("zone=llm:1m feedback=correct", 1) . $::Engine . $::Log
--- request eval
[::ask("cold", "a"), ::ask("slow", "b"), ::ask("cold", "b"), ::ask("cold", "c"),
 ::ask("cold", "b"), ::ask("full", "c"), ::ask("cold", "b"), ::ask("cold", "c"),
 "GET /status"]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: HIT [1-9]\\d* \\d+",
 "X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: MISS 0 \\d+",
 "X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: HIT [1-9]\\d* \\d+", ""]
--- response_body_like eval
["", "", "", "", "", "", "", "",
 '"feedback_responses":8,.*"feedback_agreed":5,"feedback_under":2,"feedback_over":1,"feedback_dropped":[1-9]\d*,"learned_capacity":[1-9]\d*,']



=== TEST 26: feedback=correct: a prompt longer than max_prefix, which never trims, raises a capacity learned too small, by at most its blocks, and once only
a's eviction teaches the index that the engine holds one prompt, b; then
the engine holds all of the long prompt L, which the index did not: the
capacity rises, by at most max_prefix (L's indexed blocks).  L again is a
HIT: the engine's tokens beyond max_prefix are not the index's, and it
does not rise.  An engine that says it held 4 billion tokens of M raises
it by M's blocks at most.
--- http_config eval
::upstream("zone=llm:1m feedback=correct max_prefix=2k", 1) . $::Engine . $::Log
--- request eval
[::ask("cold", "a"), ::ask("slow", "b"), ::ask("cold", "b"), "GET /status",
 ::ask_long("full", "L"), "GET /status", ::ask_long("full", "L"), "GET /status",
 ::ask_long("full-huge", "M"), "GET /status"]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: HIT [1-9]\\d* \\d+", "",
 "X-Prefix-Route: MISS 0 \\d+", "", "X-Prefix-Route: HIT [1-9]\\d* \\d+", "",
 "X-Prefix-Route: MISS 0 \\d+", ""]
--- response_body_filters eval
main::learned(2048, "", "", "", "status", "", "status", "", "status", "", "status")
--- response_body eval
["", "", "", "learned\n", "", "rose\n", "", "same\n", "", "rose\n"]



=== TEST 27: "Content-Encoding: identity" is no compression: the usage is read
Until 2026-12-07 any Content-Encoding turned the reading off (helper-72).
--- request eval
[::ask("identity", "a"), "GET /fb", "GET /status"]
--- response_body_like eval
['"cached_tokens":64\}\}\}\z', '\A64\n\z',
 '"feedback_responses":1,"reported_prompt_tokens":100,"reported_cached_tokens":64,']



=== TEST 28: an engine that reports 1 prompt token for a whole prompt moves the model's bytes a token by 1/16 at most, once 16 answers have taught it
Until 2026-12-07 one such answer took it from 6.16 to 302.65 (helper-72).
--- request eval
[(map { ::ask("json", "p$_") } 1 .. 16), "GET /status", ::ask("one-token", "q"), "GET /status"]
--- response_body_filters eval
my $was;
[([]) x 16,
 [sub { ($was) = $_[0] =~ /"bytes_per_token":([\d.]+),"samples":16,/; defined $was ? "learned\n" : "not learned\n" }],
 [],
 [sub { my ($now) = $_[0] =~ /"bytes_per_token":([\d.]+),"samples":17,/;
        !defined $now ? "no figure\n"
        : $now >= $was && $now <= $was * 17 / 16 + 0.01 ? "moved by 1/16 at most\n"
        : "moved from $was to $now\n" }]]
--- response_body_like eval
[("") x 16, '^learned\n\z', "", '^moved by 1/16 at most\n\z']



=== TEST 29: names sent a few times give way to a model in use, and only learned models make Prometheus series
7 names get 3 answers each; then "real" and a new name each time, 16
times.  Until 2026-12-07 the least learned slot went: "real" lost its
slot to each new name and stayed at 1 sample, while the 7 names held
theirs (helper-73).  Now the names not learned give way least recently
used first; "real" learns its 16 samples, and the Prometheus page shows
it alone (the others are not learned).
--- request eval
[(map { my $j = $_; map { ::modeled("\"junk$j\"") } 1 .. 3 } 1 .. 7),
 (map { (::modeled('"real"'), ::modeled("\"new$_\"")) } 1 .. 16),
 "GET /status", "GET /status?format=prometheus"]
--- response_body_like eval
[("") x 53,
 '"models":\[[^\]]*\{"name":"real","bytes_per_token":\d+\.\d\d,"samples":16,',
 qr/\A(?!.*model="(?:junk|new))(?:.*\n)*nginx_prefix_route_bytes_per_token\{upstream="llm",model="real"\} \d+\.\d\d\n(?:.*\n)*nginx_prefix_route_prediction_offset_tokens\{upstream="llm",model="real",end="prompt"\} -?\d+\n/s]
