# The API shapes (OpenAI Chat Completions, legacy Completions,
# Anthropic Messages, OpenAI Responses, SGLang's and TGI's native
# /generate) and the canonical prompt of
# docs/design.md: the same prompt sent twice is a MISS and then a HIT on
# the same backend, $prefix_route_length is the length of the canonical
# prompt worked out by hand below, and what changes the prompt's identity
# (an image, the tools, a tool call id, cache_salt, the model, message
# boundaries) is not a full match.
#
# The canonical prompt: a segment (message, tools list, prompt) starts with
# RS (0x1E) and its role; each field with US (0x1F) and a tag: "n" name,
# "c" content, "t" tool_calls, "i" tool_call_id; in a content array, a text
# part is GS (0x1D) and its text, any other part FS (0x1C), a digest of
# 16 hex digits and its JSON with sorted keys and no whitespace.  Only full 64-byte blocks are indexed,
# so a request matches at most the full blocks of the one before.
#
# Each backend answers with its name.  The proxy location logs one line per
# request to logs/routes.log, "backend status match length", and a final
# GET /routes returns that log to check which backend served each request.
use Test::Nginx::Socket 'no_plan';
use FindBin;
use lib $FindBin::Bin;
use PrefixRoute qw(:DEFAULT text full_blocks);

no_shuffle();

our ($RS, $US, $GS, $FS) = ("\x1e", "\x1f", "\x1d", "\x1c");

# stands for the digest of a non-text part when counting bytes
our $DIGEST = "0" x 16;

our $SYSTEM   = text("You are a careful contracts lawyer", 700);
our $QUESTION = text("What does clause 7 of the lease say", 500);
our $DOC      = text("The lease agreement between", 600);

sub post { my ($uri, $json) = @_; "POST $uri\n$json" }

# the requests of a block that posts one body twice, then reads the routes log
sub post_twice {
    my ($uri, $json) = @_;
    return [post($uri, $json), post($uri, $json), "GET /routes"];
}

# X-Prefix-Route of a prompt of $len bytes sent twice, and of GET /routes
sub miss_then_hit {
    my $len = shift;
    return ["X-Prefix-Route: MISS 0 $len",
            "X-Prefix-Route: HIT " . full_blocks($len) . " $len", ""];
}

# the response bodies of post_twice(): the routes log shows a MISS and a HIT
# of the same length on one backend (the headers check the numbers)
our $SameBackendTwice = ["^b[1-4]\n\$", "^b[1-4]\n\$",
                         qr/\A(b[1-4]) MISS 0 (\d+)\n\1 HIT \d+ \2\n\z/];

# every block runs with upstream llm over the 4 backends b1..b4 and the
# routes log (see t/PrefixRoute.pm), unless it has its own configuration,
# and checks that error.log has no [error], [alert] or [crit] line
add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value(main_config => $LoadModule) unless defined $block->main_config;
    $block->set_value(http_config => upstream(1 .. 4) . routes(1 .. 4) . backends(1 .. 4))
        unless defined $block->http_config;
    $block->set_value(config => proxy(routes => 1)) unless defined $block->config;
    $block->set_value(no_error_log => $NoErrorLog) unless defined $block->no_error_log;
    return $block;
});

run_tests();

__DATA__

=== TEST 1: chat, one user message with a content string: MISS then HIT on the same backend, length RS "user" US "c" + text
--- request eval
my $body = qq|{"model":"m","messages":[{"role":"user","content":"$::QUESTION"}]}|;
::post_twice("/v1/chat/completions", $body)
--- response_headers eval
# worked out by hand: 1 + 4 + 2 + 500 = 507 bytes, 7 full blocks = 448
my $canon = "\x1e" . "user" . "\x1f" . "c" . $::QUESTION;
die "unexpected length" unless length($canon) == 507;
["X-Prefix-Route: MISS 0 507", "X-Prefix-Route: HIT 448 507", ""]
--- response_body_like eval
["^b[1-4]\n\$", "^b[1-4]\n\$", qr/\A(b[1-4]) MISS 0 507\n\1 HIT 448 507\n\z/]



=== TEST 2: chat, system and user messages: the canonical prompt is both messages in order
--- request eval
my $body = qq|{"model":"m","messages":[{"role":"system","content":"$::SYSTEM"},|
           . qq|{"role":"user","content":"$::QUESTION"}]}|;
::post_twice("/v1/chat/completions", $body)
--- response_headers eval
::miss_then_hit(length "$::RS" . "system$::US" . "c$::SYSTEM$::RS" . "user$::US" . "c$::QUESTION")
--- response_body_like eval: $::SameBackendTwice



=== TEST 3: chat, JSON whitespace, key order and sampling parameters do not change the prompt
--- request eval
my $compact = qq|{"model":"m","temperature":0,"messages":[{"role":"system","content":"$::SYSTEM"},|
              . qq|{"role":"user","content":"$::QUESTION"}]}|;
my $pretty = qq|{\n  "messages": [\n    { "content": "$::SYSTEM", "role": "system" },\n|
             . qq|    { "content" : "$::QUESTION",\t"role" : "user", "id": "msg-2" }\n  ],\n|
             . qq|  "stream": true, "max_tokens": 100, "temperature": 0.7,\n  "model": "m"\n}\n|;
[::post("/v1/chat/completions", $compact), ::post("/v1/chat/completions", $pretty), "GET /routes"]
--- response_headers eval
::miss_then_hit(length "$::RS" . "system$::US" . "c$::SYSTEM$::RS" . "user$::US" . "c$::QUESTION")
--- response_body_like eval: $::SameBackendTwice



=== TEST 4: chat, content parts (text and image_url): a text part is GS and its text, the image FS and its canonical JSON
--- request eval
my $body = qq|{"model":"m","messages":[{"role":"user","content":[|
           . qq|{"type":"text","text":"$::QUESTION"},|
           . qq|{"type":"image_url","image_url":{"url":"https://img.example/lease-page-1.png"}}]}]}|;
::post_twice("/v1/chat/completions", $body)
--- response_headers eval
my $image = '{"image_url":{"url":"https://img.example/lease-page-1.png"},"type":"image_url"}';
::miss_then_hit(length "$::RS" . "user$::US" . "c$::GS$::QUESTION$::FS$::DIGEST$image")
--- response_body_like eval: $::SameBackendTwice



=== TEST 5: chat, an image first: another image URL is another prompt (MISS)
--- request eval
my @body = map { qq|{"model":"m","messages":[{"role":"user","content":[|
                 . qq|{"type":"image_url","image_url":{"url":"https://img.example/page-$_.png"}},|
                 . qq|{"type":"text","text":"$::QUESTION"}]}]}| } 1, 2;
[::post("/v1/chat/completions", $body[0]), ::post("/v1/chat/completions", $body[1]), "GET /routes"]
--- response_headers eval
# the two prompts share their first 54 bytes: no full block
my $image = '{"image_url":{"url":"https://img.example/page-1.png"},"type":"image_url"}';
my $len = length "$::RS" . "user$::US" . "c$::FS$::DIGEST$image$::GS$::QUESTION";
["X-Prefix-Route: MISS 0 $len", "X-Prefix-Route: MISS 0 $len", ""]
--- response_body_like eval
["^b[1-4]\n\$", "^b[1-4]\n\$", qr/\Ab[1-4] MISS 0 \d+\nb[1-4] MISS 0 \d+\n\z/]



=== TEST 6: chat, text then an image: another image URL matches only the blocks before the image
# The image part is FS, a 16-hex-digit digest, then its JSON: the two
# prompts differ from the digest on, so only the text's 9 blocks match
# even though the two URLs share their first 46 bytes.
--- request eval
my @body = map { qq|{"model":"m","messages":[{"role":"user","content":[|
                 . qq|{"type":"text","text":"$::DOC"},|
                 . qq|{"type":"image_url","image_url":{"url":"https://img.example/page-$_.png"}}]}]}| } 1, 2;
[::post("/v1/chat/completions", $body[0]), ::post("/v1/chat/completions", $body[1]), "GET /routes"]
--- response_headers eval
my $image = '{"image_url":{"url":"https://img.example/page-1.png"},"type":"image_url"}';
my $before = length "$::RS" . "user$::US" . "c$::GS$::DOC";         # 608
my $len = length "$::RS" . "user$::US" . "c$::GS$::DOC$::FS$::DIGEST$image";
["X-Prefix-Route: MISS 0 $len",
 "X-Prefix-Route: HIT " . ::full_blocks($before) . " $len", ""]
--- response_body_like eval
["^b[1-4]\n\$", "^b[1-4]\n\$", qr/\A(b[1-4]) MISS 0 \d+\n\1 HIT 576 \d+\n\z/]



=== TEST 7: chat with tools: the tools come first, as FS and their canonical JSON; the same tools again is a HIT
--- request eval
my $tools = '[{"type":"function","function":{"name":"get_clause","description":"Fetch a clause of the lease",'
          . '"parameters":{"type":"object","properties":{"number":{"type":"integer"}}}}}]';
my $body = qq|{"model":"m","tools":$tools,"messages":[{"role":"user","content":"$::QUESTION"}]}|;
::post_twice("/v1/chat/completions", $body)
--- response_headers eval
my $tools = '[{"function":{"description":"Fetch a clause of the lease","name":"get_clause",'
          . '"parameters":{"properties":{"number":{"type":"integer"}},"type":"object"}},"type":"function"}]';
::miss_then_hit(length "$::RS" . "tools$::US" . "c$::FS$tools$::RS" . "user$::US" . "c$::QUESTION")
--- response_body_like eval: $::SameBackendTwice



=== TEST 8: chat, the same messages with other tools are another prompt (MISS)
--- request eval
my @body = map { qq|{"model":"m","tools":[{"type":"function","function":{"name":"get_clause",|
                 . qq|"description":"$_","parameters":{"type":"object"}}}],|
                 . qq|"messages":[{"role":"user","content":"$::QUESTION"}]}| }
               "Fetch a clause of the lease", "Search the lease for a word";
[::post("/v1/chat/completions", $body[0]), ::post("/v1/chat/completions", $body[1]), "GET /routes"]
--- response_headers eval
# the two prompts share their first 38 bytes: no full block
my @len = map { length "$::RS" . "tools$::US" . "c$::FS"
                       . qq([{"function":{"description":"$_","name":"get_clause",)
                       . qq("parameters":{"type":"object"}},"type":"function"}])
                       . "$::RS" . "user$::US" . "c$::QUESTION" }
              "Fetch a clause of the lease", "Search the lease for a word";
["X-Prefix-Route: MISS 0 $len[0]", "X-Prefix-Route: MISS 0 $len[1]", ""]
--- response_body_like eval
["^b[1-4]\n\$", "^b[1-4]\n\$", qr/\Ab[1-4] MISS 0 \d+\nb[1-4] MISS 0 \d+\n\z/]



=== TEST 9: chat, name, tool_calls and tool_call_id are fields of their messages, in that order; another tool_call_id matches up to it
--- request eval
my $call = '[{"id":"call_7","type":"function","function":{"name":"get_clause","arguments":"{\"number\":7}"}}]';
my @body = map { qq|{"model":"m","messages":[|
                 . qq|{"role":"user","name":"alice","content":"$::QUESTION"},|
                 . qq|{"role":"assistant","content":null,"tool_calls":$call},|
                 . qq|{"role":"tool","content":"$::DOC","name":"get_clause","tool_call_id":"$_"}]}| }
               "call_7", "call_7", "call_8";
[(map { ::post("/v1/chat/completions", $_) } @body), "GET /routes"]
--- response_headers eval
my $call = '[{"function":{"arguments":"{\"number\":7}","name":"get_clause"},"id":"call_7","type":"function"}]';
my $upto = "$::RS" . "user$::US" . "nalice$::US" . "c$::QUESTION"
         . "$::RS" . "assistant$::US" . "t$::FS$call"
         . "$::RS" . "tool$::US" . "nget_clause$::US" . "c$::DOC$::US" . "icall_";
my $len = length($upto) + 1;
["X-Prefix-Route: MISS 0 $len",
 "X-Prefix-Route: HIT " . ::full_blocks($len) . " $len",
 "X-Prefix-Route: HIT " . ::full_blocks(length $upto) . " $len",
 ""]
--- response_body_like eval
[("^b[1-4]\n\$") x 3, qr/\A(b[1-4]) MISS 0 \d+\n\1 HIT \d+ \d+\n\1 HIT \d+ \d+\n\z/]



=== TEST 10: legacy completions, prompt string: one segment RS "prompt" US "c" and the text
--- request eval
my $body = qq|{"model":"m","prompt":"$::DOC","max_tokens":16}|;
::post_twice("/v1/completions", $body)
--- response_headers eval
# 1 + 6 + 2 + 600 = 609 bytes, 9 full blocks = 576
my $len = length "$::RS" . "prompt$::US" . "c$::DOC";
die "unexpected length" unless $len == 609;
["X-Prefix-Route: MISS 0 609", "X-Prefix-Route: HIT 576 609", ""]
--- response_body_like eval
["^b[1-4]\n\$", "^b[1-4]\n\$", qr/\A(b[1-4]) MISS 0 609\n\1 HIT 576 609\n\z/]



=== TEST 11: legacy completions, prompt array: one segment per element, a token id list as FS and each id with a comma
--- request eval
my $body = qq|{"model":"m","prompt":["$::DOC","$::QUESTION",[101,2023,2003]]}|;
::post_twice("/v1/completions", $body)
--- response_headers eval
::miss_then_hit(length "$::RS" . "prompt$::US" . "c$::DOC"
                     . "$::RS" . "prompt$::US" . "c$::QUESTION"
                     . "$::RS" . "prompt$::US" . "c$::FS" . "101,2023,2003,")
--- response_body_like eval: $::SameBackendTwice



=== TEST 12: Anthropic messages, system string: a system segment, then the messages
--- request eval
my $body = qq|{"model":"m","max_tokens":256,"system":"$::SYSTEM",|
           . qq|"messages":[{"role":"user","content":"$::QUESTION"}]}|;
::post_twice("/v1/messages", $body)
--- response_headers eval
::miss_then_hit(length "$::RS" . "system$::US" . "c$::SYSTEM$::RS" . "user$::US" . "c$::QUESTION")
--- response_body_like eval: $::SameBackendTwice



=== TEST 13: an Anthropic system string and a Chat Completions system message are the same prompt
--- request eval
my $anthropic = qq|{"model":"m","max_tokens":256,"system":"$::SYSTEM",|
                . qq|"messages":[{"role":"user","content":"$::QUESTION"}]}|;
my $openai = qq|{"model":"m","messages":[{"role":"system","content":"$::SYSTEM"},|
             . qq|{"role":"user","content":"$::QUESTION"}]}|;
[::post("/v1/messages", $anthropic), ::post("/v1/chat/completions", $openai), "GET /routes"]
--- response_headers eval
::miss_then_hit(length "$::RS" . "system$::US" . "c$::SYSTEM$::RS" . "user$::US" . "c$::QUESTION")
--- response_body_like eval: $::SameBackendTwice



=== TEST 14: Anthropic messages, system blocks and content blocks: text blocks are text parts, cache_control is left out
--- request eval
my $body = qq|{"model":"m","max_tokens":256,|
           . qq|"system":[{"type":"text","text":"$::SYSTEM","cache_control":{"type":"ephemeral"}}],|
           . qq|"messages":[{"role":"user","content":[{"type":"text","text":"$::QUESTION"}]}]}|;
::post_twice("/v1/messages", $body)
--- response_headers eval
::miss_then_hit(length "$::RS" . "system$::US" . "c$::GS$::SYSTEM$::RS" . "user$::US" . "c$::GS$::QUESTION")
--- response_body_like eval: $::SameBackendTwice



=== TEST 15: Anthropic messages with tools, tool_use and tool_result blocks: tools first, tool blocks as FS and their JSON
--- request eval
my $body = qq|{"model":"m","max_tokens":256,"system":"$::SYSTEM",|
           . qq|"tools":[{"name":"get_clause","description":"Fetch a clause of the lease",|
           . qq|"input_schema":{"type":"object","properties":{"number":{"type":"integer"}}}}],|
           . qq|"messages":[{"role":"user","content":"$::QUESTION"},|
           . qq|{"role":"assistant","content":[{"type":"text","text":"Let me look."},|
           . qq|{"type":"tool_use","id":"toolu_1","name":"get_clause","input":{"number":7}}]},|
           . qq|{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"$::DOC"}]}]}|;
::post_twice("/v1/messages", $body)
--- response_headers eval
my $tools = '[{"description":"Fetch a clause of the lease","input_schema":{"properties":'
          . '{"number":{"type":"integer"}},"type":"object"},"name":"get_clause"}]';
my $use = '{"id":"toolu_1","input":{"number":7},"name":"get_clause","type":"tool_use"}';
my $result = qq({"content":"$::DOC","tool_use_id":"toolu_1","type":"tool_result"});
::miss_then_hit(length "$::RS" . "tools$::US" . "c$::FS$tools"
                     . "$::RS" . "system$::US" . "c$::SYSTEM"
                     . "$::RS" . "user$::US" . "c$::QUESTION"
                     . "$::RS" . "assistant$::US" . "c$::GS" . "Let me look.$::FS$::DIGEST$use"
                     . "$::RS" . "user$::US" . "c$::FS$::DIGEST$result")
--- response_body_like eval: $::SameBackendTwice



=== TEST 16: Responses, instructions and an input string: a system segment and a user segment
--- request eval
my $body = qq|{"model":"m","instructions":"$::SYSTEM","input":"$::QUESTION"}|;
::post_twice("/v1/responses", $body)
--- response_headers eval
::miss_then_hit(length "$::RS" . "system$::US" . "c$::SYSTEM$::RS" . "user$::US" . "c$::QUESTION")
--- response_body_like eval: $::SameBackendTwice



=== TEST 17: Responses, input items: a message item as a message, other items as their type and their JSON
--- request eval
my $body = qq|{"model":"m","input":[|
           . qq|{"type":"message","role":"user","content":[{"type":"input_text","text":"$::QUESTION"}]},|
           . qq|{"type":"function_call","call_id":"call_7","name":"get_clause","arguments":"{\\"number\\":7}"},|
           . qq|{"type":"function_call_output","call_id":"call_7","output":"$::DOC"}]}|;
::post_twice("/v1/responses", $body)
--- response_headers eval
my $call = '{"arguments":"{\"number\":7}","call_id":"call_7","name":"get_clause","type":"function_call"}';
my $output = qq({"call_id":"call_7","output":"$::DOC","type":"function_call_output"});
::miss_then_hit(length "$::RS" . "user$::US" . "c$::GS$::QUESTION"
                     . "$::RS" . "function_call$::US" . "c$::FS$call"
                     . "$::RS" . "function_call_output$::US" . "c$::FS$output")
--- response_body_like eval: $::SameBackendTwice



=== TEST 18: cache_salt: another tenant's salt is a MISS, the same salt a HIT on the first tenant's backend
--- request eval
my @body = map { qq|{"model":"m","cache_salt":"$_","messages":[{"role":"user","content":"$::QUESTION"}]}| }
               "tenant-a", "tenant-b", "tenant-a";
[(map { ::post("/v1/chat/completions", $_) } @body), "GET /routes"]
--- response_headers eval
["X-Prefix-Route: MISS 0 507", "X-Prefix-Route: MISS 0 507", "X-Prefix-Route: HIT 448 507", ""]
--- response_body_like eval
[("^b[1-4]\n\$") x 3, qr/\A(b[1-4]) MISS 0 507\nb[1-4] MISS 0 507\n\1 HIT 448 507\n\z/]



=== TEST 19: cache_salt null is no salt, an empty cache_salt is a salt
--- request eval
my @body = map { qq|{"model":"m",$_"messages":[{"role":"user","content":"$::QUESTION"}]}| }
               "", '"cache_salt":null,', '"cache_salt":"",';
[(map { ::post("/v1/chat/completions", $_) } @body), "GET /routes"]
--- response_headers eval
["X-Prefix-Route: MISS 0 507", "X-Prefix-Route: HIT 448 507", "X-Prefix-Route: MISS 0 507", ""]
--- response_body_like eval
[("^b[1-4]\n\$") x 3, qr/\A(b[1-4]) MISS 0 507\n\1 HIT 448 507\nb[1-4] MISS 0 507\n\z/]



=== TEST 20: another model is a MISS, the first model again a HIT on its backend
--- request eval
my @body = map { qq|{"model":"$_","messages":[{"role":"user","content":"$::QUESTION"}]}| }
               "llama-3-8b", "qwen-2.5-7b", "llama-3-8b";
[(map { ::post("/v1/chat/completions", $_) } @body), "GET /routes"]
--- response_headers eval
["X-Prefix-Route: MISS 0 507", "X-Prefix-Route: MISS 0 507", "X-Prefix-Route: HIT 448 507", ""]
--- response_body_like eval
[("^b[1-4]\n\$") x 3, qr/\A(b[1-4]) MISS 0 507\nb[1-4] MISS 0 507\n\1 HIT 448 507\n\z/]



=== TEST 21: message boundaries: the same text as two user messages instead of one matches only up to the boundary
--- request eval
my ($a, $b) = (::text("First part", 1000), ::text("Second part", 100));
my $one = qq|{"model":"m","messages":[{"role":"user","content":"$a$b"}]}|;
my $two = qq|{"model":"m","messages":[{"role":"user","content":"$a"},{"role":"user","content":"$b"}]}|;
[::post("/v1/chat/completions", $one), ::post("/v1/chat/completions", $two), "GET /routes"]
--- response_headers eval
my ($a, $b) = (::text("First part", 1000), ::text("Second part", 100));
my $one = "$::RS" . "user$::US" . "c$a$b";                              # 1107
my $two = "$::RS" . "user$::US" . "c$a$::RS" . "user$::US" . "c$b";     # 1114
my $common = length "$::RS" . "user$::US" . "c$a";                      # 1007
["X-Prefix-Route: MISS 0 " . length($one),
 "X-Prefix-Route: HIT " . ::full_blocks($common) . " " . length($two), ""]
--- response_body_like eval
["^b[1-4]\n\$", "^b[1-4]\n\$", qr/\A(b[1-4]) MISS 0 1107\n\1 HIT 960 1114\n\z/]



=== TEST 22: SGLang's native /generate: "text" is the prompt, the same prompt as legacy completions' for the same text; a model named is another chain
--- config eval: PrefixRoute::proxy(path => '~ ^/(?:v1/|generate$)', routes => 1)
--- request eval
my $sglang = qq|{"text":"$::DOC","sampling_params":{"max_new_tokens":16},"stream":true}|;
my $legacy = qq|{"prompt":"$::DOC","max_tokens":16}|;
my $named = qq|{"model":"m","prompt":"$::DOC","max_tokens":16}|;
[::post("/generate", $sglang), ::post("/v1/completions", $legacy),
 ::post("/v1/completions", $named), "GET /routes"]
--- response_headers eval
["X-Prefix-Route: MISS 0 609", "X-Prefix-Route: HIT 576 609", "X-Prefix-Route: MISS 0 609", ""]
--- response_body_like eval
[("^b[1-4]\n\$") x 3, qr/\A(b[1-4]) MISS 0 609\n\1 HIT 576 609\nb[1-4] MISS 0 609\n\z/]



=== TEST 23: TGI's native /generate: "inputs" is the prompt, the same prompt as SGLang's "text" for the same text
--- config eval: PrefixRoute::proxy(path => '~ ^/(?:v1/|generate$)', routes => 1)
--- request eval
my $tgi = qq|{"inputs":"$::DOC","parameters":{"max_new_tokens":16}}|;
my $sglang = qq|{"text":"$::DOC","sampling_params":{"max_new_tokens":16}}|;
[::post("/generate", $tgi), ::post("/generate", $sglang), "GET /routes"]
--- response_headers eval
["X-Prefix-Route: MISS 0 609", "X-Prefix-Route: HIT 576 609", ""]
--- response_body_like eval: $::SameBackendTwice



=== TEST 24: SGLang's image_data goes before the text by identity: the same text with another image is a MISS, with the same image a HIT
--- config eval: PrefixRoute::proxy(path => '~ ^/(?:v1/|generate$)', routes => 1)
--- request eval
my @body = map { qq|{"text":"$::DOC","image_data":"http://img/$_.png"}| } "a", "b", "a";
[(map { ::post("/generate", $_) } @body), "GET /routes"]
--- response_headers eval
# the text's 609 bytes after RS "image_data" US "c" FS, the digest and the URL's JSON
my $len = 609 + length("$::RS" . "image_data$::US" . "c$::FS$::DIGEST" . '"http://img/a.png"');
die "unexpected length" unless $len == 657;
["X-Prefix-Route: MISS 0 $len", "X-Prefix-Route: MISS 0 $len",
 "X-Prefix-Route: HIT " . ::full_blocks($len) . " $len", ""]
--- response_body_like eval
[("^b[1-4]\n\$") x 3, qr/\A(b[1-4]) MISS 0 (\d+)\nb[1-4] MISS 0 \2\n\1 HIT \d+ \2\n\z/]



=== TEST 25: SGLang's extra_key and lora_path key the prompt as cache_salt does: another key is a MISS, the first again a HIT
--- config eval: PrefixRoute::proxy(path => '~ ^/(?:v1/|generate$)', routes => 1)
--- request eval
my @body = map { qq|{"text":"$::DOC",$_}| }
               '"extra_key":"t1"', '"extra_key":"t2"', '"lora_path":"t1"', '"extra_key":"t1"';
[(map { ::post("/generate", $_) } @body), "GET /routes"]
--- response_headers eval
[("X-Prefix-Route: MISS 0 609") x 3, "X-Prefix-Route: HIT 576 609", ""]
--- response_body_like eval
[("^b[1-4]\n\$") x 4, qr/\A(b[1-4]) MISS 0 609\n(?:b[1-4] MISS 0 609\n){2}\1 HIT 576 609\n\z/]



=== TEST 26: SGLang's native /generate with "input_ids": token ids are the prompt, the same as legacy completions' token ids; other ids are another prompt
--- config eval: PrefixRoute::proxy(path => '~ ^/(?:v1/|generate$)', routes => 1)
--- request eval
my $ids = CORE::join ",", 1001 .. 1200;
my $other = CORE::join ",", 2001 .. 2200;
[::post("/generate", qq|{"input_ids":[$ids],"sampling_params":{"max_new_tokens":16}}|),
 ::post("/v1/completions", qq|{"prompt":[$ids],"max_tokens":16}|),
 ::post("/generate", qq|{"input_ids":[$other]}|), "GET /routes"]
--- response_headers eval
# one segment: RS "prompt" US "c" FS, then each id's 4 digits and a comma
my $len = length("$::RS" . "prompt$::US" . "c$::FS") + 200 * length("1001,");
die "unexpected length" unless $len == 1010;
["X-Prefix-Route: MISS 0 $len", "X-Prefix-Route: HIT " . ::full_blocks($len) . " $len",
 "X-Prefix-Route: MISS 0 $len", ""]
--- response_body_like eval
[("^b[1-4]\n\$") x 3, qr/\A(b[1-4]) MISS 0 1010\n\1 HIT 960 1010\nb[1-4] MISS 0 1010\n\z/]
