# The example configurations in examples/ pass "nginx -t", and copies of
# them with a mistake do not; its alerting rules pass promtool and their
# cases (t/090-alerts.yml).
#
# The examples are complete nginx.conf files written for /etc/nginx.  Each
# is copied under the server root ($TEST_NGINX_SERVROOT/examples) with only
# what a test needs changed:
#
#   - "load_module modules/ngx_http_prefix_route_module.so;" loads
#     $TEST_NGINX_MODULE instead;
#   - the pid file and the logs under /var/log/nginx go to the test prefix;
#   - the http{} block gets *_temp_path directives under the test prefix
#     (nginx -t creates the temporary directories);
#   - "user www-data;" becomes the current user where www-data does not
#     exist.
#
# Then "nginx -t -p PREFIX/ -c conf/NAME" must succeed.  Two broken copies
# of each example must fail with the error that names the mistake: one
# with an unknown prefix_route parameter, one without the load_module line
# (so the test also fails if the module is not what makes the example
# valid).  A copy with "feedback=correct instances=3" must pass with the
# warning that says it works as feedback=on there.
#
# This file does not start nginx and needs no port: it uses Test::More,
# not the Test::Nginx::Socket block format.  TEST_NGINX_BINARY and
# TEST_NGINX_MODULE are set by the Makefile, as for the other .t files.

use strict;
use warnings;

use Test::More;
use File::Path qw(make_path remove_tree);
use File::Spec;
use FindBin;

my $Nginx = $ENV{TEST_NGINX_BINARY} || 'nginx';
my $Module = $ENV{TEST_NGINX_MODULE}
    or die "TEST_NGINX_MODULE is not set (run the suite with make test)\n";
$Module = File::Spec->rel2abs($Module);
-f $Module or die "no module at $Module\n";

my $ServRoot = File::Spec->rel2abs($ENV{TEST_NGINX_SERVROOT}
                                   || "$FindBin::Bin/servroot");
$ServRoot =~ s{/+$}{};
my $Prefix = "$ServRoot/examples";

my $ExamplesDir = "$FindBin::Bin/../examples";
my @Examples = sort glob "$ExamplesDir/*.conf";

# the binary's modules with a temporary directory (those not disabled
# with --without-http_xxx_module), and whether it has -e (nginx 1.19.5)
my $V = `$Nginx -V 2>&1`;
die "cannot run \"$Nginx -V\": $!\n" if $? != 0;
my %Without = map { $_ => 1 } $V =~ /--without-http_(\w+?)_module/g;
my $HasE = `$Nginx -h 2>&1` =~ /^\s*-e filename/m;

my $TempPaths = '';
for my $t (qw(client_body proxy fastcgi uwsgi scgi)) {
    next if $Without{$t};
    $TempPaths .= "    ${t}_temp_path $Prefix/${t}_temp;\n";
}

# the example's text with only what the test must change changed
sub for_test {
    my ($conf, $name) = @_;

    my $n = $conf =~ s{^(\s*load_module\s+)modules/ngx_http_prefix_route_module\.so;}
                      {$1$Module;}mg;
    die "$name: expected one \"load_module modules/ngx_http_prefix_route_module.so;\""
        . " line, found $n\n" if $n != 1;

    $conf =~ s{^(\s*pid\s+)/run/nginx\.pid;}{$1$Prefix/logs/nginx.pid;}m
        or die "$name: no \"pid /run/nginx.pid;\" line\n";

    $conf =~ s{/var/log/nginx/}{$Prefix/logs/}g;

    $conf =~ s{^(http\s*\{[ \t]*\n)}{$1$TempPaths}m
        or die "$name: no \"http {\" line\n";

    if (!defined getpwnam('www-data')) {
        my $me = getpwuid($>);
        $conf =~ s{^(\s*user\s+)www-data;}{$1$me;}m;
    }

    return $conf;
}

# runs nginx -t on the file written by check(); returns (wait status,
# what nginx printed)
sub run_nginx_t {
    my ($file) = @_;
    my $pid = open my $fh, '-|';
    die "fork: $!\n" unless defined $pid;
    if ($pid == 0) {
        open STDERR, '>&', \*STDOUT or die;
        my @cmd = ($Nginx, '-t', '-p', "$Prefix/", '-c', "conf/$file");
        push @cmd, '-e', "$Prefix/logs/error.log" if $HasE;
        exec { $cmd[0] } @cmd or die "exec $Nginx: $!\n";
    }
    local $/;
    my $output = <$fh> // '';
    close $fh;
    return ($?, $output);
}

# writes $conf as conf/$file under a fresh test prefix and runs nginx -t
sub check {
    my ($conf, $file) = @_;

    remove_tree($Prefix);
    make_path("$Prefix/conf", "$Prefix/logs");

    open my $out, '>', "$Prefix/conf/$file" or die "$Prefix/conf/$file: $!\n";
    print $out $conf;
    close $out or die "$Prefix/conf/$file: $!\n";

    return run_nginx_t($file);
}

cmp_ok(scalar @Examples, '>=', 3, "examples/ has the example configurations")
    or diag("found: @Examples");

for my $path (@Examples) {
    my ($name) = $path =~ m{([^/]+)\z};

    open my $in, '<', $path or die "$path: $!\n";
    my $orig = do { local $/; <$in> };
    close $in;

    like($orig, qr/^\s*prefix_route\s+zone=\S+/m, "$name uses prefix_route");
    like($orig, qr/^\s*prefix_route_status;/m, "$name has a status location");

    my $conf = for_test($orig, $name);

    # the test must not touch the system: no path of it is left outside
    # comments
    (my $code = $conf) =~ s/#[^\n]*//g;
    unlike($code, qr{(?<![\w.-])/(?:etc|var|run|usr|srv|opt)/},
           "$name: only test paths left after rewriting");

    my ($rc, $out) = check($conf, $name);
    is($rc, 0, "$name: nginx -t succeeds") or diag($out);
    like($out, qr/test is successful/, "$name: nginx -t says the test is successful");

    my @noise = grep { /\[(?:warn|emerg|alert|crit)\]/
                       && !/the "user" directive makes sense only/ }
                split /\n/, $out;
    is(scalar @noise, 0, "$name: nginx -t gives no warning") or diag($out);

    # a copy with an unknown prefix_route parameter
    (my $bad = $conf) =~ s{^(\s*prefix_route\s+zone=\S+?)(\s|;)}{$1 bogus=1$2}m
        or die "$name: no prefix_route line to break\n";
    ($rc, $out) = check($bad, $name);
    isnt($rc, 0, "$name with an unknown parameter: nginx -t fails");
    like($out, qr/\[emerg\].*invalid parameter "bogus=1"/,
         "$name with an unknown parameter: nginx -t names it");

    # a copy for several nginx instances that asks for feedback=correct,
    # whose trims one instance cannot date: it starts, with a warning
    ($bad = $conf) =~ s{^(\s*prefix_route\s+zone=\S+?)(\s|;)}
                       {$1 feedback=correct instances=3$2}m
        or die "$name: no prefix_route line to change\n";
    ($rc, $out) = check($bad, $name);
    is($rc, 0, "$name with feedback=correct instances=3: nginx -t succeeds")
        or diag($out);
    like($out, qr/\[warn\].*"feedback=correct" works as "feedback=on" with "instances=3"/,
         "$name with feedback=correct instances=3: nginx -t warns");

    # a copy whose salt names no variable ("remote_user" for
    # "$remote_user"): one tenant for all; it starts, with a warning
    ($bad = $conf) =~ s{^(\s*)(prefix_route\s+zone=[^\n]*\n)}
                       {$1$2$1prefix_route_salt remote_user;\n}m
        or die "$name: no prefix_route line to salt\n";
    $bad =~ s{^\s*prefix_route_salt\s+\$[^\n]*\n}{}m;
    ($rc, $out) = check($bad, $name);
    is($rc, 0, "$name with a salt of no variable: nginx -t succeeds")
        or diag($out);
    like($out, qr/\[warn\].*prefix_route_salt "remote_user" holds no variable/,
         "$name with a salt of no variable: nginx -t warns");

    # with cache_salt=off a fixed salt sets the body's keys aside: no warning
    $bad =~ s{prefix_route_salt remote_user;}{prefix_route_salt fleet cache_salt=off;}
        or die "$name: no salt to change\n";
    ($rc, $out) = check($bad, $name);
    is($rc, 0, "$name with a fixed salt and cache_salt=off: nginx -t succeeds")
        or diag($out);
    unlike($out, qr/holds no variable/,
           "$name with a fixed salt and cache_salt=off: no warning");

    # a copy without the module
    ($bad = $conf) =~ s{^\s*load_module\s+\Q$Module\E;[ \t]*\n}{}m
        or die "$name: no load_module line to remove\n";
    ($rc, $out) = check($bad, $name);
    isnt($rc, 0, "$name without the module: nginx -t fails");
    like($out, qr/\[emerg\].*unknown directive "prefix_route"/,
         "$name without the module: nginx -t names prefix_route");
}

# the alerting rules: promtool checks them and runs their cases
# (t/090-alerts.yml).  promtool is Debian's prometheus, of "make check"'s
# packages, not of "make test"'s: without it the two are skipped, said so
SKIP: {
    my $promtool = `command -v promtool 2>/dev/null`;
    chomp $promtool;
    skip "promtool not installed (Debian package prometheus)", 2
        unless $promtool;

    my $rules = "$ExamplesDir/prometheus-alerts.yml";
    my $out = `$promtool check rules $rules 2>&1`;
    is($?, 0, "prometheus-alerts.yml: promtool check rules accepts it")
        or diag($out);

    $out = `$promtool test rules $FindBin::Bin/090-alerts.yml 2>&1`;
    is($?, 0, "prometheus-alerts.yml: each alert fires on its cases, "
              . "after its \"for\", and on no healthy upstream")
        or diag($out);
}

remove_tree($Prefix) unless $ENV{TEST_NGINX_NO_CLEAN};

done_testing();
