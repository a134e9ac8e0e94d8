# Engine probes with two workers: each round is taken by one worker, so a
# probe slower than the interval (the timeout may be longer) can end after
# another worker's probe of a later round.  What it read is then older
# than what is kept, and a counter it read lower is no restart.
#
# b1's page gives its prompt counter as the time it is asked ($msec, so it
# only grows), and half its answers (by $request_id) send the counter at
# once and the rest of the page 0.3 s later, three rounds of probes.
# GET /block holds the worker it reaches for 0.25 s, as a busy worker
# would be: the other then takes the rounds, and the held one's probe
# ends after theirs.
use Test::Nginx::Socket 'no_plan';
use FindBin;
use lib $FindBin::Bin;
use PrefixRoute qw(:DEFAULT chat sys user text);

sub page {
    return "echo \"vllm:prompt_tokens_total{model_name=\\\"m\\\"} \$msec\"; "
         . ($_[0] ? "echo_flush; echo_sleep 0.3; " : "")
         . "echo \"vllm:num_requests_waiting{model_name=\\\"m\\\"} 0\"; "
         . "echo \"vllm:num_requests_running{model_name=\\\"m\\\"} 0\";";
}

our $Http = ::upstream(1)
    =~ s/(    prefix_route [^\n]*\n)/$1    prefix_route_probe interval=100ms timeout=1s;\n/r
    . "server {\n    listen " . ::addr(1) . ";\n"
    . "    location = /metrics {\n"
    . "        if (\$request_id ~ ^[0-7]) { " . page(1) . " }\n"
    . "        " . page(0) . "\n    }\n"
    . "    location / { return 200 \"b1\\n\"; }\n}\n";

our $Config = ::proxy() . <<'_EOC_';
location = /status {
    prefix_route_status;
}
location = /block {
    echo_blocking_sleep 0.25;
    echo ok;
}
_EOC_

add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value(main_config => $LoadModule . $LoadEcho) unless defined $block->main_config;
    $block->set_value(http_config => $Http) unless defined $block->http_config;
    $block->set_value(config => $Config) unless defined $block->config;
    $block->set_value(no_error_log => $NoErrorLog) unless defined $block->no_error_log;
    return $block;
});

master_on();
workers(2);
no_shuffle();
run_tests();

__DATA__

=== TEST 1: a probe that ends after a later round's is not kept: no restart is seen in a counter that only grows
Some 50 rounds, half of them slow, taken by either worker; the build
without the rounds' numbers saw a restart in 98 of 100 such runs.  The
status shows a reading was kept: its gauges, or only its age when the
last one kept is older than two intervals (a slow page, a held worker).
--- request eval
[("GET /block") x 20, "GET /status"]
--- response_body_like eval
[("ok") x 20, qr/"probe_failures":0,"probe_restarts":0,"engine":\{(?:"waiting":0,"running":0,|"age_ms":\d+\})/]
--- no_error_log
the engine restarted
[error]
[alert]
[crit]
--- timeout: 15
