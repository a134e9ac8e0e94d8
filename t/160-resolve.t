# "server name resolve" (nginx 1.27.3+, with the upstream's "zone"): nginx
# resolves the name while it runs and round robin's server lists follow
# the answers; so does prefix_route, each worker's view of the servers
# made again when the lists change.  A server the name no longer gives
# takes no request; one that comes back finds its record and the prompts
# it held.
#
# A name server of the test's own (dns_server() in t/PrefixRoute.pm)
# answers llm.test with the addresses a block's --- init gives
# (dns_answer()); the backends b2, b3 and b4 listen on 127.0.0.2,
# 127.0.0.3 and 127.0.0.4, port 19210, and answer with their names.  HUP
# mode: each block reloads the running nginx, so the blocks share the zone
# and run in order; nginx copies the addresses resolved before a reload to
# the new configuration, and resolves again once they are 1 s old.  Where
# a prompt goes is whatever the choice gives; the blocks check where it
# goes relative to where it went before (%Where).  Skipped before nginx
# 1.27.3.
use Test::Nginx::Socket 'no_plan';
use FindBin;
use lib $FindBin::Bin;
use PrefixRoute;

# each prompt's backend ("b3\n"), from the blocks before
our %Where;

# remembers where prompts @_ went; the answer unchanged
sub noted {
    return [map { my $p = $_; [sub { $Where{$p} = $_[0] }] } @_];
}

# "same" when prompts @_ went where they went before, else where they went
sub same {
    return [map {
        my $p = $_;
        [sub { $_[0] eq $Where{$p} ? "same\n" : "was $Where{$p}, now $_[0]" }]
    } @_];
}

sub prompt {
    my $name = shift;
    my $text = "Conversation $name: let us talk about topic $name at length. " x 16;
    return "POST /v1/chat/completions\n"
           . "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"$text\"}]}";
}

# waits until the status page lists exactly the backends @_ (numbers) of
# upstream llm
sub listed {
    my %want = map { ("127.0.0.$_:19210" => 1) } @_;
    PrefixRoute::wait_for_status("/status", sub {
        my @have = $_[0] =~ /"(127\.0\.0\.\d+:19210)"/g;
        my %have = map { ($_ => 1) } @have;
        return join(",", sort keys %have) eq join(",", sort keys %want);
    });
}

# upstream llm, with the method given before prefix_route ("least_conn;"),
# the parameters after it ("shadow") and its other directives
# ("prefix_route_probe ...;"), and the backends b2 to b6, whose metrics
# page says that n requests wait on backend n
sub llm {
    my ($method, $params, $more) = @_;
    my $c = "upstream llm {\n"
          . "    zone llm_peers 64k;\n"
          . "    resolver 127.0.0.1:19253 valid=1s ipv6=off;\n"
          . ($method ? "    $method\n" : "")
          . "    prefix_route zone=llm:1m" . ($params ? " $params" : "") . ";\n"
          . ($more ? "    $more\n" : "")
          . "    server llm.test:19210 resolve;\n"
          . "}\n";
    for (2 .. 6) {
        $c .= "server {\n    listen 127.0.0.$_:19210;\n"
            . "    location = /metrics { return 200 \"vllm:num_requests_waiting $_\\n"
            . "vllm:num_requests_running 0\\n\"; }\n"
            . "    location = /fail { return 502; }\n"
            . "    location / { return 200 \"b$_\\n\"; }\n}\n";
    }
    return $c;
}

# the zone's server records, as the status has them
sub records {
    my ($n) = PrefixRoute::http_get("/status") =~ /"records":(\d+)/
        or die "no records in the status\n";
    return $n;
}

our $Records;

# the status code of GET $uri, 0 when nginx cannot be reached
sub get {
    return PrefixRoute::http_get(shift) =~ m{^HTTP/\S+ (\d+)} ? $1 : 0;
}

# the status shows the engine's figures read by probes for each backend
# @_, in any order
sub probed {
    my $re = join '', map { "(?=.*\"name\":\"127\\.0\\.0\\.$_:19210\"[^{}]*\"engine\":\\{\"waiting\":$_,)" } @_;
    return qr/\A$re/s;
}

dns_server(19253, "127.0.0.2", "127.0.0.3");

# the real Test::Nginx runs a skipped block's "--- init" too, with no nginx
# to wait for: none then
my $Resolves = `${\($ENV{TEST_NGINX_BINARY} // 'nginx')} -v 2>&1`
               =~ m{/(\d+)\.(\d+)\.(\d+)} && ($1 <=> 1 || $2 <=> 27 || $3 <=> 3) >= 0;

add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value("skip_nginx", "3: < 1.27.3") unless defined $block->skip_nginx;
    $block->set_value("init", "") unless $Resolves;
    $block->set_value("main_config", $LoadModule) unless defined $block->main_config;
    $block->set_value("http_config", llm()) unless defined $block->http_config;
    $block->set_value("config", ::proxy() . "location = /status { prefix_route_status; }\n"
                      . "location = /fail {\n    proxy_pass http://llm;\n"
                      . "    proxy_next_upstream error timeout http_502;\n}\n")
        unless defined $block->config;
    $block->set_value("no_error_log", $NoErrorLog) unless defined $block->no_error_log;
});

workers(2);
use_hup();
no_shuffle();
run_tests();

__DATA__

=== TEST 1: two addresses: a prompt is a MISS, then a HIT on the same backend
--- init
PrefixRoute::wait_for_old_workers();
main::listed(2, 3);
--- request eval
[main::prompt("A"), main::prompt("A"), main::prompt("B")]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: HIT [1-9]\\d* \\d+", "X-Prefix-Route: MISS 0 \\d+"]
--- response_body_filters eval
[@{main::noted("A")}, @{main::same("A")}, @{main::noted("B")}]
--- response_body_like eval
["^b[23]\$", "^same\$", "^b[23]\$"]



=== TEST 2: the name now gives one other address: the servers before take no request
--- init
PrefixRoute::dns_answer("127.0.0.4");
PrefixRoute::wait_for_old_workers();
main::listed(4);
--- request eval
[main::prompt("A"), main::prompt("B"), main::prompt("A")]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: HIT [1-9]\\d* \\d+"]
--- response_body eval
["b4\n", "b4\n", "b4\n"]



=== TEST 3: the addresses come back: each server finds its record, and B goes where it went first
A (now on b4 too, its newest record) and B (on b2 or b3 only) stay where
the index has them.
--- init
PrefixRoute::dns_answer("127.0.0.2", "127.0.0.3", "127.0.0.4");
PrefixRoute::wait_for_old_workers();
main::listed(2, 3, 4);
--- request eval
[main::prompt("B"), main::prompt("A")]
--- response_headers_like eval
["X-Prefix-Route: HIT [1-9]\\d* \\d+", "X-Prefix-Route: HIT [1-9]\\d* \\d+"]
--- response_body_filters eval
[@{main::same("B")}, [sub { $_[0] }]]
--- response_body_like eval
["^same\$", "^b[234]\$"]



=== TEST 4: shadow mode: least_conn balances the resolved servers, prefix_route watches
The balancer watched chooses; the index follows the same servers: a
prompt sent again is a HIT where it went, a SPILL anywhere else (the
index knows the server that holds it).
--- http_config eval: main::llm("least_conn;", "shadow")
--- init
PrefixRoute::wait_for_old_workers();
main::listed(2, 3, 4);
--- request eval
[main::prompt("C"), main::prompt("C")]
--- response_headers_like eval
["X-Prefix-Route: MISS 0 \\d+", "X-Prefix-Route: (HIT [1-9]\\d*|SPILL 0) \\d+"]
--- response_body_like eval
["^b[234]\$", "^b[234]\$"]



=== TEST 5: engine probes poll the servers the name gives
Each backend's metrics page says n requests wait on backend n: the status
shows each server's reading.
--- http_config eval: main::llm("", "", "prefix_route_probe interval=100ms timeout=300ms fails=2;")
--- init
PrefixRoute::wait_for_old_workers();
main::listed(2, 3, 4);
PrefixRoute::wait_for_status("/status", main::probed(2, 3, 4));
--- request eval
["GET /status", main::prompt("C")]
--- response_body_like eval
[main::probed(2, 3, 4), "^b[234]\$"]



=== TEST 6: a new address is probed, those gone no more
The name gives b4 and b5: b5's reading comes, and requests go to b4 or
b5 alone.
--- http_config eval: main::llm("", "", "prefix_route_probe interval=100ms timeout=300ms fails=2;")
--- init
PrefixRoute::dns_answer("127.0.0.4", "127.0.0.5");
PrefixRoute::wait_for_old_workers();
main::listed(4, 5);
PrefixRoute::wait_for_status("/status", main::probed(4, 5));
--- request eval
["GET /status", main::prompt("A"), main::prompt("B"), main::prompt("D")]
--- response_body_like eval
[main::probed(4, 5), ("^b[45]\$") x 3]



=== TEST 7: the one server left is used though it failed a moment before
As with round robin, a single server is never failed (max_fails): b4 and
b5 each fail a request (a 502 counted as a failure, max_fails=1,
fail_timeout=10s: the first attempt of each of two requests; the second
finds no live server, an [error] line), then the name gives b5 alone,
which takes the next prompt.
--- init
PrefixRoute::wait_for_old_workers();
main::listed(4, 5);
main::get("/fail") == 502 or die "GET /fail was answered\n" for 1, 2;
PrefixRoute::dns_answer("127.0.0.5");
main::listed(5);
--- request eval
main::prompt("E")
--- response_body
b5
--- no_error_log
[alert]
[crit]



=== TEST 8: a reload: the records of b2, b3 and b4, whose addresses the name no longer gives, are named by configurations still running
--- init
PrefixRoute::wait_for_old_workers();
main::listed(5);
--- request eval
main::prompt("E")
--- response_body
b5



=== TEST 9: the next reload, once the workers before have exited: a new address takes a record no running configuration names
Records are reused, not made: the zone's count stays (a notice says so,
logged while --- init waits for the status to list the address).
--- init
PrefixRoute::wait_for_old_workers();
main::listed(5);
$main::Records = main::records();
PrefixRoute::dns_answer("127.0.0.5", "127.0.0.6");
main::listed(5, 6);
--- request eval
["GET /status", main::prompt("F")]
--- response_body_filters eval
[[sub { my ($n) = $_[0] =~ /"records":(\d+)/; $n == $main::Records ? "as many records\n" : "records: $main::Records, then $n\n" }], [sub { $_[0] }]]
--- response_body_like eval
["^as many records\n\$", "^b[56]\$"]



=== TEST 10: the status shows the name each address came from
JSON gives it as "server"; the HTML page under the address.
--- init
PrefixRoute::wait_for_old_workers();
main::listed(5, 6);
--- request eval
["GET /status", "GET /status?format=html"]
--- response_body_like eval
[qr/"name":"127\.0\.0\.5:19210","server":"llm\.test:19210","state":"up"/,
 qr{<tr><td>127\.0\.0\.5:19210<br><small>llm\.test:19210</small></td>}]



=== TEST 11: while nginx runs, addresses the name gives no more give their records to new ones, once every worker let them go
The name's addresses change three times without a reload (pods
replaced).  The first change makes records (the workers' views still
hold the addresses before); each later one reuses those of the change
before, which both workers let go within their sweep (1 s): the zone's
count stays where it was after the first.  The blocks of a record
reused are dropped, in slices (a notice).
--- init
PrefixRoute::wait_for_old_workers();
main::listed(5, 6);
PrefixRoute::dns_answer("127.0.0.7", "127.0.0.8");
main::listed(7, 8);
select undef, undef, undef, 2.5;
$main::Records = main::records();
PrefixRoute::dns_answer("127.0.0.9", "127.0.0.10");
main::listed(9, 10);
select undef, undef, undef, 2.5;
PrefixRoute::dns_answer("127.0.0.11", "127.0.0.12");
main::listed(11, 12);
--- request
GET /status
--- response_body_filters eval
sub { my ($n) = $_[0] =~ /"records":(\d+)/; $n == $main::Records ? "as many records\n" : "records: $main::Records, then $n\n" }
--- response_body
as many records
--- error_log
were reused for new servers
