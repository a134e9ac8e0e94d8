package PrefixRoute;

# Pieces of nginx configuration and of requests shared by the t/*.t files.
# A .t file loads it with
#
#     use FindBin;
#     use lib $FindBin::Bin;
#     use PrefixRoute;                      # the configuration pieces
#     use PrefixRoute qw(:DEFAULT :prompts); # and the request builders
#
# and uses it in its add_block_preprocessor() defaults and in its
# "--- xxx eval" sections.  Test::Base runs the code of an eval section in
# another package: call the functions as ::upstream(...) and name the
# variables $::LoadModule there.
#
# Backends are numbered: backend $n answers with its name, "b$n", and
# listens on 127.0.0.1:$TEST_NGINX_RAND_PORT_$n, or on 127.0.0.1:<$FixedPort
# + $n> in a file that sets $PrefixRoute::FixedPort (on a fresh zone the
# choice among idle backends is a hash of the prompt and the server names,
# so fixed names make it the same on every run).

use strict;
use warnings;

use Exporter 'import';
use JSON::PP ();
use POSIX qw(floor);
use FindBin;

our @EXPORT = qw(
    $LoadModule $LoadEcho $NoErrorLog
    addr upstream backends routes proxy fan long_uptime
    dns_server dns_answer http_get wait_for_status
);
our @EXPORT_OK = qw(text chat chat_body sys user asst full_blocks);
our %EXPORT_TAGS = (prompts => [@EXPORT_OK]);

our $FixedPort;

# --- main_config: the module, and the echo module for slow backends and
# concurrent subrequests (TEST_NGINX_ECHO_MODULE, else Debian's)
our $LoadModule = "load_module \$TEST_NGINX_MODULE;\n";
our $LoadEcho = "load_module "
    . ($ENV{TEST_NGINX_ECHO_MODULE}
       || "/usr/lib/nginx/modules/ngx_http_echo_module.so") . ";\n";

# --- no_error_log of a block that expects a quiet error.log
our $NoErrorLog = "[error]\n[alert]\n[crit]\n";

# the address of backend $n
sub addr {
    my $n = shift;
    return "127.0.0.1:" . ($FixedPort ? $FixedPort + $n : "\$TEST_NGINX_RAND_PORT_$n");
}

# "upstream llm { prefix_route zone=llm:1m; server ...; }" over the servers
# given, each a backend number, optionally followed by server parameters:
#     upstream(1 .. 4)
#     upstream(1, 2, "3 weight=100 backup")
#     upstream("zone=llm:2m capacity=0", 3, 1, 4, 2)
# A first argument that is not a number is the parameters of prefix_route;
# the upstream is named after its zone (llm when the zone has no name).
sub upstream {
    my $args = $_[0] =~ /^\d/ ? "zone=llm:1m" : shift;
    my ($name) = $args =~ /\bzone=(\w+)/;
    my $c = "upstream " . ($name // "llm") . " {\n"
          . "    prefix_route" . ($args eq "" ? "" : " $args") . ";\n";
    for (@_) {
        my ($n, $params) = /^(\d+)\s*(.*)\z/s or die "bad server \"$_\"";
        $c .= "    server " . addr($n) . ($params eq "" ? "" : " $params") . ";\n";
    }
    return "$c}\n";
}

# the backends given by number, each a server that answers with its name:
#     backends(1 .. 4)
#     backends({ sleep => 0.5 }, 1 .. 4)    after 0.5 s (echo module)
sub backends {
    my $o = ref $_[0] eq 'HASH' ? shift : {};
    my $c = "";
    for my $n (@_) {
        my $answer = $o->{sleep} ? "location / { echo_sleep $o->{sleep}; echo b$n; }"
                                 : "return 200 \"b$n\\n\";";
        $c .= "server { listen " . addr($n) . "; $answer }\n";
    }
    return $c;
}

# the http{} part of the routes log written by proxy(routes => 1): the
# backend's name by address (backends @n), and the log format "backend
# status match length"
sub routes {
    my $c = "map \$upstream_addr \$backend {\n    default \$upstream_addr;\n";
    $c .= "    " . addr($_) . " b$_;\n" for @_;
    return $c . "}\nlog_format route '\$backend \$prefix_route_status "
                . "\$prefix_route_match \$prefix_route_length';\n";
}

# the location that proxies to upstream llm and shows the routing variables
# in the X-Prefix-Route response header; options:
#     path    the location's path (/v1/)
#     to      the upstream (llm)
#     header  the value of X-Prefix-Route (status, match and length)
#     add     more directives for the location
#     routes  log each request (subrequests too) to logs/routes.log, which
#             GET /routes returns (see routes())
sub proxy {
    my %o = @_;
    my $path = $o{path} // "/v1/";
    my $to = $o{to} // "llm";
    my $header = $o{header}
                 // '$prefix_route_status $prefix_route_match $prefix_route_length';
    my $c = "location $path {\n    proxy_pass http://$to;\n";
    $c .= "    $o{add}\n" if defined $o{add};
    $c .= "    add_header X-Prefix-Route \"$header\" always;\n";
    $c .= "    log_subrequest on;\n    access_log logs/routes.log route;\n" if $o{routes};
    $c .= "}\n";
    $c .= "location = /routes {\n    alias logs/routes.log;\n}\n" if $o{routes};
    return $c;
}

# a location $uri that sends each of @bodies as a POST subrequest to
# /v1/chat/completions, all at once (echo module)
sub fan {
    my ($uri, @bodies) = @_;
    my $c = "location = $uri {\n";
    for my $body (@bodies) {
        die "a body cannot go into a single-quoted nginx string"
            if $body =~ /['\\\$]/;
        die "nginx takes parameters of up to 4 KB" if length $body > 4000;
        $c .= "    echo_subrequest_async POST /v1/chat/completions -b '$body';\n";
    }
    return "$c}\n";
}

# --- init of a block in HUP mode: the runner counts a reload as done when
# the new workers answer; the old ones may still accept a connection for a
# moment, and a request served by them would see the previous zone.  Waits
# until the master has no workers left but the new ones (workers()).
sub wait_for_old_workers {
    open my $in, '<', $Test::Nginx::Util::PidFile or die "no pid file: $!";
    my ($master) = <$in> =~ /(\d+)/;
    close $in;
    for (1 .. 500) {
        my @workers;
        for my $stat (glob '/proc/[0-9]*/stat') {
            open my $fh, '<', $stat or next;
            my $line = <$fh> // '';
            push @workers, $1 if $line =~ /^(\d+) \(.*\) \S+ (\d+) / && $2 == $master;
        }
        return if @workers <= $Test::Nginx::Util::Workers;    # 0: no master
        select undef, undef, undef, 0.01;
    }
    die "the old nginx workers did not exit in 5 s\n";
}

# --- called before run_tests(): the nginx the file starts reads its
# monotonic clock 50 days ahead (build/uptime.so, t/uptime/uptime.c, which
# make builds), past where the index's 32-bit ms stamps wrap around
sub long_uptime {
    my $so = "$FindBin::Bin/../build/uptime.so";
    die "$so is not built: run make nginx-test\n" unless -f $so;
    $ENV{LD_PRELOAD} = join ":", grep { $_ } $ENV{LD_PRELOAD}, $so;
}

# --- a name server for "server name resolve" (nginx 1.27.3+) ----------------

my ($DnsPid, $DnsFile);

# starts t/tools/dns-server on UDP 127.0.0.1:$port: every A query is
# answered with the addresses dns_answer() gave last (TTL 1 s; @_ at
# first), any other with no address; it ends with the test file
sub dns_server {
    my $port = shift;
    $DnsFile = "/tmp/prefix-route-dns-$$";
    dns_answer(@_);
    $DnsPid = fork // die "fork: $!\n";
    if (!$DnsPid) {
        exec("$FindBin::Bin/tools/dns-server", $port, $DnsFile)
            or POSIX::_exit(1);
    }

    # it answers before nginx asks: a query for "x" until one comes back
    require IO::Socket::INET;
    my $c = IO::Socket::INET->new(Proto => 'udp', PeerAddr => "127.0.0.1:$port")
        or die "udp socket: $!\n";
    my $rin = '';
    vec($rin, fileno $c, 1) = 1;
    for (1 .. 50) {
        $c->send(pack('n6', 1, 0x0100, 1, 0, 0, 0) . "\1x\0" . pack('n2', 1, 1));
        return if select(my $rout = $rin, undef, undef, 0.1) && $c->recv(my $r, 512);
        select undef, undef, undef, 0.1;    # refused: not listening yet
    }
    die "the name server on udp 127.0.0.1:$port did not answer\n";
}

# the addresses the name server answers with from now on
sub dns_answer {
    open my $out, '>', "$DnsFile.tmp" or die "$DnsFile.tmp: $!\n";
    print $out join(' ', @_), "\n";
    close $out;
    rename "$DnsFile.tmp", $DnsFile or die "$DnsFile: $!\n";
}

# GET $uri of the nginx under test: the whole response (status line,
# headers, body), "" when it cannot be reached
sub http_get {
    my $uri = shift;
    require IO::Socket::INET;
    my $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                  PeerPort => $Test::Nginx::Util::ServerPort)
        or return "";
    print $c "GET $uri HTTP/1.0\r\nHost: localhost\r\n\r\n";
    return join '', <$c>;
}

# polls GET $uri of the nginx under test (10 s at most) until its response
# matches $re, a regexp or a sub given the response that returns true
sub wait_for_status {
    my ($uri, $re) = @_;
    my $ok = ref $re eq 'CODE' ? $re : sub { $_[0] =~ $re };
    for (1 .. 200) {
        return if $ok->(http_get($uri));
        select undef, undef, undef, 0.05;
    }
    die "GET $uri did not match $re in 10 s\n";
}

END {
    local $?;
    if ($DnsPid) {
        kill 'TERM', $DnsPid;
        waitpid $DnsPid, 0;
        unlink $DnsFile;
    }
}

# --- request builders (:prompts) ---------------------------------------------

my $JSON = JSON::PP->new->canonical(1);

# $len bytes of filler text starting with $tag: texts with different tags
# differ from their first bytes on
sub text {
    my ($tag, $len) = @_;
    my ($s, $i) = ("", 0);
    $s .= "$tag w" . $i++ . " " while length $s < $len;
    return substr $s, 0, $len;
}

# a Chat Completions body (model "m") with the messages given, and the
# request that posts it to /v1/chat/completions
sub chat_body { $JSON->encode({ model => "m", messages => $_[0] }) }
sub chat { "POST /v1/chat/completions\n" . chat_body($_[0]) }

sub sys  { { role => "system",    content => $_[0] } }
sub user { { role => "user",      content => $_[0] } }
sub asst { { role => "assistant", content => $_[0] } }

# bytes of a prompt of $len bytes held in full 64-byte blocks
sub full_blocks { floor($_[0] / 64) * 64 }

1;
