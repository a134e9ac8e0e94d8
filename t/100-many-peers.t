# An upstream of 200 servers: prefix_route keeps its promises.  Per request
# the balancer looks at every server once (cost, usability), searches the
# index in O(log blocks) tree lookups and walks the matched chain checking
# each holder against the servers (O(matched blocks x holders x servers)
# in the worst case), so its cost grows linearly with the number of
# servers; docs/design.md.
#
# The 200 servers are 200 ports of one backend server block that answers
# with its port.
use Test::Nginx::Socket 'no_plan';
use FindBin;
use lib $FindBin::Bin;
use PrefixRoute qw(:DEFAULT chat chat_body user text);

our $N = 200;
our $Base = 19500;

our $Http = "upstream llm {\n    prefix_route zone=llm:4m;\n"
          . join("", map { "    server 127.0.0.1:" . ($Base + $_) . ";\n" } 1 .. $N)
          . "}\nserver {\n"
          . join("", map { "    listen 127.0.0.1:" . ($Base + $_) . ";\n" } 1 .. $N)
          . "    return 200 \"\$server_port\\n\";\n}\n";

# 3000 servers, nothing listening, in the smallest zone
our $Small = "upstream small {\n    prefix_route zone=small:128k;\n"
           . join("", map { "    server 127.0.0.2:" . (20000 + $_) . ";\n" } 1 .. 3000)
           . "}\n";

add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value(main_config => $LoadModule) unless defined $block->main_config;
    $block->set_value(http_config => $Http) unless defined $block->http_config;
    $block->set_value(config => <<'CONF') unless defined $block->config;
location /v1/ {
    proxy_pass http://llm;
    access_log logs/routes.log route;
}
location = /routes {
    alias logs/routes.log;
}
CONF
    $block->set_value(no_error_log => $NoErrorLog) unless defined $block->no_error_log;
    return $block;
});

# 3000 servers marked down fill the smallest zone's records, then the 4
# backends b1..b4 (answering after 0.5 s): these have no record
our $Recordless = "upstream llm {\n    prefix_route zone=recordless:128k;\n"
                . join("", map { "    server 127.0.0.2:" . (20000 + $_) . " down;\n" } 1 .. 3000)
                . join("", map { "    server " . addr($_) . ";\n" } 1 .. 4)
                . "}\n" . routes(1 .. 4) . backends({ sleep => 0.5 }, 1 .. 4);

# the same fill, then b1 on two lines, the first down
our $Twice = "upstream llm {\n    prefix_route zone=twice:128k;\n"
           . join("", map { "    server 127.0.0.2:" . (20000 + $_) . " down;\n" } 1 .. 3000)
           . "    server " . addr(1) . " down;\n    server " . addr(1) . ";\n"
           . "}\n" . backends(1);

# the JSON status lists the one server on 127.0.0.1 (b1) once, up
sub listed_once {
    my $j = shift;
    my @b1 = $j =~ /"name":"127\.0\.0\.1:\d+","server":"[^"]*","state":"(\w+)"/g;
    return "@b1" eq "up";
}

# the backend of each line of the routes log, and how many it served
sub served {
    my %n;
    $n{(split / /)[0]}++ for split /\n/, shift;
    return \%n;
}

# the routes log: the first 200 requests are MISSes spread over at least
# 150 servers, the next 200 repeat them and are HITs on the same servers
sub check_routes {
    my @lines = split /\n/, shift;
    return 0 unless @lines == 2 * $N;
    my (%servers, $ok);
    for my $i (0 .. $N - 1) {
        my ($first, $s1) = split / /, $lines[$i];
        my ($again, $s2) = split / /, $lines[$N + $i];
        return 0 unless $s1 eq "MISS" && $s2 eq "HIT" && $first eq $again;
        $servers{$first}++;
    }
    return keys %servers >= 150;
}

worker_connections(1024);
no_shuffle();
run_tests();

__DATA__

=== TEST 1: 200 distinct prompts in a row go to at least 150 of the 200 servers, and each repeat goes back to its server as a HIT
--- http_config eval: $::Http . "log_format route '\$upstream_addr \$prefix_route_status';\n"
--- request eval
[(map { ::chat([::user(::text("prompt$_", 600))]) } 1 .. 200),
 (map { ::chat([::user(::text("prompt$_", 600))]) } 1 .. 200),
 "GET /routes"]
--- response_body_like eval
[("\\A\\d+\n\\z") x 400, qr/\A(.*)\z(?(?{ main::check_routes($^N) })|(*FAIL))/s]



=== TEST 2: a zone too small for 3000 servers says so in one line, not one per server
Nothing listens at these addresses; no request goes to the upstream.  The
error log holds the line once.
--- http_config eval: $::Small
--- config
location = /log {
    alias logs/error.log;
}
--- request
GET /log
--- response_body_like eval
qr/\A(?:(?!has no room).)*has no room for \d+ server\(s\)(?:(?!has no room).)*\z/s
--- error_log eval
qr/\[warn\] .*prefix_route zone "small" has no room for \d{3,4} server\(s\), the first 127\.0\.0\.2:\d+: they are balanced by load only/
--- no_error_log
has no room for server
[alert]
[crit]



=== TEST 3: servers without a record in the zone still count their requests in flight: 12 concurrent identical prompts spread as max_load says
A prompt's rank picks the same backend for all 12; only their count of
requests in flight (round robin's connections, as least_conn's) makes
max_load send the rest elsewhere: none may take more than 7 (150% of the
mean of 3, plus 2; docs/reference.md).  Before, a server without a record
was seen idle and took all 12.  All are MISSes: nothing is recorded for
these servers (TEST 2: the warn).
--- main_config eval: $PrefixRoute::LoadModule . $PrefixRoute::LoadEcho
--- http_config eval: $::Recordless
--- config eval
::proxy(routes => 1) . ::fan("/fan", (::chat_body([::user(::text("Same question", 300))])) x 12)
--- request eval
["GET /fan", "GET /routes"]
--- response_body_like eval
["\\A(?:b[1-4]\n){12}\\z",
 qr/\A((?:b[1-4] MISS 0 \d+\n){12})\z(?(?{ my $n = main::served($^N); keys %$n >= 2 && !grep { $_ > 7 } values %$n })|(*FAIL))/]
--- timeout: 10



=== TEST 4: a server of two lines without a record in the zone is listed once by the status, and up while one of its lines is
Its first line is down, its second takes the request.  A server with a
record is listed once by that record (t/080-status.t); one without, by
its address.
--- http_config eval: $::Twice
--- config
location /v1/ {
    proxy_pass http://llm;
}
location = /status {
    prefix_route_status;
}
--- request eval
[::chat([::user(::text("Where", 300))]), "GET /status?format=json"]
--- response_body_like eval
["\\Ab1\n\\z", qr/\A(.*)\z(?(?{ main::listed_once($^N) })|(*FAIL))/s]
