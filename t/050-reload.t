# The prefix index lives in a shared memory zone that nginx keeps across a
# reload when its name and size do not change, and servers are known by
# their address: affinity survives "nginx -s reload", also when the server
# list is reordered; a new zone size starts an empty index.
#
# HUP mode: each block reloads the running nginx (master process on) instead
# of starting a new one, so the blocks share the zone and must run in order.
# The backends listen on fixed ports, so that their names stay the same from
# one block to the next.  Where a prompt goes is whatever the choice gives;
# the blocks check where it goes relative to where it went before:
# %Where keeps each prompt's backend across blocks, and the
# response_body_filters subroutines below turn a backend's answer into
# that relation ("same", "moved"), what the block expects.
#
# Each block's http_config is its upstream llm and the backends b1..b4 on
# ports 19101..19104, written with upstream() and backends() of
# t/PrefixRoute.pm: upstream("zone=llm:2m", 3, 1, 4, 2) is prefix_route
# zone=llm:2m over backends b3, b1, b4, b2 in that order.  Every block proxies
# /v1/ to llm and shows the routing variables in X-Prefix-Route, waits for
# the old workers (see wait_for_old_workers() in t/PrefixRoute.pm), and checks that error.log
# has no [error], [alert] or [crit] line.
use Test::Nginx::Socket 'no_plan';
use FindBin;
use lib $FindBin::Bin;
use PrefixRoute;
use IO::Socket::INET;

$PrefixRoute::FixedPort = 19100;

# each prompt's backend ("b3\n"), from the blocks before
our %Where;

# the filters for prompts @_, one per request: "alone" when no other of
# them went to its backend, else the other's name; it remembers where
sub spread {
    my %seen;
    return [map {
        my $p = $_;
        [sub {
            my $b = shift;
            my $was = $seen{$b};
            $seen{$b} = $Where{$p} = $b;
            return defined $was ? "with another\n" : "alone\n";
        }]
    } @_];
}

# remembers where prompts @_ went; the answer unchanged
sub noted {
    return [map { my $p = $_; [sub { $Where{$p} = $_[0] }] } @_];
}

# "same" when prompts @_ went where they went before, else where they
# went; with a server left out ($out, "b3\n"): "moved" for a prompt that
# was there and went elsewhere
sub same {
    my $out = shift // "";
    return [map {
        my $p = $_;
        [sub {
            my $b = shift;
            return $b eq $Where{$p} ? "same\n"
                   : $Where{$p} eq $out && $b ne $out ? "moved\n"
                   : "went to $b, was on $Where{$p}";
        }]
    } @_];
}

add_block_preprocessor(sub {
    my $block = shift;

    # --- without_server_of: P: the upstream without the backend that got
    # prompt P in the blocks before; P is then a MISS, the others HITs
    if (defined(my $p = $block->without_server_of)) {
        $p =~ s/\s+//g;
        my ($out) = $Where{$p} =~ /^b(\d)/;
        my @order = qw(A B C D);
        $block->set_value(http_config =>
            ::upstream("zone=llm:2m", grep { $_ != $out } 1 .. 4)
            . ::backends(1 .. 4));
        $block->set_value(response_headers_like => [map {
            $Where{$_} eq "b$out\n" ? "X-Prefix-Route: MISS 0 \\d+"
                                     : "X-Prefix-Route: HIT [1-9]\\d* \\d+"
        } @order]);
        $block->set_value(response_body_filters => same("b$out\n", @order));
        $block->set_value(response_body => [map {
            $Where{$_} eq "b$out\n" ? "moved\n" : "same\n"
        } @order]);
    }

    # --- zone_4m_but_of: P: zone llm:4m without the backend of prompt P
    if (defined(my $p = $block->zone_4m_but_of)) {
        $p =~ s/\s+//g;
        $block->set_value(http_config =>
            ::upstream("zone=llm:4m", grep { "b$_\n" ne $Where{$p} } 1 .. 4)
            . ::backends(1 .. 4));
    }

    # --- workers: N: worker_processes N for this block (1 when not given)
    my $n = $block->workers // 1;
    $n =~ s/\s+//g;
    workers($n);

    $block->set_value(main_config => $LoadModule) unless defined $block->main_config;
    $block->set_value(init => "PrefixRoute::wait_for_old_workers();") unless defined $block->init;
    $block->set_value(config => proxy()) unless defined $block->config;
    $block->set_value(no_error_log => $NoErrorLog) unless defined $block->no_error_log;
    return $block;
});

# four distinct prompts of about 1 KB
sub chat {
    my $name = shift;
    my $text = "Conversation $name: let us talk about topic $name at length. " x 16;
    return "POST /v1/chat/completions\n"
           . "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"$text\"}]}";
}

# a new conversation $name behind a system prompt every one shares
sub behind {
    my $name = shift;
    my $system = "You are the support assistant of a shared fleet. " x 8;
    return "POST /v1/chat/completions\n"
           . "{\"model\":\"m\",\"messages\":[{\"role\":\"system\","
           . "\"content\":\"$system\"},{\"role\":\"user\","
           . "\"content\":\"Question $name, asked once.\"}]}";
}

# a server that accepts connections (the kernel's backlog) and never
# answers, for as long as the test runs
our $Hang;

sub hang {
    $Hang = IO::Socket::INET->new(Listen => 8, ReuseAddr => 1,
                                  LocalAddr => PrefixRoute::addr(5))
        or die "cannot listen on " . PrefixRoute::addr(5) . ": $!\n";
}

# a reload that fails after the zones' init: the running configuration
# with a new server 5 in upstream llm and a listen address the kernel
# refuses; HUP, and wait for nginx to say so.  The file is put back.
sub failed_reload {
    my ($conf, $pid) = ($Test::Nginx::Util::ConfFile,
                        $Test::Nginx::Util::PidFile);
    open my $in, '<', $conf or die "$conf: $!";
    my $was = do { local $/; <$in> };
    close $in;
    my $new = $was;
    my $five = PrefixRoute::addr(5);
    my $port = $PrefixRoute::FixedPort + 99;
    $new =~ s/(    prefix_route [^\n]*\n)/$1    server $five;\n/
        or die "no prefix_route line in $conf";
    $new =~ s/(upstream llm \{)/server { listen 10.255.255.1:$port; }\n$1/;
    open my $out, '>', $conf or die "$conf: $!";
    print $out $new;
    close $out;
    open $in, '<', $pid or die "$pid: $!";
    my ($master) = <$in> =~ /(\d+)/;
    close $in;
    kill 'HUP', $master or die "HUP: $!";
    my $log = $Test::Nginx::Util::ErrLogFile;
    for (1 .. 500) {
        open my $fh, '<', $log or die "$log: $!";
        my $text = do { local $/; <$fh> };
        close $fh;
        last if $text =~ /bind\(\) to 10\.255\.255\.1:$port failed/;
        die "the reload did not fail in 5 s\n" if $_ == 500;
        select undef, undef, undef, 0.01;
    }
    open $out, '>', $conf or die "$conf: $!";
    print $out $was;
    close $out;
}

use_hup();
no_shuffle();
run_tests();

__DATA__

=== TEST 1: a fresh zone: four distinct prompts A, B, C, D are MISSes spread over the four backends
--- http_config eval: ::upstream("zone=llm:1m", 1 .. 4) . ::backends(1 .. 4)
--- request eval
[map { main::chat($_) } qw(A B C D)]
--- response_headers_like eval
[("X-Prefix-Route: MISS 0 \\d+") x 4]
--- response_body_filters eval
main::spread(qw(A B C D))
--- response_body eval
[("alone\n") x 4]



=== TEST 2: after a reload with the same zone, D, C, B, A are HITs on the same backends as before
--- http_config eval: ::upstream("zone=llm:1m", 1 .. 4) . ::backends(1 .. 4)
--- request eval
[map { main::chat($_) } qw(D C B A)]
--- response_headers_like eval
[("X-Prefix-Route: HIT [1-9]\\d* \\d+") x 4]
--- response_body_filters eval
main::same(undef, qw(D C B A))
--- response_body eval
[("same\n") x 4]



=== TEST 3: a new zone size starts an empty index: D, C, B, A are MISSes
The same requests as the previous test on an empty index are MISSes, which
shows that the previous test's HITs came from the index kept across the
reload; where they go now is noted for the next tests.
--- http_config eval: ::upstream("zone=llm:2m", 1 .. 4) . ::backends(1 .. 4)
--- request eval
[map { main::chat($_) } qw(D C B A)]
--- response_headers_like eval
[("X-Prefix-Route: MISS 0 \\d+") x 4]
--- response_body_filters eval
main::noted(qw(D C B A))
--- response_body_like eval
[("^b[1-4]\n\\z") x 4]



=== TEST 4: after a reload with the server list reordered, the prompts are HITs on the same backends
Servers are known by their address, not their position: A, B, C, D go
where the previous test sent them.
--- http_config eval: ::upstream("zone=llm:2m", 3, 1, 4, 2) . ::backends(1 .. 4)
--- request eval
[map { main::chat($_) } qw(A B C D)]
--- response_headers_like eval
[("X-Prefix-Route: HIT [1-9]\\d* \\d+") x 4]
--- response_body_filters eval
main::same(undef, qw(A B C D))
--- response_body eval
[("same\n") x 4]



=== TEST 5: after a reload without one server, its prompts are MISSes elsewhere and the others stay HITs
The upstream leaves out the backend D went to: D (and any prompt that
went there too) is a MISS on another backend; the others stay HITs where
they were (the block's checks are written by the preprocessor, from
where the prompts went).
--- without_server_of: D
--- request eval
[map { main::chat($_) } qw(A B C D)]



=== TEST 6: a probe under way when the workers are told to stop
Another upstream's probes ask server 5 for its page, with a 30 s
timeout: the test listens there and never answers.  The prompts are
HITs where they were.
--- init
PrefixRoute::wait_for_old_workers();
main::hang();
--- main_config eval: $::LoadModule . $::LoadEcho
--- http_config eval
::upstream("zone=llm:2m", 1 .. 4) . ::backends(1 .. 4)
. "upstream hang {\n    prefix_route zone=hang:1m;\n"
. "    prefix_route_probe interval=100ms timeout=30s;\n    server " . ::addr(5) . ";\n}\n"
--- config eval
::proxy() . "location = /sleep {\n    echo_sleep 0.3;\n    echo ok;\n}\n"
--- request eval
["GET /sleep", map { main::chat($_) } qw(A B C D)]
--- response_body_filters eval
[[], @{main::same(undef, qw(A B C D))}]
--- response_body eval
["ok\n", ("same\n") x 4]



=== TEST 7: then a reload: the old workers exit at once, closing the probe, and the index is kept
The old workers' probe would hold them for 30 s: wait_for_old_workers()
gives them 5.  The prompts are HITs where they were.
--- main_config eval: $::LoadModule . $::LoadEcho
--- http_config eval
::upstream("zone=llm:2m", 1 .. 4) . ::backends(1 .. 4)
--- request eval
[map { main::chat($_) } qw(A B C D)]
--- response_headers_like eval
[("X-Prefix-Route: HIT [1-9]\\d* \\d+") x 4]
--- response_body_filters eval
main::same(undef, qw(A B C D))
--- response_body eval
[("same\n") x 4]



=== TEST 8: with no capacity (a new zone size), eight prompts fill both servers above 10 blocks
--- http_config eval: ::upstream("zone=llm:1m capacity=0", 1, 2) . ::backends(1, 2)
--- config eval: ::proxy() . "location = /status {\n    prefix_route_status;\n}\n"
--- request eval
[(map { main::chat($_) } qw(E F G H I J K L)), "GET /status"]
--- response_body_like eval
[("b[12]\n") x 8,
 qr/"forgotten":0,.*"blocks":(?:1[1-9]|[2-9]\d|\d{3,}),"dropping":0,.*"blocks":(?:1[1-9]|[2-9]\d|\d{3,}),"dropping":0,/s]



=== TEST 9: a reload that lowers capacity to 10 blocks: each server's excess goes with no request sent
Until 2026-12-05 a server kept its excess until its next record.
--- main_config eval: $::LoadModule . $::LoadEcho
--- http_config eval: ::upstream("zone=llm:1m capacity=640", 1, 2) . ::backends(1, 2)
--- config eval
::proxy() . "location = /status {\n    prefix_route_status;\n}\n"
. "location = /sleep {\n    echo_sleep 0.3;\n    echo ok;\n}\n"
--- request eval
["GET /sleep", "GET /status"]
--- response_body_like eval
["ok\n",
 qr/"forgotten":[1-9]\d+,.*"blocks":(?:\d|10),"dropping":0,.*"blocks":(?:\d|10),"dropping":0,/s]



=== TEST 10: a new zone: with b1 alone in the upstream, a conversation behind a shared system prompt
--- http_config eval: ::upstream("zone=llm:3m", 1) . ::backends(1 .. 3)
--- request eval: main::behind("X1")
--- response_headers_like: X-Prefix-Route: MISS 0 \d+
--- response_body
b1



=== TEST 11: then with b2 alone, another one: two servers hold the system prompt
--- http_config eval: ::upstream("zone=llm:3m", 2) . ::backends(1 .. 3)
--- request eval: main::behind("X2")
--- response_body
b2



=== TEST 12: a reload adds b3, whose cache is empty: it takes some of the new conversations behind the system prompt
Until 2026-12-07 every server that held the system prompt looked faster
by its prefill, and b3 took none of them while no queue formed.
--- http_config eval: ::upstream("zone=llm:3m", 1, 2, 3) . ::backends(1 .. 3)
--- config eval: ::proxy() . "location = /status {\n    prefix_route_status;\n}\n"
--- request eval
[(map { main::behind("N$_") } 1 .. 12), "GET /status"]
--- response_body_like eval
[("^b[123]\n\\z") x 12,
 qr/\{"name":"127\.0\.0\.1:19103",[^}]*"requests":[1-9]/]



=== TEST 13: a new zone: four distinct prompts go to the four backends
--- http_config eval: ::upstream("zone=llm:4m", 1 .. 4) . ::backends(1 .. 4)
--- request eval
[map { main::chat($_) } qw(A B C D)]
--- response_headers_like eval
[("X-Prefix-Route: MISS 0 \\d+") x 4]
--- response_body_filters eval
main::noted(qw(A B C D))
--- response_body_like eval
[("^b[1-4]\n\\z") x 4]



=== TEST 14: a reload without D's backend
--- zone_4m_but_of: D
--- request eval
[main::chat("A")]
--- response_body_like: ^b[1-4]\n\z



=== TEST 15: a reload that fails after the zones' init (a listen address that cannot be bound), its new server given no record
A record given to the new server would drop the blocks of D's backend,
which no running configuration names.
--- zone_4m_but_of: D
--- init
main::failed_reload();
PrefixRoute::wait_for_old_workers();
--- request eval
[main::chat("A")]
--- response_body_like: ^b[1-4]\n\z
--- no_error_log
were reused for new servers
[alert]
[crit]



=== TEST 16: D's backend back: D is a HIT there, its blocks kept through the failed reload
--- http_config eval: ::upstream("zone=llm:4m", 1 .. 4) . ::backends(1 .. 4)
--- request eval
[main::chat("D")]
--- response_headers_like: X-Prefix-Route: HIT [1-9]\d* \d+
--- response_body_filters eval
main::same(undef, "D")
--- response_body
same



=== TEST 17: worker_processes raised to 2 on the kept zone, made for 1: the notice says so, and D is still a HIT on its server
--- workers: 2
--- http_config eval: ::upstream("zone=llm:4m", 1 .. 4) . ::backends(1 .. 4)
--- request eval
[main::chat("D")]
--- response_headers_like: X-Prefix-Route: HIT [1-9]\d* \d+
--- response_body_filters eval
main::same(undef, "D")
--- response_body
same
--- error_log
prefix_route zone "llm" was made for worker_processes 1, 2 now



=== TEST 18: a reload that keeps worker_processes 2 does not repeat the notice (helper-77 saw it at every reload)
--- workers: 2
--- http_config eval: ::upstream("zone=llm:4m", 1 .. 4) . ::backends(1 .. 4)
--- request eval
[main::chat("D")]
--- response_headers_like: X-Prefix-Route: HIT [1-9]\d* \d+
--- no_error_log
was made for worker_processes
[error]
[alert]
[crit]
