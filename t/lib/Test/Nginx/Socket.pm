package Test::Nginx::Socket;

=head1 NAME

Test::Nginx::Socket - a small work-alike of the CPAN module of that name

=head1 SYNOPSIS

    use Test::Nginx::Socket 'no_plan';   # or: plan tests => repeat_each() * N;

    repeat_each(2);
    no_shuffle();
    run_tests();

    __DATA__

    === TEST 1: sanity
    --- main_config
        load_module $TEST_NGINX_MODULE;
    --- config
        location = /t { return 200 "ok\n"; }
    --- request
    GET /t
    --- response_body
    ok
    --- no_error_log
    [error]

=head1 DESCRIPTION

This implements a documented subset of Test::Nginx::Socket (openresty's
test-nginx, L<https://github.com/openresty/test-nginx>), written from its
documentation and behaviour, so that .t files written for the real module run
unchanged with C<prove -I t/lib t/>. It is built on Test::Base like the real
one (blocks, filters such as C<eval> and C<chomp>, C<--- ONLY>, C<--- SKIP>
and C<--- LAST> come from Test::Base). Server management is in
L<Test::Nginx::Util>.

=head2 Functions

The functions and sections this project's suite uses, and no more:

=head2 Functions

run_tests, plan, blocks, repeat_each, no_shuffle, log_level, master_on,
workers, worker_connections, add_block_preprocessor, no_root_location,
use_hup, server_port, server_root, html_dir, timeout, bail_out.

=head2 Sections

main_config, http_config, config, log_level, user_files, init, request
(string, or eval: a string or an array of requests, each a string or an
array of packets: strings, or C<{ value =E<gt> ..., delay_before =E<gt>
seconds }>), more_headers (string,
or eval array, one per request), timeout, error_code, response_headers
(C<Name: value>, C<!Name> for absent), response_headers_like,
response_body, response_body_like, response_body_unlike,
response_body_filters (eval: subroutine references, one list per request
or one for all), error_log, no_error_log, access_log, no_access_log,
must_die, skip_nginx (one condition); plus ONLY, SKIP and
LAST from Test::Base. Like the real one, a block without --- config takes
the previous block's nginx, and the first block with none bails out.

C<$TEST_NGINX_XXX> environment variables (and C<$TEST_NGINX_RAND_PORT_N>) are
expanded in the config, request, more_headers and user_files sections; an
undefined one aborts the run, as in the real one.

=head2 Environment

TEST_NGINX_BINARY (default C<nginx> in the PATH), TEST_NGINX_SERVER_PORT or
TEST_NGINX_PORT (default 1984), TEST_NGINX_SERVROOT (default t/servroot),
TEST_NGINX_LOG_LEVEL (default debug), TEST_NGINX_USE_HUP, TEST_NGINX_NO_CLEAN,
TEST_NGINX_NO_SHUFFLE, TEST_NGINX_TIMEOUT (default 3), TEST_NGINX_SLEEP,
TEST_NGINX_MASTER_PROCESS, TEST_NGINX_USE_VALGRIND, TEST_NGINX_VALGRIND_LOG_DIR,
TEST_NGINX_VALGRIND_SLOWDOWN.

=head2 Valgrind mode

With TEST_NGINX_USE_VALGRIND set, nginx runs under valgrind, as in the real
module: C<daemon off> in the generated nginx.conf, C<master_process> as the
.t file sets it (off by default, on in HUP mode), nginx in the foreground
as a child of the runner (in its own process group), up once its pid file
is written; a C<--- must_die> block runs without valgrind. A number (1)
selects C<valgrind --tool=memcheck --leak-check=full
--show-possibly-lost=no> with C<--num-callers=100 --gen-suppressions=all>
and C<--suppressions=valgrind.suppress> (or C<t/valgrind.suppress>) when
that file exists, like the real one, plus C<--errors-for-leak-kinds=definite>;
any other value is the valgrind options to use instead. The runner adds
C<--error-exitcode=99> and C<--log-file>: one log a process (master and
workers) in TEST_NGINX_VALGRIND_LOG_DIR (default C<servroot/valgrind>), named
C<< <.t file>-<n>.<pid>.log >> for the n-th nginx the file starts.

Unlike the real one, which only prints valgrind's reports, each nginx
instance gets one more test once it has stopped (when a block restarts it,
and at the end): "valgrind: no error in nginx serving ...", which fails,
with the reports as diagnostics, when a log reports an error (an invalid
read or write, a use of uninitialised memory, a definite leak: what the
suppressions do not cover) or has no summary (a process that was killed).
Stopping nginx waits up to 30 seconds, for valgrind's leak check, and the
client waits TEST_NGINX_VALGRIND_SLOWDOWN (10) times longer for a response
(TEST_NGINX_TIMEOUT or --- timeout).

=head2 Known differences from the real module

=over

=item * Not supported: pipelined_requests, curl, http2/http3, stap, tcp_*/udp_*
servers, grep_error_log, shutdown_error_log, skip_nginx2/skip_eval/todo and the
check-leak and benchmark modes. The valgrind mode differs: see above.

=item * A block whose nginx fails to start (or fails a HUP reload) gets one
failing test with nginx's stderr and the tail of error.log and its other
checks are skipped; the real one retries for 30s and then bails out.

=item * For --- must_die, --- error_log patterns are matched against nginx's
stderr as well as error.log (Debian's nginx reports configuration errors on
stderr only).

=item * The temp paths (client_body_temp_path etc.) are set inside http {} to
directories of the server root, so they cannot also be set in --- http_config.

=item * A --- no_error_log pattern that matches gives one failure (the real one
gives one per matching line); a multi-line C<--- error_code> value is trimmed.

=item * Test names do not start with the name of the .t file.

=item * A block without --- config reuses the running nginx (as the real one
does) but only checks the part of error.log written during the block.

=item * HUP mode: the reload counts as done when GET /ver (Host: Test-Nginx)
returns the new config version 5 times in a row (the real one uses curl and 20
times); an [emerg] in the new error.log fails the block at once.

=back

=cut

# NOTE: "use Test::Base -Base" source-filters this file: every named sub
# without a prototype would get "my $self = shift;" inserted, so all subs
# below have prototypes (as in the real module).
use Test::Base -Base;

our $VERSION = '0.29_subset';

use List::Util qw(shuffle);
use Time::HiRes qw(sleep);
use Test::Nginx::Util;

our @EXPORT = qw(
    run_tests plan blocks repeat_each no_shuffle log_level master_on workers
    worker_connections add_block_preprocessor no_root_location use_hup
    server_port server_root html_dir timeout bail_out
);

my $Started;            # nginx was started by this process
my @Served;             # valgrind mode: the blocks the running nginx served
my $ErrLogPos = 0;      # error.log bytes already checked
my $StartOut = '';      # what nginx printed as it started, not checked yet

sub fmt_str ($) {
    my $s = shift;
    chomp $s;
    $s =~ s/"/\\"/g;
    $s =~ s/\r/\\r/g;
    $s =~ s/\n/\\n/g;
    return $s;
}

# is() that also accepts a qr// as the expected value; Test::Base's is()
# prints a diff when a multi-line value differs
sub is_str ($$$) {
    my ($got, $expected, $desc) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    return like($got, $expected, $desc) if ref $expected eq 'Regexp';
    return is($got, $expected, $desc);
}

# the value for the $idx-th request: sections must be arrays when a block
# sends several requests
sub indexed ($$$$) {
    my ($name, $value, $idx, $need_array) = @_;
    return $value->[$idx] if ref $value eq 'ARRAY';
    bail_out("$name - You asked for many requests, the expected results "
             . "should be arrays as well.") if $need_array;
    return $value;
}

# -- requests -------------------------------------------------------------------

sub parse_more_headers ($) {
    my $text = shift // '';
    my ($out, $chunked) = ('', 0);
    for my $line (split /\n+/, $text) {
        next if $line =~ /^\s*(?:#|$)/;
        my ($key, $val) = split /:\s*/, $line, 2;
        $val //= '';
        $val =~ s/\r$//;
        $chunked = 1 if lc $key eq 'transfer-encoding' && $val eq 'chunked';
        $out .= "$key: $val\r\n";
    }
    return ($out, $chunked);
}

# "METHOD [URI [HTTP/x.y]]\nbody" (or a list of packets of it) -> the packets
# of a full HTTP request, plus whether it is a HEAD request
sub build_request ($$$) {
    my ($name, $more_headers, $req) = @_;
    my @packets = map { ref $_ eq 'HASH' ? {%$_} : { value => $_ } }
                  (ref $req eq 'ARRAY' ? @$req : $req);
    my $whole = join '', map { $_->{value} // '' } @packets;

    my $lead = $whole =~ s/\A\s+// ? length $& : 0;
    my ($first, $content) = $whole =~ /\A([^\n]*)(?:\n(.*))?\z/s;
    $content //= '';
    my $orig_head_len = $lead + length($whole) - length($content);
    $first =~ /^\s*(\S+)(?:\s+(\S+))?(?:\s+(\S+))?\s*$/
        or bail_out("$name - Request line is not valid. Should be "
                    . "'meth [url [version]]' but got \"$first\".");
    my ($meth, $url, $ver) = ($1, $2 // '/', $3 // 'HTTP/1.1');

    my ($headers, $chunked) = parse_more_headers($more_headers);
    my $content_trim = 0;
    my $len_header = '';
    if (!$chunked && $content ne ''
        && $headers !~ /(?:^|\n)Content-Length:/i)
    {
        $content_trim = $content =~ s/\A\s+// ? length $& : 0;
        $content =~ s/\s+\z//;
        $len_header = 'Content-Length: ' . length($content) . "\r\n";
    }
    my $head = "$meth $url $ver\r\n";
    $head .= "Host: $ServerName\r\n" if $headers !~ /(?:^|\n)Host:/i;
    $head .= "Connection: close\r\n" if $headers !~ /(?:^|\n)Connection/i;
    $head .= "$headers$len_header\r\n";
    my $final = $head . $content;

    # keep the packet boundaries that fall in the body
    my ($pos, $orig) = (0, 0);
    for my $p (@packets[0 .. $#packets - 1]) {
        $orig += length($p->{value} // '');
        my $b = length($head) + $orig - $orig_head_len - $content_trim;
        $b = length $head if $b < length $head;
        $b = length $final if $b > length $final;
        $p->{value} = substr $final, $pos, $b - $pos;
        $pos = $b;
    }
    $packets[-1]{value} = substr $final, $pos;
    return [\@packets, $meth eq 'HEAD'];
}

# all requests of a block: [[packets, is_head], ...]
sub build_requests ($) {
    my $block = shift;
    my $name = $block->name;

    my $request = $block->request;
    bail_out("$name - no --- request section") unless defined $request;
    $request = expand_env($request, $name);
    my $more = expand_env($block->more_headers // '', $name);

    my @reqs;
    my @list = ref $request eq 'ARRAY' ? @$request : ($request);
    for my $i (0 .. $#list) {
        my $req = $list[$i];
        # drop leading blank lines and "# comment" lines
        1 while !ref $req && $req =~ s/^\s*#[^\n]*\n|^\s+//;
        my $hdr = ref $more eq 'ARRAY' ? $more->[$i] : $more;
        bail_out("$name - --- more_headers lacks data for request $i")
            unless defined $hdr;
        push @reqs, build_request($name, $hdr, $req);
    }
    return \@reqs;
}

sub send_request ($$$) {
    my ($block, $packets, $timeout) = @_;
    my $name = $block->name;
    my ($resp, $err) = send_raw($packets, $timeout, 3);
    if (defined $err && $err =~ /^connect/) {
        fail("$name - Can't connect to $ServerAddr:$ServerPort: $err");
        diag("tail of $ErrLogFile:\n" . log_tail($ErrLogFile, 20));
    } elsif (defined $err) {
        fail("ERROR: client socket timed out - $name");
    }
    return $resp;
}

# -- responses ------------------------------------------------------------------

sub header_value ($$) {
    my ($res, $key) = @_;
    my $vals = $res ? $res->{headers}{lc $key} : undef;
    return $vals ? join(', ', @$vals) : undef;
}

sub parse_response ($$$) {
    my ($name, $raw, $head_req) = @_;
    return undef if !defined $raw || $raw eq '';

    my ($head, $body) = split /\r?\n\r?\n/, $raw, 2;
    my @lines = split /\r?\n/, $head;
    my $status = shift @lines // '';
    my %headers;
    for (@lines) {
        push @{ $headers{lc $1} }, $2 if /^([^:\s]+)\s*:\s*(.*?)\s*$/;
    }
    my $code = $status =~ m{^HTTP/[\d.]+\s+(\d+)} ? $1 : undef;
    my $raw_headers = $raw =~ /\A(.*?\r\n)\r\n/s ? $1 : '';
    my $res = { code => $code, headers => \%headers,
                raw_headers => $raw_headers, body => $body // '' };
    $code //= 0;
    return $res if $head_req || $code == 304 || $code == 101;

    my $te = header_value($res, 'Transfer-Encoding');
    my $len = header_value($res, 'Content-Length');
    if (defined $te && lc $te eq 'chunked') {
        my ($rest, $decoded) = ($res->{body}, '');
        while (1) {
            if ($rest !~ s/\A[ \t]*([0-9a-fA-F]+)[^\r\n]*\r\n//) {
                fail("$name - invalid chunked body received (no last chunk "
                     . "found): " . fmt_str(substr $rest, 0, 60));
                return undef;
            }
            my $size = hex $1;
            last if $size == 0;
            if (length($rest) < $size + 2 || substr($rest, $size, 2) ne "\r\n") {
                fail("$name - invalid chunked data received (truncated chunk)");
                return undef;
            }
            $decoded .= substr $rest, 0, $size;
            substr($rest, 0, $size + 2) = '';
        }
        $res->{body} = $decoded;
    } elsif (defined $len && $len =~ /^\d+$/) {
        if (length $res->{body} < $len) {
            warn "WARNING: $name - response body truncated: $len expected, "
                 . "but got " . length($res->{body}) . "\n";
        } elsif (length $res->{body} > $len) {
            substr($res->{body}, $len) = '';
        }
    }
    return $res;
}

sub check_error_code ($$$$) {
    my ($block, $res, $idx, $need_array) = @_;
    my $name = $block->name;
    my $code = ($res && $res->{code}) || '';
    if (defined $block->error_code) {
        my $want = indexed($name, $block->error_code, $idx, $need_array);
        $want =~ s/^\s+|\s+$//g if defined $want;
        is($code, $want, "$name - status code ok");
    } else {
        is($code, 200, "$name - status code ok");
    }
}

# "Name: value" per line; "!Name" means the header must be absent
sub parse_header_spec ($) {
    my @spec;
    for my $line (split /\n/, shift // '') {
        $line =~ s/^\s+|\s+$//g;
        next if $line eq '';
        if ($line =~ s/^!\s*//) {
            push @spec, [$line, undef];
        } else {
            my ($key, $val) = split /\s*:\s*/, $line, 2;
            push @spec, [$key, $val // ''];
        }
    }
    return @spec;
}

sub check_response_headers ($$$$) {
    my ($block, $res, $idx, $need_array) = @_;
    my $name = $block->name;
    my $raw = $res ? $res->{raw_headers} : '';

    if (defined $block->response_headers) {
        for (parse_header_spec(indexed($name, $block->response_headers, $idx,
                                       $need_array)))
        {
            my ($key, $val) = @$_;
            if (!defined $val) {
                unlike($raw, qr/^\s*\Q$key\E\s*:/msi,
                       "$name - header $key not present in the raw headers");
                next;
            }
            $val =~ s/\$ServerPort\b/$ServerPort/g;
            is(header_value($res, $key) // '', $val, "$name - header $key ok");
        }
    } elsif (defined $block->response_headers_like) {
        for (parse_header_spec(indexed($name, $block->response_headers_like,
                                       $idx, $need_array)))
        {
            my ($key, $val) = @$_;
            like(header_value($res, $key) // '', qr/^$val$/,
                 "$name - header $key like ok");
        }
    }
}

sub check_response_body ($$$$$) {
    my ($block, $res, $idx, $rep, $need_array) = @_;
    my $name = $block->name;
    my $content = $res ? $res->{body} : undef;

    # as the real one: a subroutine, a list of them, or a list of lists,
    # one per request; each gets the body and returns what is checked
    my $filters = $block->response_body_filters;
    if (defined $filters && defined $content) {
        my $f = $filters;
        if (ref $f eq 'ARRAY' && ref $f->[0] eq 'ARRAY') {
            $f = $f->[$idx];
            bail_out("$name - the ---response_body_filters two-dimensional "
                     . "array unmatch the specified request($idx)")
                unless defined $f;
        }
        for my $sub (ref $f eq 'ARRAY' ? @$f : ($f)) {
            bail_out("$name - --- response_body_filters: only subroutine "
                     . "references are supported here")
                unless ref $sub eq 'CODE';
            $content = $sub->($content);
        }
    }

    if (defined $block->response_body) {
        my $want = indexed($name, $block->response_body, $idx, $need_array);
        $want =~ s/\$ServerPort\b/$ServerPort/g if defined $want && !ref $want;
        if (ref $want) {
            like($content, $want,
                 "$name - response_body - like (repeated req $rep, req $idx)");
        } else {
            is_str($content, $want, "$name - response_body - response is "
                                    . "expected (repeated req $rep, req $idx)");
        }
    } elsif (defined $block->response_body_like
             || defined $block->response_body_unlike)
    {
        my $type = defined $block->response_body_like ? 'like' : 'unlike';
        my $sect = "response_body_$type";
        my $pat = indexed($name, $block->$sect, $idx, $need_array);
        $pat =~ s/\$ServerPort\b/$ServerPort/g unless ref $pat;
        my $summary = $content // '';
        $summary =~ s/^\s+|\s+$//g;
        $summary =~ s/\s+/ /g;
        my $desc = "$name - $sect - response is expected ($summary)";
        if ($type eq 'like') { like($content, qr/$pat/s, $desc) }
        else                 { unlike($content, qr/$pat/s, $desc) }
    }
}

# -- logs -------------------------------------------------------------------------

# the lines of error.log not checked yet, after those nginx printed as it
# started (Debian's nginx prints the warnings of its configuration on
# stderr before it opens error.log)
sub error_log_lines () {
    sleep $Sleep * 3;     # let nginx log the end of the request
    my @lines = split /^/m, $StartOut;
    $StartOut = '';
    open my $in, '<', $ErrLogFile or return \@lines;
    seek $in, $ErrLogPos, 0 if $ErrLogPos > 0;
    push @lines, <$in>;
    $ErrLogPos = tell $in;
    close $in;
    return \@lines;
}

sub log_patterns ($) {
    my $pats = shift;
    return () unless defined $pats;
    return ($pats) if ref $pats eq 'Regexp';
    return grep { defined } @$pats if ref $pats eq 'ARRAY';
    chomp $pats;
    return grep { $_ ne '' } split /\n+/, $pats;
}

sub check_log ($$$$$$) {
    my ($name, $pats, $lines, $file, $rep, $negative) = @_;
    for my $pat (log_patterns($pats)) {
        my @hits = grep { my $l = $lines->[$_];
                          ref $pat ? $l =~ $pat : index($l, $pat) >= 0 }
                   0 .. $#$lines;
        if (!$negative) {
            ok(scalar @hits, @hits
               ? "$name - pattern \"$pat\" matches a line in $file (req $rep)"
               : "$name - pattern \"$pat\" should match a line in $file (req $rep)");
        } elsif (@hits) {
            fail("$name - pattern \"" . fmt_str($pat) . "\" should not match "
                 . "any line in $file but matches line \""
                 . fmt_str($lines->[$hits[0]]) . "\" (req $rep)");
            my $last = $hits[0] + 10 > $#$lines ? $#$lines : $hits[0] + 10;
            diag(join '', @$lines[$hits[0] .. $last]);
        } else {
            pass("$name - pattern \"" . fmt_str($pat) . "\" does not match "
                 . "a line in $file (req $rep)");
        }
    }
}

# --- error_log / --- no_error_log / --- access_log / --- no_access_log;
# $extra: more lines to search (what nginx printed for --- must_die)
sub check_logs ($$$) {
    my ($block, $rep, $extra) = @_;
    my $name = $block->name;
    my @lines = (@{ error_log_lines() }, @{ $extra || [] });

    check_log($name, $block->error_log, \@lines, 'error.log', $rep, 0);
    check_log($name, $block->no_error_log, \@lines, 'error.log', $rep, 1);

    if (defined $block->access_log || defined $block->no_access_log) {
        my @acc = split /^/m, slurp($AccLogFile);
        check_log($name, $block->access_log, \@acc, 'access.log', $rep, 0);
        check_log($name, $block->no_access_log, \@acc, 'access.log', $rep, 1);
    }

    # like the real one, warn about serious messages nobody asked about
    return if defined $block->must_die;
    my $asked = join "\n", map { "$_" } log_patterns($block->error_log),
                                        log_patterns($block->no_error_log);
    for my $level (qw(alert crit emerg)) {
        next if index($asked, "[$level") >= 0;
        warn "WARNING: $name - ", fmt_str($_), "\n"
            for grep { /\[$level\]/ } @lines;
    }
}

# -- one block ------------------------------------------------------------------

sub describe_failure ($$) {
    my ($status, $stderr) = @_;
    my $msg = "\"$NginxBinary -p $ServRoot/ -c conf/nginx.conf\" "
            . ($status == -1 ? "could not be run"
               : $status & 127 ? "was killed by signal " . ($status & 127)
               : "exited with status " . ($status >> 8)) . "\n";
    $msg .= "--- stderr:\n$stderr" if $stderr ne '';
    my $tail = log_tail($ErrLogFile, 20);
    $msg .= "--- tail of $ErrLogFile:\n$tail" if $tail ne '';
    return $msg;
}

# returns undef on success, else a description of the failure
sub start_nginx () {
    my $waited = 0;
    while (1) {
        my ($status, $stderr) = run_nginx(1);     # under valgrind if asked
        $Started = 1;
        if ($status == 0) {
            $StartOut = $stderr;
            wait_for_pid_file();
            return undef;
        }
        # the previous nginx may still hold the port for a moment
        if ($stderr =~ /Address already in use/ && $waited < 5) {
            sleep 0.1;
            $waited += 0.1;
            next;
        }
        return describe_failure($status, $stderr);
    }
}

sub test_must_die ($$) {
    my ($block, $must_die) = @_;
    my $name = $block->name;
    $ErrLogPos = 0;
    for my $rep (0 .. $RepeatEach - 1) {
        my ($status, $stderr) = run_nginx();
        $Started = 1;
        if ($status == -1) {
            fail("$name - failed to execute the nginx command line");
        } elsif ($status & 128) {
            fail("$name - nginx core dumped");
        } elsif ($must_die =~ /^\s*(\d+)\s*$/) {
            is($status >> 8, $1, "$name - die with the expected exit code");
        } else {
            isnt($status, 0, "$name - die as expected");
        }
        check_logs($block, $rep, [split /^/m, $stderr]);
        if ($status == 0) {
            warn "WARNING: $name - nginx must die but it does not; "
                 . "killing it (req $rep)\n";
            wait_for_pid_file();
            stop_nginx($name);
        }
    }
}

# valgrind mode: once the nginx that served @Served has stopped, one test
# that its valgrind logs (master and workers) report no error: no invalid
# read or write, no use of uninitialised memory, no definite leak (what
# t/valgrind.suppress does not suppress); the real one only prints them.
sub check_valgrind () {
    return unless $UseValgrind && @Served;
    my @blocks = @Served;
    @Served = ();
    my $desc = "valgrind: no error in nginx serving \"$blocks[0]\"";
    $desc .= " and " . (@blocks - 1) . " more block(s)" if @blocks > 1;
    my @logs = valgrind_logs();
    my @bad;
    for my $log (@logs) {
        my $text = slurp($log);
        my @sum = $text =~ /ERROR SUMMARY: (\d+) errors/g;
        if (!@sum) {
            push @bad, "$log: no ERROR SUMMARY (the process was killed?)\n";
        } elsif ($sum[-1] > 0) {
            # the reports, without the suppression templates
            $text =~ s/^\{\n.*?^\}\n//msg;
            my @lines = split /^/m, $text;
            splice @lines, 200 if @lines > 200;
            push @bad, "$log: $sum[-1] error(s)\n" . join '', @lines;
        }
    }
    push @bad, "no valgrind log in $ValgrindLogDir\n" unless @logs;
    my $code = $Test::Nginx::Util::ValgrindExitCode;
    if (!@bad && defined $NginxStatus && $NginxStatus >> 8 == $code) {
        push @bad, "valgrind exited with $code (errors) but its logs show "
                   . "none\n";
    }
    if (@bad) {
        fail($desc);
        diag($_) for @bad;
    } else {
        pass($desc);
    }
}

sub run_requests ($$) {
    my ($block, $rep) = @_;
    my $name = $block->name;
    my $reqs = build_requests($block);
    my $timeout = parse_time($block->timeout) // $Timeout;
    # under valgrind nginx is many times slower
    $timeout *= $ValgrindSlowdown if $UseValgrind;
    my $need_array = @$reqs > 1;

    for my $idx (0 .. $#$reqs) {
        my ($packets, $head_req) = @{ $reqs->[$idx] };
        my $raw = send_request($block, $packets, $timeout);
        my $res = parse_response($name, $raw, $head_req);
        check_error_code($block, $res, $idx, $need_array);
        check_response_headers($block, $res, $idx, $need_array);
        check_response_body($block, $res, $idx, $rep, $need_array);
        # the real one checks the log in between
        check_logs($block, $rep, undef) if $idx < $#$reqs;
    }
    check_logs($block, $rep, undef);
}

my $FirstBlock = 1;

# --- skip_nginx "N: op version": whether to skip the block's N tests
sub skip_nginx ($) {
    my $block = shift;
    my $cond = $block->skip_nginx;
    return 0 unless defined $cond;
    my ($n, $op, $v) =
        $cond =~ /^\s*(\d+)\s*:\s*(<=|>=|<|>)\s*(\d+(?:\.\d+)*)\s*$/
        or bail_out($block->name . " - bad skip_nginx: $cond");
    my @a = split /\./, $NginxVersion;
    my @b = split /\./, $v;
    my $cmp = 0;
    for my $i (0 .. 2) {
        $cmp ||= ($a[$i] // 0) <=> ($b[$i] // 0);
    }
    my $skip = $op eq '<' ? $cmp < 0 : $op eq '<=' ? $cmp <= 0
             : $op eq '>' ? $cmp > 0 : $cmp >= 0;
    return 0 unless $skip;
  SKIP: {
        skip($block->name . " - nginx $NginxVersion $op $v", $n);
    }
    return 1;
}

sub run_block ($) {
    my $block = shift;
    my $name = $block->name;
    return if skip_nginx($block);
    reset_rand_ports();
    my $config = expand_env($block->config, $name);
    my $must_die = $block->must_die;
    bail_out("$name - No '--- config' section specified and could not get "
             . "previous one.")
        if !defined $config && $FirstBlock;
    my $hup = $UseHup && !defined $must_die;
    my $first = $FirstBlock;
    $FirstBlock = 0;

    if (defined $must_die) {
        stop_nginx($name);
        check_valgrind();
        setup_server_root(0);
        write_user_files($block);
        write_config_file($block, $config // '', 0);
        return test_must_die($block, $must_die);
    }

    my $pid = nginx_pid();
    if (!defined $config && $pid) {
        # like the real one: no --- config, keep the running nginx as it is
        $ErrLogPos = -s $ErrLogFile || 0;

    } elsif ($hup && $pid && !$first) {
        setup_server_root(1);
        write_user_files($block);
        write_config_file($block, $config // '', 1);
        $ErrLogPos = 0;
        if (my $err = reload_nginx($pid)) {
            fail("$name - nginx failed to reload");
            diag($err);
            return;
        }

    } else {
        stop_nginx($name);      # the previous block's, or a stale one
        check_valgrind();
        setup_server_root(0);
        write_user_files($block);
        write_config_file($block, $config // '', $hup);
        $ErrLogPos = 0;
        if (my $err = start_nginx()) {
            fail("$name - nginx failed to start");
            diag($err);
            return;
        }
    }

    push @Served, $name if $UseValgrind;

    if (defined(my $init = $block->init)) {
        eval "package main; $init; 1" or bail_out("$name - init failed: $@");
    }

    for my $rep (0 .. $RepeatEach - 1) {
        run_requests($block, $rep);
    }
}

sub run_tests () {
    check_nginx_binary();
    $ENV{TEST_NGINX_SERVER_PORT} //= $ServerPort;

    my @blocks = blocks();
    @blocks = shuffle @blocks unless $NoShuffle;
    for my $block (@blocks) {
        $_->($block) for @BlockPreprocessors;
        run_block($block);
    }
}

END {
    # as the real one, valgrind mode stops nginx even with TEST_NGINX_NO_CLEAN
    if ($Started && (!$ENV{TEST_NGINX_NO_CLEAN} || $UseValgrind)) {
        local $?;
        stop_nginx('END');
        check_valgrind();
    }
}

1;
