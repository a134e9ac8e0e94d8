package Test::Nginx::Util;

# Server-side half of the small Test::Nginx::Socket work-alike bundled in
# t/lib (see Test/Nginx/Socket.pm for the list of supported sections):
# global settings, the generated nginx.conf, starting / stopping / HUP
# reloading nginx under the server root, and a raw HTTP/1.x socket client.
#
# It follows the behaviour of Util.pm in https://github.com/openresty/test-nginx
# but is an independent, much smaller implementation.  Only Perl core
# modules are used.

use strict;
use warnings;

use Exporter 'import';
use File::Path qw(make_path remove_tree);
use File::Spec ();
use IO::Select ();
use IO::Socket::INET ();
use List::Util qw(max min);
use POSIX qw(WNOHANG);
use Time::HiRes qw(sleep time);

our @EXPORT = qw(
    $NginxBinary $ServerAddr $ServerPort $ServerName $ServRoot $HtmlDir
    $ErrLogFile $AccLogFile $PidFile $StderrFile
    $RepeatEach $LogLevel $UseHup $NoShuffle $Timeout $Sleep
    @BlockPreprocessors
    $UseValgrind $ValgrindLogDir $ValgrindSlowdown $NginxStatus
    $NginxVersion

    repeat_each workers worker_connections log_level timeout master_on
    no_shuffle no_root_location use_hup server_port server_root html_dir
    add_block_preprocessor bail_out

    parse_time expand_env reset_rand_ports check_nginx_binary is_running
    nginx_pid stop_nginx setup_server_root write_user_files
    write_config_file run_nginx wait_for_pid_file reload_nginx send_raw
    log_tail slurp valgrind_logs
);

# -- settings (same environment variables and defaults as the real one) ------

our $NginxBinary  = $ENV{TEST_NGINX_BINARY} || 'nginx';
our $ServerAddr   = '127.0.0.1';
our $ServerPort   = $ENV{TEST_NGINX_SERVER_PORT} || $ENV{TEST_NGINX_PORT}
                    || 1984;
our $ServerName   = 'localhost';
our $LogLevel     = $ENV{TEST_NGINX_LOG_LEVEL} || 'debug';
our $UseHup       = $ENV{TEST_NGINX_USE_HUP};
our $NoShuffle    = $ENV{TEST_NGINX_NO_SHUFFLE} || 0;
our $Timeout      = $ENV{TEST_NGINX_TIMEOUT} || 3;
our $Sleep        = $ENV{TEST_NGINX_SLEEP} || 0.015;
our $MasterProcess = $ENV{TEST_NGINX_MASTER_PROCESS} || 'off';
our $RepeatEach   = 1;
our $Workers      = 1;
our $WorkerConnections = 64;
our $NoRootLocation = 0;
our @BlockPreprocessors;

our $ServRoot = File::Spec->rel2abs($ENV{TEST_NGINX_SERVROOT} || 't/servroot');
$ServRoot =~ s{/+$}{};
our $ConfDir    = "$ServRoot/conf";
our $ConfFile   = "$ConfDir/nginx.conf";
our $HtmlDir    = "$ServRoot/html";
our $LogDir     = "$ServRoot/logs";
our $ErrLogFile = "$LogDir/error.log";
our $AccLogFile = "$LogDir/access.log";
our $PidFile    = "$LogDir/nginx.pid";
our $StderrFile = "$LogDir/nginx-stderr.log";   # what "nginx" printed

# TEST_NGINX_USE_VALGRIND: nginx runs under valgrind (see valgrind_command());
# the n-th nginx a .t file starts writes one log a process, in
# $ValgrindLogDir/<.t file>-<n>.<pid>.log
our $UseValgrind  = $ENV{TEST_NGINX_USE_VALGRIND};
our $ValgrindLogDir = File::Spec->rel2abs($ENV{TEST_NGINX_VALGRIND_LOG_DIR}
                                          || "$ServRoot/valgrind");
our $ValgrindExitCode = 99;     # valgrind's exit code when it saw errors
# how much longer a client waits for a response under valgrind
our $ValgrindSlowdown = $ENV{TEST_NGINX_VALGRIND_SLOWDOWN} || 10;
our $NginxStatus;               # wait status of the last nginx stopped

$ENV{TEST_NGINX_SERVER_ROOT} = $ServRoot;
$ENV{TEST_NGINX_HTML_DIR} ||= $HtmlDir;

# nginx daemonizes, and its orphaned daemon becomes a zombie after it exits if
# PID 1 does not reap (as in some containers): on Linux, become the
# "child subreaper" (prctl PR_SET_CHILD_SUBREAPER) so stop_nginx() reaps it
if ($^O eq 'linux') {
    my $nr = { x86_64 => 157, aarch64 => 167 }->{(POSIX::uname())[4]};
    syscall($nr, 36, 1, 0, 0, 0) if $nr;
}

sub stop_nginx ($);
sub send_raw ($$$);

our $ConfigVersion = '';    # answered by GET /ver in HUP mode
our %WithoutModules;        # "--without-http_xxx_module" flags of the binary
our $NginxVersion = '';     # the binary's version, "1.22.1"
my %RandPorts;

sub repeat_each (@)  { $RepeatEach = shift if @_; $RepeatEach }
sub workers (@)      { $Workers = shift if @_; $Workers }
sub worker_connections (@) { $WorkerConnections = shift if @_; $WorkerConnections }
sub log_level (@)    { $LogLevel = shift if @_; $LogLevel }
sub timeout (@)      { $Timeout = shift if @_; $Timeout }
sub server_port (@)  { $ServerPort = shift if @_; $ServerPort }
sub master_on ()     { $MasterProcess = 'on' }
sub no_shuffle ()    { $NoShuffle = 1 }
sub no_root_location () { $NoRootLocation = 1 }
sub use_hup ()       { $UseHup = 1 }
sub server_root ()   { $ServRoot }
sub html_dir ()      { $HtmlDir }
sub add_block_preprocessor (&) { unshift @BlockPreprocessors, shift }

sub bail_out (@) {
    stop_nginx('bail_out') unless $ENV{TEST_NGINX_NO_CLEAN};
    Test::More::BAIL_OUT(join '', @_);
}

# "1.5", "1.5s" or "50ms" -> seconds
sub parse_time ($) {
    my $t = shift;
    return undef unless defined $t;
    $t =~ s/^\s+|\s+$//g;
    return $1 / 1000 if $t =~ /^([\d.]+)ms$/;
    $t =~ s/s$//;
    return $t;
}

# -- $TEST_NGINX_XXX expansion --------------------------------------------------

sub reset_rand_ports () { %RandPorts = () }

sub rand_port () {
    for (1 .. 1000) {
        my $port = 1985 + int rand 60000;
        next if $port == $ServerPort || grep { defined && $_ == $port } values %RandPorts;
        my $sock = IO::Socket::INET->new(LocalAddr => $ServerAddr,
                                         LocalPort => $port, Proto => 'tcp',
                                         Listen => 1)
            or next;
        close $sock;
        return $port;
    }
    bail_out("cannot find a free port for \$TEST_NGINX_RAND_PORT_*");
}

sub expand_env ($$);
sub expand_env ($$) {
    my ($value, $name) = @_;
    return $value unless defined $value;
    return [map { expand_env($_, $name) } @$value] if ref $value eq 'ARRAY';
    return { %$value, value => expand_env($value->{value}, $name) }
        if ref $value eq 'HASH';
    return $value if ref $value;

    $value =~ s{\$(TEST_NGINX_[_A-Z0-9]+)}{
        my $var = $1;
        if ($var =~ /^TEST_NGINX_RAND_PORT_\d+$/) {
            $RandPorts{$var} //= rand_port();
        } elsif (defined $ENV{$var}) {
            $ENV{$var};
        } else {
            bail_out("$name - No environment $var defined.\n");
        }
    }ge;
    return $value;
}

# -- nginx processes ----------------------------------------------------------

sub check_nginx_binary () {
    my $out = `$NginxBinary -V 2>&1`;
    if (!defined $out || $? != 0) {
        bail_out("Failed to run \"$NginxBinary -V\" (set TEST_NGINX_BINARY): "
                 . ($out // $!));
    }
    %WithoutModules = map { $_ => 1 } $out =~ /--without-(http_\w+?)_module/g;
    ($NginxVersion) = $out =~ m{nginx version: \S+?/(\d+(?:\.\d+)*)};
    return $out;
}

# alive, and not a zombie (an exited daemon that nobody has reaped yet)
sub is_running ($) {
    my $pid = shift;
    return 0 unless $pid && kill 0, $pid;
    if (open my $in, '<', "/proc/$pid/stat") {
        my $stat = <$in> // '';
        return 0 if $stat =~ /^\d+ \(.*\) [ZX]/s;
    }
    return 1;
}

# the pid in logs/nginx.pid if that process is alive and is an nginx
sub nginx_pid () {
    open my $in, '<', $PidFile or return undef;
    my $pid = <$in>;
    close $in;
    return undef unless defined $pid && $pid =~ /^\s*(\d+)\s*$/;
    $pid = $1;
    return undef unless is_running($pid);
    if (open my $cmd, '<', "/proc/$pid/cmdline") {
        my $cmdline = do { local $/; <$cmd> } // '';
        return undef if $cmdline !~ /nginx/;   # a recycled pid: not ours
    }
    return $pid;
}

# sets $NginxStatus to the wait status of nginx (when this process could
# reap it: its child, or an orphaned daemon, see PR_SET_CHILD_SUBREAPER)
sub stop_nginx ($) {
    my $name = shift;
    my $pid = nginx_pid();
    undef $NginxStatus;
    if ($pid) {
        kill 'QUIT', $pid;
        # valgrind checks for leaks at exit, which takes a while
        my $wait = $UseValgrind ? max($Timeout, 30) : $Timeout;
        my $deadline = time + $wait;
        while (is_running($pid) && time < $deadline) {
            $NginxStatus = $? if waitpid($pid, WNOHANG) == $pid;
            sleep 0.01;
        }
        if (is_running($pid)) {
            warn "$name - nginx $pid did not quit in ${wait}s, killing it\n";
            # daemonized nginx leads its own process group (workers
            # included), so does nginx under valgrind (run_nginx_valgrind())
            kill 'KILL', (getpgrp($pid) == $pid ? -$pid : $pid);
            $deadline = time + 1;
            sleep 0.01 while is_running($pid) && time < $deadline;
        }
        # reap it if it is our child
        $NginxStatus = $? if waitpid($pid, WNOHANG) == $pid;
    }
    unlink $PidFile;
}

sub slurp ($) {
    my $file = shift;
    open my $in, '<', $file or return '';
    binmode $in;
    local $/;
    my $data = <$in>;
    return $data // '';
}

sub log_tail ($$) {
    my ($file, $n) = @_;
    my @lines = split /^/m, slurp($file);
    splice @lines, 0, @lines - $n if @lines > $n;
    return join '', @lines;
}

# $hup: nginx keeps running and will reopen its logs (USR1), so keep
# the pid file and only drop the other files
sub setup_server_root ($) {
    my $hup = shift;
    remove_tree($ConfDir, $HtmlDir, grep { -d } glob("$ServRoot/*_temp"),
                glob("$ServRoot/*_cache"));
    if ($hup) {
        unlink grep { $_ ne $PidFile && -f } glob("$LogDir/*");
    } else {
        remove_tree($LogDir);
    }
    make_path($ServRoot, $ConfDir, $LogDir, $HtmlDir);
    -d $HtmlDir or bail_out("Cannot create $HtmlDir under $ServRoot: $!");

    open my $out, '>', "$HtmlDir/index.html"
        or bail_out("Can't write $HtmlDir/index.html: $!");
    print $out '<html><head><title>It works!</title></head>'
             . '<body>It works!</body></html>';
    close $out;
}

# --- user_files: ">>> name" lines followed by contents, or eval
# [[name, contents], ...]; relative names go under html/
sub write_user_files ($) {
    my $block = shift;
    my $files = $block->user_files;
    return unless defined $files;
    my @files;
    if (ref $files eq 'ARRAY') {
        @files = @$files;
    } else {
        for (split /^/m, $files) {
            if (/^>>> (\S+)/) { push @files, [$1, ''] }
            elsif (@files)    { $files[-1][1] .= $_ }
        }
    }
    for my $f (@files) {
        my ($fname, $body) = @$f;
        my $path = $fname =~ m{^/} ? $fname : "$HtmlDir/$fname";
        make_path($1) if $path =~ m{(.*)/} && !-d $1;
        open my $out, '>', $path or bail_out("Cannot write $path: $!");
        binmode $out;
        print $out expand_env($body // '', $block->name);
        close $out;
    }
}

sub write_config_file ($$$) {
    my ($block, $config, $hup) = @_;
    my $name = $block->name;
    my $main_config = expand_env($block->main_config // '', $name);
    my $http_config = expand_env($block->http_config // '', $name);
    my $log_level = $block->log_level // $LogLevel;
    $log_level =~ s/^\s+|\s+$//g;
    my $master = $hup ? 'on' : $MasterProcess;   # reloads need the master
    # under valgrind nginx stays in the foreground, as a child of the runner;
    # a --- must_die block runs without valgrind, as in the real one
    my $daemon = $UseValgrind && !defined $block->must_die ? 'off' : 'on';
    $ConfigVersion = join '', map { ('a' .. 'z')[rand 26] } 1 .. 12 if $hup;

    # Debian's binary has temp paths under /var/lib/nginx compiled in;
    # keep everything under the server root instead
    my $temp_paths = '';
    for my $t (qw(client_body proxy fastcgi uwsgi scgi)) {
        next if $WithoutModules{"http_$t"};
        $temp_paths .= "    ${t}_temp_path $ServRoot/${t}_temp;\n";
    }

    my $root_location = $NoRootLocation ? '' : <<"_EOC_";
        location / {
            root $HtmlDir;
            index index.html index.htm;
        }
_EOC_

    my $version_server = !$hup ? '' : <<"_EOC_";
    server {
        listen          $ServerPort;
        server_name     'Test-Nginx';

        location = /ver {
            return 200 '$ConfigVersion';
        }
    }
_EOC_

    my $user = defined $ENV{TEST_NGINX_WORKER_USER}
               ? "user $ENV{TEST_NGINX_WORKER_USER};\n"
               : $> == 0 ? "user root;\n" : '';

    open my $out, '>', $ConfFile or bail_out("Can't write $ConfFile: $!");
    print $out <<"_EOC_";
worker_processes  $Workers;
daemon $daemon;
master_process $master;
error_log $ErrLogFile $log_level;
pid       $PidFile;
$main_config

http {
    access_log $AccLogFile;

    default_type text/plain;
    keepalive_timeout  68;

$temp_paths
$http_config

    server {
        listen          $ServerPort;
        server_name     '$ServerName';

        client_max_body_size 30M;

        # Begin test case config...
$config
        # End test case config.

$root_location    }

$version_server}

events {
    accept_mutex off;

    worker_connections  $WorkerConnections;
}
$user
_EOC_
    close $out or bail_out("Can't write $ConfFile: $!");
}

# runs "nginx -p servroot/ -c conf/nginx.conf", which daemonizes;
# returns the wait status and what nginx printed on stderr.  With a true
# argument, in valgrind mode (TEST_NGINX_USE_VALGRIND), runs it under
# valgrind instead (see run_nginx_valgrind()).
sub run_nginx (;$) {
    my $valgrind = shift;
    return run_nginx_valgrind() if $valgrind && $UseValgrind;
    my @cmd = ($NginxBinary, '-p', "$ServRoot/", '-c', 'conf/nginx.conf');
    my $pid = fork;
    bail_out("fork() failed: $!") unless defined $pid;
    if ($pid == 0) {
        open STDOUT, '>', '/dev/null';
        open STDERR, '>', $StderrFile;
        { no warnings 'exec'; exec { $cmd[0] } @cmd; }
        print STDERR "exec @cmd failed: $!\n";
        POSIX::_exit(127);
    }
    my $deadline = time + 30;
    while (waitpid($pid, WNOHANG) == 0) {
        if (time > $deadline) {
            kill 'KILL', $pid;
            waitpid($pid, 0);
            return (-1, "nginx did not return within 30s\n");
        }
        sleep 0.005;
    }
    return ($?, slurp($StderrFile));
}

# -- valgrind mode ----------------------------------------------------------
# As in the real one: nginx runs in the foreground ("daemon off" in the
# config; master_process as the .t file sets it, off by default) under
# valgrind, in a child process of the runner leading its own process group;
# it is up once it has written its pid file, which it does after opening
# its listening sockets.  A --- must_die block runs without valgrind.

my $ValgrindRuns = 0;       # nginx instances started under valgrind
my $ValgrindPrefix;         # the log files of the last one: $prefix.<pid>.log
my $ValgrindChecked;        # "valgrind --version" ran

# TEST_NGINX_USE_VALGRIND=1 (a number) selects memcheck with the real one's
# options and definite leaks only counted as errors; any other value is
# the valgrind options to use instead.  The runner adds the log file, the
# exit code on errors, and valgrind.suppress (in the current directory, as
# the real one, or in t/) when there is one.
sub valgrind_command ($) {
    my $log = shift;
    my @opts = $UseValgrind =~ /^\d+$/
        ? qw(--tool=memcheck --leak-check=full --show-possibly-lost=no
             --errors-for-leak-kinds=definite)
        : split ' ', $UseValgrind;
    my @supp = map { '--suppressions=' . File::Spec->rel2abs($_) }
               grep { -f } qw(valgrind.suppress t/valgrind.suppress);
    return ('valgrind', '--num-callers=100', '--gen-suppressions=all',
            "--error-exitcode=$ValgrindExitCode", "--log-file=$log", @supp,
            @opts);
}

sub run_nginx_valgrind () {
    if (!$ValgrindChecked++) {
        system('valgrind --version >/dev/null 2>&1') == 0
            or bail_out("TEST_NGINX_USE_VALGRIND is set but \"valgrind "
                        . "--version\" fails (is valgrind installed?)");
    }
    make_path($ValgrindLogDir);
    (my $script = (File::Spec->splitpath($0))[2]) =~ s/\.t$//;
    $ValgrindPrefix = "$ValgrindLogDir/$script-" . ++$ValgrindRuns;
    unlink glob("$ValgrindPrefix.*.log");

    my @cmd = (valgrind_command("$ValgrindPrefix.%p.log"),
               $NginxBinary, '-p', "$ServRoot/", '-c', 'conf/nginx.conf');
    my $pid = fork;
    bail_out("fork() failed: $!") unless defined $pid;
    if ($pid == 0) {
        setpgrp(0, 0);
        open STDOUT, '>', '/dev/null';
        open STDERR, '>', $StderrFile;
        { no warnings 'exec'; exec { $cmd[0] } @cmd; }
        print STDERR "exec @cmd failed: $!\n";
        POSIX::_exit(127);
    }
    my $deadline = time + 60;
    while (1) {
        return ($?, slurp($StderrFile)) if waitpid($pid, WNOHANG) == $pid;
        my $up = nginx_pid();
        return (0, slurp($StderrFile)) if defined $up && $up == $pid;
        if (time > $deadline) {
            kill 'KILL', -$pid;
            waitpid($pid, 0);
            return (-1, "nginx did not start under valgrind within 60s\n");
        }
        sleep 0.02;
    }
}

# the valgrind logs of the last nginx started under valgrind (one a
# process: the master and its workers), once it has stopped
sub valgrind_logs () {
    return () unless defined $ValgrindPrefix;
    return sort glob("$ValgrindPrefix.*.log");
}

sub wait_for_pid_file () {
    my $deadline = time + 2;
    until (nginx_pid() || time > $deadline) {
        sleep 0.005;
    }
    return nginx_pid();
}

# HUP mode: logs were removed by setup_server_root(1) and a new config was
# written; reopen the logs, reload, and wait until the new workers answer
# GET /ver with the new config version (several times in a row, so that
# the old workers are gone). Returns an error message on failure.
sub reload_nginx ($) {
    my $pid = shift;
    kill 'USR1', $pid or return "failed to send USR1 to nginx $pid: $!";
    sleep $Sleep;
    kill 'HUP', $pid or return "failed to send HUP to nginx $pid: $!";
    sleep $Sleep * 3;

    my $req = "GET /ver HTTP/1.0\r\nHost: Test-Nginx\r\n\r\n";
    my ($ok, $deadline) = (0, time + 10);
    while (time < $deadline) {
        my ($resp) = send_raw([{ value => $req }], 1, 0);
        if (defined $resp && $resp =~ /\r\n\r\n\Q$ConfigVersion\E\z/) {
            return undef if ++$ok >= 5;
            next;
        }
        $ok = 0;
        # the error log was emptied before the reload: a bad config shows up
        my @errors = grep { /\[(?:emerg|alert)\]/ } split /^/m, slurp($ErrLogFile);
        return "failed to reload the configuration:\n" . join '', @errors
            if @errors;
        sleep $Sleep;
    }
    return "failed to reload the configuration (nginx $pid still serves "
           . "the old one after 10s; see $ErrLogFile)";
}

# -- a raw HTTP client ----------------------------------------------------------
# $packets: [{ value => bytes, delay_before => secs }, ...] written in turn;
# $connect_wait: seconds to retry connecting.  Reads until the server
# closes the connection.  Returns ($response, $error) where $error is
# undef, "timeout" or "connect: ...".
sub send_raw ($$$) {
    my ($packets, $timeout, $connect_wait) = @_;

    my $sock;
    my $deadline = time + ($connect_wait // 0);
    my $step = $Sleep;
    until ($sock = IO::Socket::INET->new(PeerAddr => $ServerAddr,
                                         PeerPort => $ServerPort,
                                         Proto => 'tcp', Timeout => $timeout))
    {
        my $err = $@ || $!;
        return (undef, "connect: $err") if time >= $deadline;
        sleep $step;
        $step = min($step * 2, 0.25);
    }
    $sock->blocking(0);
    local $SIG{PIPE} = 'IGNORE';
    my $sel = IO::Select->new($sock);
    my $resp = '';

    PACKET: for my $p (@$packets) {
        sleep $p->{delay_before} if $p->{delay_before};
        my $buf = $p->{value} // '';
        utf8::encode($buf) if utf8::is_utf8($buf);
        my $off = 0;
        while ($off < length $buf) {
            if (!$sel->can_write($timeout)) {
                close $sock;
                return ($resp, 'timeout');
            }
            my $w = syswrite $sock, $buf, length($buf) - $off, $off;
            if (!defined $w) {
                next if $!{EAGAIN} || $!{EWOULDBLOCK} || $!{EINTR};
                last PACKET;    # closed by nginx: read what it answered
            }
            $off += $w;
        }
    }

    while (1) {
        if (!$sel->can_read($timeout)) {
            close $sock;
            return ($resp, 'timeout');
        }
        my $r = sysread $sock, my $chunk, 65536;
        if (!defined $r) {
            next if $!{EAGAIN} || $!{EWOULDBLOCK} || $!{EINTR};
            last;               # e.g. connection reset
        }
        last if $r == 0;
        $resp .= $chunk;
    }
    close $sock;
    return ($resp, undef);
}

1;
