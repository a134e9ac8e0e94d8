# Hostile and odd request bodies: each is proxied to a backend, which gets
# it unchanged, and is either routed by its canonical prompt (MISS, HIT, with
# the $prefix_route_length that docs/design.md "The canonical prompt" gives)
# or balanced by round robin (BYPASS); the module logs at most one line per
# request, at info level, never an error, and never any prompt text, at any
# log level.
#
# The backends b1..b4 echo the body they receive (so a response body equal
# to the request body plus "\n" says the body reached the backend unchanged)
# and name themselves in X-Backend.  They log to logs/backend.log at info
# level: the echo module would write the body into a debug log (its "http
# script var" line), which is not the module's doing.  The proxy location
# shows the routing variables in X-Prefix-Route.
#
# Checks every block has unless it says otherwise:
# - error.log (debug level unless TEST_NGINX_LOG_LEVEL says otherwise; TESTs
#   12 and 21 set debug themselves) has no [error], [crit], [alert] or
#   [emerg] line, and neither error.log nor access.log holds $Marker, a word
#   every prompt text of this file carries;
# - "--- info_lines": a last request, GET /info.log, reads logs/info.log, a
#   second error log at info level, and checks that the lines it holds about
#   connections (all that nginx and the module logged while serving the
#   requests at notice level and above) are exactly those listed, in order.
#   The runner checks an --- error_log pattern after each request of a
#   block, so a line that only some requests log is checked this way.
#
# Canonical lengths: a message {"role":"user","content":S} is RS "user" US
# "c" S, 7 + length(S) bytes; a value that is not a string where one is
# expected is FS and its canonical JSON (jansson, sorted keys, no space);
# a prompt is cut at max_prefix, 65536 bytes by default; only full 64-byte
# blocks are indexed, so a HIT matches full_blocks(length) bytes.
use Test::Nginx::Socket 'no_plan';
use FindBin;
use lib $FindBin::Bin;
use PrefixRoute qw(:DEFAULT text full_blocks);
use IO::Compress::Gzip qw(gzip $GzipError);

# the HTTP/2 listener of TEST 20
our $H2Port = 19390;

# in every prompt text; never in a log
our $Marker = "zanzibarquokka";

# backends that echo the body they receive, named in X-Backend, logging
# elsewhere than error.log
sub echo_backends {
    return join "", map {
        "server {\n    listen " . addr($_) . ";\n"
        . "    error_log logs/backend.log info;\n"
        . "    client_max_body_size 30m;\n    client_body_buffer_size 8m;\n"
        . "    location / {\n        add_header X-Backend b$_;\n"
        . "        echo_read_request_body;\n        echo \$request_body;\n    }\n}\n"
    } @_;
}

# a --- response_body pattern for GET /info.log that matches when the lines
# it holds about connections (not nginx's start-up notices) are @want
# (strings each line contains, or patterns), in order; on a mismatch it
# prints both lists
sub info_lines {
    my @want = @_;
    return qr/\A(.*)\z(?(?{ info_lines_check(\@want, $^N) })|(*FAIL))/s;
}

sub info_lines_check {
    my ($want, $log) = @_;
    my @got = grep { / \*\d+ / } split /^/m, $log;
    my $ok = @got == @$want;
    for my $i (0 .. $#got) {
        last unless $ok;
        my $w = $want->[$i];
        $ok = ref $w ? $got[$i] =~ $w : index($got[$i], $w) >= 0;
    }
    return 1 if $ok;
    my @show = map { my $w = "$_"; $w =~ s/\\(\W)/$1/g; $w } @$want;
    Test::More::diag("info.log holds\n" . join("", map { "    $_" } @got)
                     . "instead of lines with\n" . join("", map { "    $_\n" } @show));
    return 0;
}

# --- info_lines items: the module's lines, and nginx's for a temporary file
sub info_line { qr/\[$_[0]\] \d+#\d+: \*\d+ \Q$_[1]\E/ }
# jansson's error codes, named in the line (never the body's bytes)
our %Reason = (2 => "nested too deep", 5 => "invalid UTF-8",
               6 => "premature end of input", 7 => "more after the end",
               8 => "invalid syntax", 13 => "a NUL byte in a key",
               15 => "a number too large");
sub not_json {
    info_line("info", "prefix_route: request body is not JSON ($Reason{$_[0]}: "
                      . "error $_[0] at byte $_[1]), round robin, client: ")
}
our $NoPrompt = info_line("info", "prefix_route: request body has no prompt, round robin, client: ");
our $StillRead = info_line("info", "prefix_route: request body is still being read "
                                   . "(proxy_request_buffering off?), round robin, client: ");
our $TempFile = info_line("warn", "a client request body is buffered to a temporary file ");

# the module's lines at info level and above, for --- no_error_log (but
# the build's notice at start)
our $ModuleInfo = qr/\[(?:notice|info|warn)\] .*prefix_route(?! module )/;

add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value(main_config => $LoadModule . $LoadEcho . "error_log logs/info.log info;\n")
        unless defined $block->main_config;
    # what jansson reads of these bodies is tested at any speed (valgrind's
    # too): max_parse is TEST 23's
    $block->set_value(http_config => upstream("zone=llm:1m max_parse=off", 1 .. 4)
                                     . echo_backends(1 .. 4))
        unless defined $block->http_config;
    # no temporary file for the echoed bodies: nginx would warn about it
    $block->set_value(config => ($block->config // "")
                                . proxy(path => "/", add => "proxy_max_temp_file_size 0;")
                                . "location = /info.log {\n    alias logs/info.log;\n}\n");
    $block->set_value(no_error_log => ["[error]", "[crit]", "[alert]", "[emerg]", $Marker])
        unless defined $block->no_error_log;
    $block->set_value(no_access_log => $Marker) unless defined $block->no_access_log;

    my $want = $block->info_lines;
    return $block unless defined $want;
    die $block->name . ": --- info_lines needs --- response_body\n"
        unless defined $block->response_body;

    # one more request, GET /info.log, and its expected response
    my $req = $block->request;
    my @reqs = ref $req eq 'ARRAY' ? @$req : ($req);
    for my $sect (qw(more_headers response_headers response_headers_like response_body)) {
        my $v = $block->$sect;
        next unless defined $v;
        my @v = ref $v eq 'ARRAY' ? @$v : (($v) x @reqs);
        push @v, $sect eq 'response_body' ? info_lines(ref $want ? @$want : ()) : "";
        $block->set_value($sect => \@v);
    }
    $block->set_value(request => [@reqs, "GET /info.log"]);
    return $block;
});

# a request that posts $body; in HTTP/1.0, so that the echoed body comes back
# whole rather than in chunks (the runner decodes megabytes of chunks slowly)
sub post { "POST /v1/chat/completions HTTP/1.0\n" . shift }

# a chat body of one user message whose content is $content, JSON text
sub chat_of { "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":$_[0]}]}" }

# the same with a string content (no escaping: ASCII text without quotes)
sub chat_str { chat_of("\"$_[0]\"") }

# the body in HTTP/1.1 chunks of $size bytes
sub chunked {
    my ($body, $size) = @_;
    return join('', map { sprintf "%x\r\n%s\r\n", length $_, $_ } unpack "(a$size)*", $body)
           . "0\r\n\r\n";
}

# the echoed bodies of requests
sub echoed { [map { "$_\n" } @_] }

# a 600-byte prompt text: a chat body of 607 canonical bytes
our $Text = text($Marker, 600);
our $Chat = chat_str($Text);

# a 1 MiB string
our $Big = chat_str(text("$Marker big", 1024 * 1024));

# TEST 1
our @Malformed = (
    # cut inside a string, after a message, inside an escape
    qq({"model":"m","messages":[{"role":"user","content":"$Marker asks),
    qq({"model":"m","messages":[{"role":"user","content":"$Marker asks"}),
    qq({"model":"m","messages":[{"role":"user","content":"$Marker asks \\u00),
    # not JSON that some encoders write
    qq({"model":"m","messages":[{"role":"user","content":"$Marker asks"},]}),
    qq({'model':'m','messages':[{'role':'user','content':'$Marker asks'}]}),
    qq({model:"m",messages:[{role:"user",content:"$Marker asks"}]}),
    qq({"model":"m","temperature":NaN,"messages":[{"role":"user","content":"$Marker asks"}]}),
    qq({/* $Marker */"model":"m","messages":[{"role":"user","content":"hi"}]}),
    qq({"model":"m","messages":[{"role":"user","content":"$Marker\tasks"}]}),
    qq({"model":"m","messages":[{"role":"user","content":"$Marker \\x41"}]}),
    # a valid document and more, a byte order mark, a JSON string
    qq({"model":"m","messages":[{"role":"user","content":"$Marker asks"}]}{"model":"m"}),
    qq(\xef\xbb\xbf{"model":"m","messages":[{"role":"user","content":"$Marker asks"}]}),
    qq("{\\"model\\":\\"m\\",\\"messages\\":[{\\"role\\":\\"user\\",\\"content\\":\\"$Marker\\"}]}"),
);

# TEST 2
our $Emoji = "\xf0\x9f\x98\x80";        # U+1F600 in UTF-8
our $Text200 = text($Marker, 200);
our @BadUtf8 = (
    chat_str("caf\xe9 $Marker"),                      # Latin-1
    chat_str("\xc0\xaf $Marker"),                     # overlong "/"
    chat_str("\xed\xa0\x80 $Marker"),                 # a surrogate in UTF-8
    chat_str("$Marker \xe2\x82"),                     # cut short
    chat_str("$Marker \xff"),                         # never in UTF-8
    chat_str("\\ud800 $Marker"),                      # a lone surrogate escape
    qq({"model":"m","user":"caf\xe9","messages":[{"role":"user","content":"$Marker"}]}),
    qq({"model":"m","caf\xe9":1,"messages":[{"role":"user","content":"$Marker"}]}),
);
our @GoodUtf8 = (chat_str("$Text200 $Emoji"), chat_str("$Text200 \\ud83d\\ude00"));

# TEST 3: a long text, then NUL, then one of two short ones
our $NulA = text($Marker, 1000);
our $NulB = text("bravo", 300);
our $NulC = text("charlie", 300);
our @Nul = (
    # refused: raw NUL in a string, before and after the document; \u0000
    # in a key
    chat_str("$Marker\0asks"),
    "\0" . chat_str("$Marker asks"),
    chat_str("$Marker asks") . "\0",
    qq({"model":"m","messages":[{"role":"user","content":"$Marker","a\\u0000b":1}]}),
    # read: \u0000 in a content, in a model
    chat_str("$NulA\\u0000$NulB"),
    chat_str("$NulA\\u0000$NulB"),
    chat_str("$NulA\\u0000$NulC"),
    qq({"model":"m\\u0000x","messages":[{"role":"user","content":"$NulA\\u0000$NulB"}]}),
);

# TEST 4
our $Deep = 100_000;
our @TooDeep = (
    qq({"model":"m","messages":[{"role":"user","content":"$Marker"},) . "[" x $Deep . "]" x $Deep . "]}",
    chat_of('{"a":' x $Deep . "\"$Marker\"" . "}" x $Deep),
    qq({"model":"m","metadata":) . "[" x $Deep . "]" x $Deep
        . qq(,"messages":[{"role":"user","content":"$Marker"}]}),
);
our $Deep2000 = chat_of("[" x 2000 . "]" x 2000);

# TEST 5: 100,000 messages (3.3 MB), and 20,000 text parts, image parts or
# tools (0.8 to 1.6 MB): all far beyond max_prefix
our $ManyMessages = qq({"model":"m","messages":[{"role":"user","content":"$Marker"},)
    . join(",", map { qq({"role":"user","content":"$_"}) } 2 .. 100_000) . "]}";
our $ManyTextParts = chat_of("["
    . join(",", map { qq({"type":"text","text":"$Marker $_"}) } 1 .. 20_000) . "]");
our $ManyImageParts = chat_of("["
    . join(",", map { qq({"type":"image_url","image_url":{"url":"https://x/$Marker/$_.png"}}) } 1 .. 20_000)
    . "]");
our $ManyTools = '{"model":"m","tools":['
    . join(",", map { qq({"type":"function","function":{"name":"f$_","description":"$Marker"}}) } 1 .. 20_000)
    . qq(],"messages":[{"role":"user","content":"$Marker"}]});

# TEST 6: 1 MiB of "\u001e" (each a reserved byte: ESC and a byte, 2 bytes
# of canonical prompt), so that the cap falls between the two
our $BigEscapes = chat_str("$Marker" . "\\u001e" x (1024 * 1024 / 6));

# TEST 7
our @Numbers = (
    # refused
    qq({"model":"m","max_tokens":1e400,"messages":[{"role":"user","content":"$Marker"}]}),
    qq({"model":"m","max_tokens":123456789012345678901234567890,"messages":[{"role":"user","content":"$Marker"}]}),
    chat_of("123456789012345678901234567890"),
    chat_of("1e400"),
    chat_of("-1e400"),
    # read
    qq({"model":"m","max_tokens":1e-400,"messages":[{"role":"user","content":"$Text"}]}),
    chat_of("9223372036854775807"),
    chat_of("0.1"),
);

# TEST 8: model x then m, messages A then B, in B content A then B
our $DupA = text("$Marker alpha", 500);
our $DupB = text("$Marker bravo", 500);
our @Dup = (
    qq({"model":"x","messages":[{"role":"user","content":"$DupA"}],)
        . qq("messages":[{"role":"user","content":"$DupA","content":"$DupB"}],"model":"m"}),
    chat_str($DupB),
    chat_str($DupA),
);

# TEST 9
our @WrongTypes = (
    chat_of("12345"),
    chat_of('{"a":"b"}'),
    chat_of('[{"type":"text","text":5}]'),
    qq({"model":"m","messages":[{"role":{"x":1},"content":"$Text"}]}),
    qq({"model":"m","tools":"tt","messages":[{"role":"user","content":"$Text"}]}),
    '{"model":"m","messages":[null]}',
    '{"model":"m","messages":[42]}',
    '{"model":"m","prompt":42}',
    '{"model":"m","input":{"a":1}}',
);

# TEST 10
our @Models = (
    chat_str($Text),
    qq({"model":["m"],"messages":[{"role":"user","content":"$Text"}]}),
    qq({"model":"[\\"m\\"]","messages":[{"role":"user","content":"$Text"}]}),
);

# TEST 11
our @NoPromptField = (
    qq({"model":"m","messages":{"role":"user","content":"$Marker"}}),
    qq({"model":"m","messages":true}),
    qq({"model":"m","messages":"$Marker"}),
    qq({"model":"m","prompt":null,"content":"$Marker"}),
);

# TEST 15
our $Gzipped;
gzip(\$Chat => \$Gzipped) or die "gzip: $GzipError";

# TEST 21: the marker in the model, a tool, the system prompt, a name and
# the user turn: 9 + 60 bytes of tools, 27 of system, 625 of user = 721
our $Tagged = qq({"model":"m-$Marker","tools":[{"type":"function","function":{"name":"t_$Marker"}}],)
    . qq("messages":[{"role":"system","content":"sys $Marker"},{"role":"user","name":"n_$Marker","content":"$Text"}]});

# TEST 22: 6 MB of text in one string, and 6 MB of empty objects, as the
# items of a legacy Completions prompt list (jansson's) and as messages (the
# fast path's)
our $Flat6m = chat_str(text($Marker, 6_000_000));
our $Objects6m = qq({"model":"m","prompt":[{"role":"user","content":"$Marker"},)
    . join(",", ("{}") x 2_000_000) . "]}";
(our $Messages6m = $Objects6m) =~ s/"prompt"/"messages"/;

# TEST 23: 700,000 distinct keys (9 MB) beside a chat message, and an
# escaped key that leaves the body to jansson: some 0.7 s of its parse on
# this project's machines (5-12 MB/s for this shape)
our $Keys9m = chat_str(text($Marker, 600));
substr($Keys9m, -1, 0) = qq(,"\\u0061":1,) . join(",", map { sprintf '"k%07d":1', $_ } 1 .. 700_000);

# TESTs 23 and 24: the bodies in memory, and a location for the upstream
# "off", which has max_parse=off
our $OffGroup = <<'CONF';
client_body_buffer_size 16m;
location /off/ {
    proxy_pass http://off/;
    proxy_max_temp_file_size 0;
    add_header X-Prefix-Route "$prefix_route_status $prefix_route_match $prefix_route_length" always;
}
CONF

# TEST 24: 4 million small values, some 30 ms of the fast path
our $Values8m = chat_str(text($Marker, 600));
substr($Values8m, -1, 0) = ',"x":[' . join(",", (1) x 4_000_000) . ']';

# a --- response_body pattern that matches whatever the response when the
# peak resident memory (VmHWM) of nginx's processes so far is below $mb MB;
# else it prints it
sub peak_below {
    my $mb = shift;
    return qr/\A(?(?{ peak_check($mb) })|(*FAIL))/;
}

sub peak_check {
    my $mb = shift;
    # valgrind and ASan's shadow memory make resident sizes meaningless
    return 1 if $ENV{TEST_NGINX_USE_VALGRIND} || $ENV{TEST_NGINX_ASAN};
    open my $in, '<', server_root() . "/logs/nginx.pid" or return 0;
    chomp(my $pid = <$in> // '');
    my @pids = ($pid);
    if (open my $ch, '<', "/proc/$pid/task/$pid/children") {
        push @pids, split ' ', <$ch> // '';
    }
    my $peak = 0;
    for my $p (@pids) {
        open my $st, '<', "/proc/$p/status" or next;
        while (my $line = <$st>) {
            $peak = $1 if $line =~ /^VmHWM:\s+(\d+) kB/ && $1 > $peak;
        }
    }
    return 1 if $peak && $peak < $mb * 1024;
    Test::More::diag(sprintf "nginx's peak resident memory is %.0f MB, not below %d MB", $peak / 1024, $mb);
    return 0;
}

# TEST 20: POST $body over HTTP/2 with prior knowledge (curl) to $uri of the
# HTTP/2 listener; html/h2/$n.txt gets "HTTP-version status X-Prefix-Route",
# html/h2/$n.body the response body
sub h2_post {
    my ($n, $uri, $body) = @_;
    my $dir = html_dir() . "/h2";
    mkdir $dir;
    open my $out, '>', "$dir/$n.json" or die "$dir/$n.json: $!";
    binmode $out;
    print $out $body;
    close $out;
    my @curl = ("curl", "-sS", "--http2-prior-knowledge", "--max-time", "5",
                "--data-binary", "\@$dir/$n.json", "-H", "Content-Type: application/json",
                "-o", "$dir/$n.body",
                "-w", "%{http_version} %{response_code} %header{x-prefix-route}\\n",
                "http://127.0.0.1:$H2Port$uri");
    open my $curl, '-|', @curl or die "curl: $!";
    my $res = do { local $/; <$curl> };
    close $curl;
    open $out, '>', "$dir/$n.txt" or die "$dir/$n.txt: $!";
    print $out $res;
    close $out;
}

no_shuffle();
no_root_location();
run_tests();

__DATA__

=== TEST 1: malformed and truncated JSON is proxied unchanged by round robin, one info line each
Cut inside a string, after a message, inside an escape; a trailing comma,
single quotes, bare keys, NaN, a comment, a raw tab in a string, a bad
escape; a valid document followed by another, one after a byte order mark,
one quoted as a JSON string.  The line names the error position, not the
body.
--- request eval
[map { ::post($_) } @::Malformed]
--- response_headers eval
[map { "X-Prefix-Route: BYPASS 0 0\nX-Backend: b" . ($_ % 4 + 1) } 0 .. $#::Malformed]
--- response_body eval
::echoed(@::Malformed)
--- info_lines eval
[map { ::not_json(@$_) } [6, 70], [6, 72], [8, 75], [8, 74], [8, 2], [8, 6], [8, 30], [8, 2], [8, 65],
                          [8, 68], [7, 75], [8, 3], [8, 85]]



=== TEST 2: invalid UTF-8 anywhere in the body: BYPASS; valid UTF-8 and escapes count as the same bytes
jansson checks the whole body: a bad byte in a field the prompt does not
use (user) or in a key also leaves the request without a prompt.  The last
two requests hold U+1F600 as raw UTF-8, then as an escaped surrogate pair:
the same 4 bytes of prompt, 7 + 200 + 1 + 4 = 212.
--- request eval
[map { ::post($_) } @::BadUtf8, @::GoodUtf8]
--- response_headers eval
[("X-Prefix-Route: BYPASS 0 0") x @::BadUtf8, "X-Prefix-Route: MISS 0 212", "X-Prefix-Route: HIT 192 212"]
--- response_body eval
::echoed(@::BadUtf8, @::GoodUtf8)
--- info_lines eval
[map { ::not_json(@$_) } [5, 54], [5, 51], [5, 51], [5, 66], [5, 66], [8, 73], [5, 24], [5, 17]]



=== TEST 3: raw NUL bytes: BYPASS; \u0000 inside strings is a byte of the prompt, not its end
A raw NUL in a string, before the document, after it, and \u0000 in a key
(jansson refuses those): round robin.  Then content A \u0000 B (7 + 1000 +
1 + 300 = 1308 bytes), again (HIT), A \u0000 C (HIT on the 1008 bytes up to
the NUL: 960 in full blocks), and A \u0000 B under model "m\u0000x", which
is not model "m": MISS.
--- request eval
[map { ::post($_) } @::Nul]
--- response_headers eval
[("X-Prefix-Route: BYPASS 0 0") x 4,
 "X-Prefix-Route: MISS 0 1308", "X-Prefix-Route: HIT 1280 1308",
 "X-Prefix-Route: HIT 960 1308", "X-Prefix-Route: MISS 0 1308"]
--- response_body eval
::echoed(@::Nul)
--- info_lines eval
[map { ::not_json(@$_) } [8, 65], [6, 1], [7, 75], [13, 77]]



=== TEST 4: nesting 100,000 levels deep is refused by jansson (depth 2048): BYPASS; 2,000 levels count in full
Arrays as a message, objects as a content, arrays in a field the prompt
does not use.  The error is jansson's stack overflow (2) right after
depth 2048.  A content of 2,000 nested arrays is one part: 7 + FS + 16
digest digits + 3998 bytes of JSON = 4022.
--- config
client_body_buffer_size 1m;
--- request eval
[(map { ::post($_) } @::TooDeep), ::post($::Deep2000)]
--- response_headers eval
[("X-Prefix-Route: BYPASS 0 0") x 3, "X-Prefix-Route: MISS 0 4022"]
--- response_body eval
::echoed(@::TooDeep, $::Deep2000)
--- info_lines eval
[map { ::not_json(@$_) } [2, 2115], [2, 10276], [2, 2072]]



=== TEST 5: 100,000 messages, or 20,000 text parts, image parts or tools: the walk stops at max_prefix (65536 bytes)
The same 100,000 messages twice: MISS, then HIT on all 1024 blocks.
--- config
client_body_buffer_size 8m;
--- request eval
[map { ::post($_) } $::ManyMessages, $::ManyMessages, $::ManyTextParts, $::ManyImageParts, $::ManyTools]
--- response_headers eval
["X-Prefix-Route: MISS 0 65536", "X-Prefix-Route: HIT 65536 65536",
 ("X-Prefix-Route: MISS 0 65536") x 3]
--- response_body eval
::echoed($::ManyMessages, $::ManyMessages, $::ManyTextParts, $::ManyImageParts, $::ManyTools)
--- info_lines eval
[]



=== TEST 6: a 1 MiB string is cut at max_prefix, also when the cut falls inside an escaped reserved byte
1 MiB of text: MISS then HIT on 65536 bytes.  1 MiB of "\u001e" escapes
(each ESC and a byte in the canonical prompt; 7 + 14 bytes before them, so
the 65536th byte is an ESC): 65536 bytes.
--- config
client_body_buffer_size 4m;
--- request eval
[map { ::post($_) } $::Big, $::Big, $::BigEscapes]
--- response_headers eval
["X-Prefix-Route: MISS 0 65536", "X-Prefix-Route: HIT 65536 65536", "X-Prefix-Route: MISS 0 65536"]
--- response_body eval
::echoed($::Big, $::Big, $::BigEscapes)
--- info_lines eval
[]



=== TEST 7: huge numbers: beyond jansson's range (int64, double) the body is refused: BYPASS; within it they count as jansson writes them
1e400 and 123456789012345678901234567890 as max_tokens, then as content,
and -1e400: jansson's numeric overflow (error 15), round robin.  1e-400
(an underflow, read as 0) is no error: the prompt is the message, 7 + 600.
9223372036854775807 as content is FS and its 19 digits: 27; 0.1 is written
as 0.10000000000000001: 27.
--- request eval
[map { ::post($_) } @::Numbers]
--- response_headers eval
[("X-Prefix-Route: BYPASS 0 0") x 5, "X-Prefix-Route: MISS 0 607", ("X-Prefix-Route: MISS 0 27") x 2]
--- response_body eval
::echoed(@::Numbers)
--- info_lines eval
[map { ::not_json(@$_) } [15, 31], [15, 56], [15, 80], [15, 55], [15, 56]]



=== TEST 8: duplicate keys: the last one counts, as jansson keeps it
A body with "model" twice ("x", then "m"), "messages" twice (A, then B)
and "content" twice in B's message (A, then B) has the prompt of the body
with model "m" and messages B only: the second request, which is that
body, is a HIT on all its full blocks.  A alone then shares less than a
block with it: a MISS.
--- request eval
[map { ::post($_) } @::Dup]
--- response_headers eval
["X-Prefix-Route: MISS 0 507", "X-Prefix-Route: HIT 448 507", "X-Prefix-Route: MISS 0 507"]
--- response_body eval
::echoed(@::Dup)
--- info_lines eval
[]



=== TEST 9: fields of the wrong type count by their canonical JSON
content a number (RS user US c FS 12345: 13), an object (FS {"a":"b"}: 17),
a text part whose text is a number (FS, 16 digest digits and
{"text":5,"type":"text"}: 7 + 41 = 48); role an object (RS FS {"x":1} US c
S: 11 + 600); tools a string (RS tools US c FS "tt": 13, then the message:
620); a message that is null (RS FS null: 6), a number (RS FS 42: 4);
legacy prompt a number (RS prompt US c FS 42: 12); Responses input an
object (RS user US c FS {"a":1}: 15).
--- request eval
[map { ::post($_) } @::WrongTypes]
--- response_headers eval
["X-Prefix-Route: MISS 0 13", "X-Prefix-Route: MISS 0 17", "X-Prefix-Route: MISS 0 48",
 "X-Prefix-Route: MISS 0 611", "X-Prefix-Route: MISS 0 620", "X-Prefix-Route: MISS 0 6",
 "X-Prefix-Route: MISS 0 4", "X-Prefix-Route: MISS 0 12", "X-Prefix-Route: MISS 0 15"]
--- response_body eval
::echoed(@::WrongTypes)
--- info_lines eval
[]



=== TEST 10: a model that is not a string is hashed as its canonical JSON
The same message under model "m", then model ["m"]: another model, so a
MISS.  Then model "[\"m\"]", a string equal to that JSON: the same model
as ["m"] (docs/design.md, "Cap, key and seed"), so a HIT.
--- request eval
[map { ::post($_) } @::Models]
--- response_headers eval
["X-Prefix-Route: MISS 0 607", "X-Prefix-Route: MISS 0 607", "X-Prefix-Route: HIT 576 607"]
--- response_body eval
::echoed(@::Models)
--- info_lines eval
[]



=== TEST 11: a prompt field of the wrong type at the top: messages an object, true or a string; prompt null: BYPASS
"messages" that is not an array declines the body (docs/design.md); a
prompt of null counts as absent, and "content" is no prompt field.
--- request eval
[map { ::post($_) } @::NoPromptField]
--- response_headers eval
[("X-Prefix-Route: BYPASS 0 0") x 4]
--- response_body eval
::echoed(@::NoPromptField)
--- info_lines eval
[($::NoPrompt) x 4]



=== TEST 12: a body of no bytes (Content-Length: 0, or only the last chunk) is BYPASS without a line at info level
nginx 1.22 hands an empty body over as one empty buffer, or none: the
module sees no body and says so at debug level only.
--- log_level: debug
--- request eval
["POST /v1/chat/completions\n", "POST /v1/chat/completions\n0\r\n\r\n"]
--- more_headers eval
["Content-Length: 0", "Transfer-Encoding: chunked"]
--- response_headers eval
["X-Prefix-Route: BYPASS 0 0\nX-Backend: b1", "X-Prefix-Route: BYPASS 0 0\nX-Backend: b2"]
--- response_body eval
["\n", "\n"]
--- error_log eval
qr/\[debug\] .*prefix_route: no request body, round robin/
--- no_error_log eval
["[error]", "[crit]", "[alert]", "[emerg]", $::ModuleInfo]



=== TEST 13: blanks, {} and null: BYPASS, one info line each
Blanks are no JSON; null is a JSON text jansson refuses at the top (it
takes an object or an array); {} has no prompt field.
--- request eval
["POST /v1/chat/completions\n \r\n\t", "POST /v1/chat/completions\n{}",
 "POST /v1/chat/completions\nnull"]
--- more_headers eval
["Content-Length: 4", "", ""]
--- response_headers eval
[("X-Prefix-Route: BYPASS 0 0") x 3]
--- response_body eval
[" \r\n\t\n", "{}\n", "null\n"]
--- info_lines eval
[::not_json(6, 4), $::NoPrompt, ::not_json(8, 4)]



=== TEST 14: the module does not look at Content-Type: a JSON body sent as text/plain or multipart is routed, a form body sent as JSON is not
text/plain: MISS; the same body as multipart/form-data: HIT; a form body
as application/json: BYPASS (not JSON).
--- request eval
[::post($::Chat), ::post($::Chat), ::post("model=m&messages=$::Marker")]
--- more_headers eval
["Content-Type: text/plain", "Content-Type: multipart/form-data; boundary=x",
 "Content-Type: application/json"]
--- response_headers eval
["X-Prefix-Route: MISS 0 607", "X-Prefix-Route: HIT 576 607", "X-Prefix-Route: BYPASS 0 0"]
--- response_body eval
::echoed($::Chat, $::Chat, "model=m&messages=$::Marker")
--- info_lines eval
[::not_json(8, 5)]



=== TEST 15: a gzip-encoded body is not JSON to the module: BYPASS, proxied unchanged; a mislabelled plain body is routed
The module reads the bytes as they came (nginx does not decode request
bodies): twice the gzipped chat body, by round robin; then the plain body
under Content-Encoding: gzip, routed like any JSON body.
--- request eval
[::post($::Gzipped), ::post($::Gzipped), ::post($::Chat)]
--- more_headers eval
[("Content-Encoding: gzip\nContent-Type: application/json\nContent-Length: " . length $::Gzipped) x 2,
 "Content-Encoding: gzip\nContent-Type: application/json"]
--- response_headers eval
["X-Prefix-Route: BYPASS 0 0\nX-Backend: b1", "X-Prefix-Route: BYPASS 0 0\nX-Backend: b2",
 "X-Prefix-Route: MISS 0 607"]
--- response_body eval
::echoed($::Gzipped, $::Gzipped, $::Chat)
--- info_lines eval
[(::not_json(8, 1)) x 2]



=== TEST 16: chunked transfer with request buffering: chunks arriving over several reads are read whole
Chunks of 100 bytes (one with a chunk extension) in 4 packets 20 ms apart:
MISS, then HIT; a malformed body in chunks: BYPASS.
--- config
client_body_buffer_size 1m;
--- request eval
my $c = ::chunked($::Chat, 100);
$c =~ s/\r\n/;ext=1\r\n/;
my @p = unpack '(a200)*', $c;
my $req = ["POST /v1/chat/completions\n" . shift(@p), map { { value => $_, delay_before => 0.02 } } @p];
[$req, $req, "POST /v1/chat/completions\n" . ::chunked($::Malformed[0], 10)]
--- more_headers
Transfer-Encoding: chunked
--- response_headers eval
["X-Prefix-Route: MISS 0 607", "X-Prefix-Route: HIT 576 607", "X-Prefix-Route: BYPASS 0 0"]
--- response_body eval
::echoed($::Chat, $::Chat, $::Malformed[0])
--- info_lines eval
[::not_json(6, 70)]



=== TEST 17: chunked transfer without request buffering: a body still arriving is not waited for (BYPASS), one read whole is routed
proxy_request_buffering off and proxy_http_version 1.1 (with 1.0 nginx
buffers a chunked body anyway, see TEST 18): the body in 4 packets 20 ms
apart is BYPASS; the whole body in the first packet makes nginx buffer it
after all: MISS, then HIT.  All arrive unchanged.
--- config
proxy_request_buffering off;
proxy_http_version 1.1;
--- request eval
my @p = unpack '(a200)*', ::chunked($::Chat, 100);
my $slow = ["POST /v1/chat/completions\n" . shift(@p), map { { value => $_, delay_before => 0.02 } } @p];
my $whole = "POST /v1/chat/completions\n" . ::chunked($::Chat, 100);
[$slow, $whole, $whole]
--- more_headers
Transfer-Encoding: chunked
--- response_headers eval
["X-Prefix-Route: BYPASS 0 0", "X-Prefix-Route: MISS 0 607", "X-Prefix-Route: HIT 576 607"]
--- response_body eval
::echoed(($::Chat) x 3)
--- info_lines eval
[$::StillRead]



=== TEST 18: proxy_request_buffering off: a body arriving in pieces is BYPASS, unless chunked to an HTTP/1.0 upstream, which nginx buffers
Content-Length bodies in 3 packets 200 ms apart (20 ms were not enough
under valgrind on a loaded machine: nginx read the whole body at once):
the chat body, and the same cut at 400 bytes, both BYPASS without being
read (the "still being read" line, not "not JSON").  The chat body chunked, in packets the same
way, with proxy_http_version 1.0 (the default before nginx 1.29.7): nginx
cannot stream a chunked body to an HTTP/1.0 upstream, so it buffers it,
and the body is routed: MISS.
--- config
proxy_request_buffering off;
proxy_http_version 1.0;
--- request eval
my $slow = sub {
    my @p = unpack '(a250)*', shift;
    ["POST /v1/chat/completions\n" . shift(@p), map { { value => $_, delay_before => 0.2 } } @p];
};
[$slow->($::Chat), $slow->(substr $::Chat, 0, 400), $slow->(::chunked($::Chat, 100))]
--- more_headers eval
["Content-Length: " . length $::Chat, "Content-Length: 400", "Transfer-Encoding: chunked"]
--- response_headers eval
["X-Prefix-Route: BYPASS 0 0", "X-Prefix-Route: BYPASS 0 0", "X-Prefix-Route: MISS 0 607"]
--- response_body eval
::echoed($::Chat, substr($::Chat, 0, 400), $::Chat)
--- info_lines eval
[($::StillRead) x 2]



=== TEST 19: bodies larger than client_body_buffer_size are read from the temporary file, hostile ones too
client_body_buffer_size 8k: a 1 MiB string (MISS, then HIT on 65536
bytes), 100,000 messages (65536 bytes), the 1 MiB body cut short, and the
same with a Latin-1 byte at about byte 200,000 (in the 4th 64 KiB read of
the file): BYPASS.
--- config
client_body_buffer_size 8k;
--- request eval
my $cut = substr $::Big, 0, 500_000;
my $latin1 = $::Big;
substr($latin1, 200_000, 1) = "\xe9";
[map { ::post($_) } $::Big, $::Big, $::ManyMessages, $cut, $latin1]
--- response_headers eval
["X-Prefix-Route: MISS 0 65536", "X-Prefix-Route: HIT 65536 65536", "X-Prefix-Route: MISS 0 65536",
 "X-Prefix-Route: BYPASS 0 0", "X-Prefix-Route: BYPASS 0 0"]
--- response_body eval
my $cut = substr $::Big, 0, 500_000;
my $latin1 = $::Big;
substr($latin1, 200_000, 1) = "\xe9";
::echoed($::Big, $::Big, $::ManyMessages, $cut, $latin1)
--- info_lines eval
[($::TempFile) x 4, ::not_json(6, 500000), $::TempFile, ::not_json(5, 200000)]



=== TEST 20: HTTP/2 (curl with prior knowledge): routed like HTTP/1.1, in memory and in the temporary file; unbuffered bodies are BYPASS
The runner speaks HTTP/1.1 only: --- init posts the bodies with curl to
an HTTP/2 listener of the same server and keeps the version, status and
X-Prefix-Route of each response in html/h2/N.txt and its body in
html/h2/N.body, which the requests below read.  1, 2: the chat body, MISS
then HIT.  3: a location with proxy_request_buffering off: HTTP/2 never
turns buffering back on, so even a body that came whole is BYPASS.  4: the
1 MiB body in the temporary file of a location with client_body_buffer_size
8k: 65536 bytes.  5: a malformed body: BYPASS.
--- config eval
"listen 127.0.0.1:$::H2Port http2;\nlocation /h2/ {\n    alias html/h2/;\n}\n"
. ::proxy(path => "/nobuf/", add => "proxy_request_buffering off;")
. ::proxy(path => "/file/", add => "client_body_buffer_size 8k;")
--- init
main::h2_post(1, "/v1/chat/completions", $main::Chat);
main::h2_post(2, "/v1/chat/completions", $main::Chat);
main::h2_post(3, "/nobuf/chat/completions", $main::Chat);
main::h2_post(4, "/file/chat/completions", $main::Big);
main::h2_post(5, "/v1/chat/completions", $main::Malformed[0]);
--- request eval
[map { ("GET /h2/$_.txt", "GET /h2/$_.body") } 1 .. 5]
--- response_body eval
["2 200 MISS 0 607\n", "$::Chat\n", "2 200 HIT 576 607\n", "$::Chat\n",
 "2 200 BYPASS 0 0\n", "$::Chat\n", "2 200 MISS 0 65536\n", "$::Big\n",
 "2 200 BYPASS 0 0\n", "$::Malformed[0]\n"]
--- info_lines eval
[qr/$::StillRead.*"POST \/nobuf\/chat\/completions HTTP\/2\.0"/,
 qr/$::TempFile.*"POST \/file\/chat\/completions HTTP\/2\.0"/,
 qr/${\ ::not_json(6, 70)}.*"POST \/v1\/chat\/completions HTTP\/2\.0"/]



=== TEST 21: the debug log holds lengths and hashes of prompts, never their text
At debug level, a chat body whose model, tools, system prompt, name and
user turn carry the marker, and the 1 MiB body from the temporary file:
the log has each prompt's length, block count, key and seed, and no
marker; the module logs nothing at info level.
--- log_level: debug
--- config
client_body_buffer_size 8k;
--- request eval
["POST /v1/chat/completions\n" . $::Tagged, ::post($::Big)]
--- response_headers eval
["X-Prefix-Route: MISS 0 721", "X-Prefix-Route: MISS 0 65536"]
--- response_body eval
::echoed($::Tagged, $::Big)
--- error_log eval
qr/\[debug\] .*prefix_route: prompt (?:721 bytes, 11|65536 bytes, 1024) blocks, key [0-9a-f]{16}, seed [0-9a-f]{16}$/
--- no_error_log eval
["[error]", "[crit]", "[alert]", "[emerg]", $::Marker, $::ModuleInfo]



=== TEST 22: a body of many small values is bounded: past jansson's memory budget it is balanced by round robin
jansson builds the whole body as a tree before the prompt is walked: each
3-byte "{}," is an object of ~220 bytes of malloc'ed memory, so 6 MB of
empty objects would take ~450 MB.  The module gives jansson a budget of
16 bytes a body byte plus 1 MiB; past it the parse fails and the request
is BYPASS with one info line.  The 6 MB string (MISS on 65536 bytes)
fits.  The same objects as chat messages take the fast path, which builds
no tree: MISS on 65536 bytes.  After each, GET /peak reads nginx's peak
resident memory from /proc (VmHWM): under 150 MB (the body buffer, the
body, the budget, the fast path's gathered copy).
--- config
client_body_buffer_size 16m;
location = /peak {
    return 200 "peak\n";
}
--- request eval
[::post($::Flat6m), "GET /peak", ::post($::Objects6m), "GET /peak",
 ::post($::Messages6m), "GET /peak"]
--- response_headers eval
["X-Prefix-Route: MISS 0 65536", "", "X-Prefix-Route: BYPASS 0 0", "",
 "X-Prefix-Route: MISS 0 65536", ""]
--- response_body eval
["$::Flat6m\n", ::peak_below(150), "$::Objects6m\n", ::peak_below(150),
 "$::Messages6m\n", ::peak_below(150)]



=== TEST 23: a body jansson parses for longer than max_parse is balanced by round robin, one info line; with max_parse=off it is read
The budget bounds jansson's memory, max_parse (50 ms by default) its
time: 700,000 distinct keys take it some 0.7 s.  The same body sent to
a group with max_parse=off is read: MISS on its 607 bytes of prompt.
--- timeout: 10
--- http_config eval
::upstream(1 .. 4) . ::upstream("zone=off:1m max_parse=off", 1 .. 4)
. ::echo_backends(1 .. 4)
--- config eval
$::OffGroup
--- request eval
[::post($::Keys9m), "POST /off/v1/chat/completions HTTP/1.0\n$::Keys9m"]
--- response_headers eval
["X-Prefix-Route: BYPASS 0 0", "X-Prefix-Route: MISS 0 607"]
--- response_body eval
::echoed($::Keys9m, $::Keys9m)
--- info_lines eval
[::info_line("info", "prefix_route: request body of " . length($::Keys9m)
             . " bytes takes jansson more than max_parse=50ms to parse, round robin")]



=== TEST 24: a body the fast path reads for longer than max_parse is balanced by round robin, one info line, not left to jansson
4 million small values take the fast path some 30 ms, 30 times the 1 ms
that this group allows; the same body in a group without max_parse is
read: MISS on its 607 bytes of prompt.
--- timeout: 10
--- http_config eval
::upstream("zone=llm:1m max_parse=1ms", 1 .. 4) . ::upstream("zone=off:1m max_parse=off", 1 .. 4)
. ::echo_backends(1 .. 4)
--- config eval
$::OffGroup
--- request eval
[::post($::Values8m), "POST /off/v1/chat/completions HTTP/1.0\n$::Values8m"]
--- response_headers eval
["X-Prefix-Route: BYPASS 0 0", "X-Prefix-Route: MISS 0 607"]
--- response_body eval
::echoed($::Values8m, $::Values8m)
--- info_lines eval
[::info_line("info", "prefix_route: request body of " . length($::Values8m)
             . " bytes takes the fast path more than max_parse=1ms to parse, round robin")]
