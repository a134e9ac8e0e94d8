# Shared by the stress checks of t/stress/ (bash, sourced):
#
#     . "$(dirname "$0")/lib.sh" "$@"     # $1: the module (optional)
#
# It gives each check
#   - $module (objs/ngx_http_prefix_route_module.so unless $1 names one),
#     $nginx ($NGINX_BIN, else /usr/sbin/nginx), $echo_module, and $dir: a
#     temporary prefix for nginx (conf/, logs/, temp paths), removed at exit
#     (STRESS_KEEP=1 keeps it);
#   - check/finish: assertions and the closing line, the exit status;
#   - conf_*: pieces of nginx.conf; nginx_start/nginx_workers/nginx_stop;
#     backend_start/backend_nginx/backend_kill for backends that are
#     processes of their own; all started and stopped by bench/run/
#     harness.py, as the benches' nginx;
#   - status/peers/wait_idle: figures of prefix_route_status (status.pl);
#     index_check: the module's consistency check of the index;
#   - wrk_start/wrk_wait: load with prompts.lua; probe: one request;
#   - log_check: what error.log must not hold.
# Every process a check starts is ended on exit, also after a failure or a
# signal (INT, TERM: the runner's time limit): nginx by the harness, the
# others by their process id.
#
# Ports: each check uses 127.0.0.1 ports $port .. $port + 9, $port given
# by the check: a block of ten from 19801 (zone-pressure) up to 19951
# (fail-fast), 19961 (resolve-churn), 19971 (records-kill), 19981
# (lists-kill), 19991 (bench/kill/run, which sources this file), 20261
# (resolve-reuse, after bench/lock's 20001-20250), 20271 (records-epoch),
# 20281 (probe-epoch), 20291 (records-linger), 20301 (resolve-back),
# 20311 (dead-server, to 20316), 20321 (slow-parse);
# a new check takes the next free block (the project's tests and benchmarks use other
# ranges).

set -u

stress_lib=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$stress_lib/../.." && pwd)
module=${1:-$top/objs/ngx_http_prefix_route_module.so}
nginx=${NGINX_BIN:-/usr/sbin/nginx}
echo_module=${ECHO_MODULE:-/usr/lib/nginx/modules/ngx_http_echo_module.so}
name=$(basename "$0")
pass=0
fail=0

declare -A bg=()        # pid -> what: background processes still to end
nginx_prefixes=()       # prefixes of the nginx instances with a master
dir=

die() {
    echo "$name: $*" >&2
    exit 1
}

for t in wrk curl perl ps; do
    command -v "$t" > /dev/null || die "$t is missing (make check-deps)"
done
[ -f "$module" ] || die "no module $module (make)"
[ -x "$nginx" ] || die "no nginx binary $nginx"

dir=$(mktemp -d "${TMPDIR:-/tmp}/prefix-route-$name.XXXXXX") \
    || die "cannot make a temporary directory"
mkdir -p "$dir/conf" "$dir/logs"

# the one place that starts and stops nginx instances (start, stop: TERM
# then KILL after 5 s to the master and its workers, kill, errors), with
# the nginx binary of NGINX_BIN
harness=$top/bench/run/harness.py
export NGINX_BIN=$nginx

nginx_stop() {
    "$harness" stop "$@"
}

running() {
    local st
    st=$(ps -o stat= -p "$1" 2> /dev/null) && [ "${st#Z}" = "$st" ]
}

# ends background processes of the check: TERM, then KILL after 3 s
stop_bg() {
    local p i alive
    for p in "$@"; do
        kill -TERM "$p" 2> /dev/null
    done
    for i in $(seq 30); do
        alive=0
        for p in "$@"; do
            running "$p" && alive=1
        done
        [ "$alive" = 0 ] && break
        sleep 0.1
    done
    for p in "$@"; do
        running "$p" && kill -KILL "$p" 2> /dev/null
        wait "$p" 2> /dev/null
        unset "bg[$p]"
    done
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    [ ${#bg[@]} -gt 0 ] && stop_bg "${!bg[@]}"
    [ ${#nginx_prefixes[@]} -gt 0 ] && nginx_stop "${nginx_prefixes[@]}"
    if [ -z "$dir" ]; then
        :
    elif [ "${STRESS_KEEP:-}" = 1 ]; then
        echo "$name: kept $dir"
    else
        rm -rf "$dir"
    fi
    exit "$rc"
}

trap cleanup EXIT
trap 'echo "$name: interrupted"; exit 130' INT
trap 'echo "$name: terminated (time limit?)"; exit 143' TERM

# --- assertions --------------------------------------------------------------

# check DESCRIPTION COMMAND...: counts and prints the result of COMMAND
check() {
    local d=$1
    shift
    if "$@"; then
        pass=$((pass + 1))
        echo "  ok - $d"
    else
        fail=$((fail + 1))
        echo "  FAIL - $d"
    fi
}

# the closing line; the exit status of the check
finish() {
    echo "$name: $pass passed, $fail failed"
    [ "$fail" -eq 0 ]
    exit
}

# --- configuration -----------------------------------------------------------

# the main context: the module, 2 workers, error log and pid under $dir
conf_main() {
    echo "load_module $module;"
    # as root, workers stay root: the temporary prefix is root's only
    [ "$(id -u)" = 0 ] && echo "user root;"
    cat <<CONF
worker_processes 2;
error_log logs/error.log warn;
pid logs/nginx.pid;
events { worker_connections 4096; }
CONF
}

# the start of the http context: temp paths under $dir, bodies in memory,
# the access log format "stress" (| separated: time, status, upstream
# addresses and statuses, \$prefix_route_status, \$request_time)
conf_http() {
    local t
    echo "access_log off;"
    for t in client_body proxy fastcgi uwsgi scgi; do
        echo "${t}_temp_path $dir/${t}_temp;"
    done
    cat <<'CONF'
client_body_buffer_size 1m;
client_max_body_size 2m;
keepalive_requests 1000000;
log_format stress '$msec|$status|$upstream_addr|$upstream_status|$prefix_route_status|$request_time';
CONF
}

# upstream llm: prefix_route with the parameters $1 over the ports given,
# with upstream keepalive
conf_upstream() {
    local params=$1 p
    shift
    echo "upstream llm {"
    echo "    prefix_route $params;"
    for p in "$@"; do
        echo "    server 127.0.0.1:$p max_fails=1 fail_timeout=2s;"
    done
    echo "    keepalive 32;"
    echo "}"
}

# backends in the same nginx, on the ports given: backend i answers "bi"
conf_backends() {
    local i=0 p
    for p in "$@"; do
        i=$((i + 1))
        echo "server { listen 127.0.0.1:$p; return 200 \"b$i\\n\"; }"
    done
}

# the front server on $port: /v1/ to upstream llm as README.md's example
# (retries after errors, timeouts, 502 and 503, also of POSTs), with
# X-Prefix-Route ($prefix_route_status) and X-Upstream ($upstream_addr)
# headers, logged to logs/access.log (format stress); /status; $1: more
# locations
conf_front() {
    cat <<CONF
server {
    listen 127.0.0.1:$port;
    location /v1/ {
        proxy_pass http://llm;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_next_upstream error timeout http_502 http_503 non_idempotent;
        add_header X-Prefix-Route \$prefix_route_status always;
        add_header X-Upstream \$upstream_addr always;
        access_log logs/access.log stress;
    }
    location = /status { prefix_route_status; }
${1:-}
}
CONF
}

# --- processes ---------------------------------------------------------------

# starts the nginx of $dir/conf/nginx.conf (daemon, with a master) and
# waits until /status answers on $port
nginx_start() {
    nginx_prefixes+=("$dir")
    "$harness" start "$dir" --port "$port" --path /status \
        || die "nginx did not start"
}

nginx_master() {
    cat "$dir/logs/nginx.pid"
}

# the worker processes of the master, one pid a line
nginx_workers() {
    ps -o pid= --ppid "$(nginx_master)" | tr -d ' '
}

# waits (up to $1 s) until the master has no more than $2 (2) workers:
# after a reload the old ones finish their requests first
wait_old_workers() {
    local i
    for i in $(seq $(( ${1:-10} * 10 ))); do
        [ "$(nginx_workers | wc -l)" -le "${2:-2}" ] && return 0
        sleep 0.1
    done
    return 1
}

# backend_nginx N PORT SERVER...: backend N as an nginx process of its own
# (a daemon without a master) in $dir/bN, its server block given by the
# lines SERVER (listen 127.0.0.1:PORT comes first)
backend_nginx() {
    local n=$1 p=$2 b="$dir/b$1" t
    shift 2
    mkdir -p "$b/conf"
    {
        echo "load_module $echo_module;"
        [ "$(id -u)" = 0 ] && echo "user root;"
        cat <<CONF
master_process off;
error_log logs/error.log warn;
pid logs/nginx.pid;
events { worker_connections 2048; }
http {
    access_log off;
CONF
        for t in client_body proxy fastcgi uwsgi scgi; do
            echo "    ${t}_temp_path $b/${t}_temp;"
        done
        echo "    keepalive_requests 1000000;"
        echo "    server {"
        echo "        listen 127.0.0.1:$p backlog=1024;"
        printf '        %s\n' "$@"
        echo "    }"
        echo "}"
    } > "$b/conf/nginx.conf"
    nginx_prefixes+=("$b")
    "$harness" start "$b" --port "$p" || die "backend b$n did not start"
}

# backend_start N PORT [SLEEP]: backend N answering "bN" (after SLEEP s)
backend_start() {
    if [ -n "${3:-}" ]; then
        backend_nginx "$1" "$2" "location / { echo_sleep $3; echo b$1; }"
    else
        backend_nginx "$1" "$2" "return 200 \"b$1\\n\";"
    fi
}

# backend_kill N: SIGKILL, as a crash
backend_kill() {
    "$harness" kill "$dir/b$1"
}

# --- status ------------------------------------------------------------------

# status FIELD...: figures of upstream llm (see status.pl), on one line;
# fails when /status does not answer in 5 s.  status_of UPSTREAM FIELD...:
# of another upstream
status_of() {
    local j
    j=$(curl -sS --max-time 5 "http://127.0.0.1:$port/status?format=json") \
        || return 1
    printf '%s' "$j" | perl "$stress_lib/status.pl" "$@" | paste -sd' '
    [ "${PIPESTATUS[1]}" = 0 ]
}

status() {
    status_of llm "$@"
}

# the module's walk of the index of UPSTREAM (llm) with GET /status?check=1:
# true when it found it consistent (index_errors 0), which it prints; the
# walk may take $check_time s (10; a full 256m zone takes more)
index_check() {
    local e
    e=$(curl -sS --max-time "${check_time:-10}" \
             "http://127.0.0.1:$port/status?check=1&format=json" \
        | perl "$stress_lib/status.pl" "${1:-llm}" index_errors 2> /dev/null) \
        || e=none
    echo "    index_errors of ${1:-llm}: $e"
    [ "$e" = 0 ]
}

# peers: a line a peer of llm: name state inflight queued_bytes blocks
# requests hits
peers() {
    local j
    j=$(curl -sS --max-time 5 "http://127.0.0.1:$port/status?format=json") \
        || return 1
    printf '%s' "$j" | perl "$stress_lib/status.pl" llm peers
}

# wait_idle SECONDS: polls /status until every peer has inflight 0 and
# queued_bytes 0, at most SECONDS; idle_after: the seconds it took;
# idle_last: the peers as last read
wait_idle() {
    local t0=$SECONDS
    while :; do
        idle_last=$(peers) || idle_last="(the status did not answer in 5 s)"
        idle_after=$((SECONDS - t0))
        if printf '%s\n' "$idle_last" | awk 'NF != 7 || $3 != 0 || $4 != 0 {
                                                bad = 1 }
                                            END { exit bad }'; then
            return 0
        fi
        [ "$idle_after" -ge "$1" ] && return 1
        sleep 0.5
    done
}

# --- load --------------------------------------------------------------------

# wrk_start URL SECONDS CONNECTIONS: wrk (1 thread) with prompts.lua in the
# background; the PR_* variables of the environment set the prompts
wrk_start() {
    rm -f "$dir/wrk.done"
    wrk_interrupted=
    PR_DONE=$dir/wrk.done wrk -t1 -c"$3" -d"$2s" --timeout 10s -s "$stress_lib/prompts.lua" "$1" \
        > "$dir/wrk.out" 2>&1 &
    wrk_pid=$!
    bg[$wrk_pid]=wrk
}

# whether wrk still runs; once its thread has made PR_MAX requests, ends
# it (SIGINT: it prints its figures)
wrk_running() {
    if [ -z "$wrk_interrupted" ] && [ -s "$dir/wrk.done" ]; then
        kill -INT "$wrk_pid" 2> /dev/null
        wrk_interrupted=1
    fi
    running "$wrk_pid"
}

# waits for wrk and sets wrk_requests (responses), wrk_generated (bodies
# built, abandoned ones included), wrk_status (non-2xx/3xx responses),
# wrk_connect/read/write/timeout and wrk_errors (their sum), wrk_secs,
# wrk_rate (responses a second), wrk_p50_us, wrk_p99_us, wrk_max_us
wrk_wait() {
    local line kv
    while wrk_running; do
        sleep 0.2
    done
    wait "$wrk_pid"
    unset "bg[$wrk_pid]"
    line=$(grep '^PRSTAT ' "$dir/wrk.out") \
        || { cat "$dir/wrk.out"; die "wrk printed no figures"; }
    for kv in ${line#PRSTAT }; do
        printf -v "wrk_${kv%%=*}" '%s' "${kv#*=}"
    done
    wrk_errors=$((wrk_connect + wrk_read + wrk_write + wrk_timeout))
    wrk_secs=$(awk -v d="$wrk_duration_us" 'BEGIN { printf "%.1f", d / 1e6 }')
    wrk_rate=$(awk -v n="$wrk_requests" -v d="$wrk_duration_us" \
               'BEGIN { printf "%.0f", n / (d / 1e6) }')
}

# the line of a report on a wrk run
wrk_report() {
    echo "  wrk: $wrk_requests responses in $wrk_secs s ($wrk_rate/s)," \
         "$wrk_generated requests sent; non-2xx $wrk_status; socket errors:" \
         "connect $wrk_connect, read $wrk_read, write $wrk_write," \
         "timeout $wrk_timeout; latency p50 $((wrk_p50_us / 1000)) ms," \
         "p99 $((wrk_p99_us / 1000)) ms, max $((wrk_max_us / 1000)) ms"
}

# chat_body TAG SIZE: a Chat Completions body of SIZE bytes, its prompt
# starting with TAG; with the body's cache_salt $probe_salt if set, and a
# system message of $probe_system bytes before it if set (prompts.lua's
# PR_SYSTEM)
chat_body() {
    perl -e 'my ($tag, $size, $salt, $system) = @ARGV;
             my $t = "probe $tag:";
             my $i = 0;
             $t .= " w" . $i++ while length($t) < $size - 60;
             my $s = $salt eq "" ? "" : qq("cache_salt":"$salt",);
             my $m = $system ? qq({"role":"system","content":")
                               . ("rule " x int($system / 5)) . qq("},)
                             : "";
             print qq({"model":"m",$s"messages":[$m),
                   qq({"role":"user","content":"$t"}]})' \
        "$1" "$2" "${probe_salt:-}" "${probe_system:-0}"
}

# probe TAG SIZE [MAX_TIME]: POSTs chat_body TAG SIZE to $probe_path
# (/v1/chat/completions); sets
# probe_code (000 when no answer), probe_route (X-Prefix-Route) and
# probe_upstream (X-Upstream)
probe() {
    local f="$dir/probe"
    chat_body "$1" "$2" > "$f.body"
    probe_code=$(curl -s -o /dev/null -D "$f.head" --max-time "${3:-10}" \
                 -H 'Content-Type: application/json' --data-binary @"$f.body" \
                 -w '%{http_code}' \
                 "http://127.0.0.1:$port${probe_path:-/v1/chat/completions}")
    probe_route=$(awk 'tolower($1) == "x-prefix-route:" { print $2 }' \
                  "$f.head" 2> /dev/null | tr -d '\r')
    probe_upstream=$(awk 'tolower($1) == "x-upstream:" { $1 = ""; print }' \
                     "$f.head" 2> /dev/null | tr -d '\r' | sed 's/^ //')
}

# --- logs --------------------------------------------------------------------

# log_check [ERE]: error.log has no [emerg], [alert], [crit], [error] line
# nor "no memory", except lines matching ERE; when it has, prints their
# count and the first of them (nginx's lines: no request body in them)
log_check() {
    "$harness" errors "$dir" --also "no memory" ${1:+--allow "$1"} \
        | sed 's/^/  /'
    [ "${PIPESTATUS[0]}" = 0 ]
}

# log_count ERE: lines of error.log matching ERE
log_count() {
    grep -Ec -- "$1" "$dir/logs/error.log"
}

# the access log's lines (format stress) of requests served within
# [FROM, TO) ($msec seconds), each "time|status|upstream addresses|upstream
# statuses|prefix_route status|request time"
access_between() {
    awk -F'|' -v a="$1" -v b="$2" '$1 >= a && $1 < b' "$dir/logs/access.log"
}

now() {
    date +%s.%N | cut -c1-14
}

# ended_figures FROM TO: the requests of access.log (format stress) that
# ended within [FROM, TO) ($msec), "count rate/s p50 p99 max" of their
# request time, ms; ended_text: those figures in words
ended_figures() {
    awk -F'|' -v a="$1" -v b="$2" '$1 >= a && $1 < b { print $6 * 1000 }' \
        "$dir/logs/access.log" \
        | sort -n \
        | awk -v s="$(awk -v a="$1" -v b="$2" 'BEGIN { print b - a }')" '
            { t[++n] = $1 }
            END {
                if (n == 0) { print "0 0 0 0 0"; exit }
                printf "%d %.0f %d %d %d\n", n, n / s, t[int(n * 0.5) + 1],
                       t[int(n * 0.99) + 1], t[n]
            }'
}
ended_text() {
    set -- $1
    if [ "$1" = 0 ]; then
        echo "no requests"
    else
        echo "$1 requests ($2/s), request time p50 $3 ms, p99 $4 ms," \
             "max $5 ms"
    fi
}

# phase FROM TO: counts of the access log's requests within [FROM, TO)
# ($msec), in pc[]: pc[bN] answered 200 by backend N (the last address
# tried; backend N listens on ${backend_ports[N-1]}), pc[retried]
# answered after a failed attempt on another server, pc[from_bN] of those
# first tried on backend N, pc[failed] not answered 200 nor given up by the
# client, pc[abandoned] given up by the client (499: wrk ending, curl
# --max-time), pc[all]
declare -A pc=()
phase() {
    local k v
    pc=()
    while read -r k v; do
        pc[$k]=$v
    done < <(awk -F'|' -v a="$1" -v b="$2" -v ports="${backend_ports[*]}" '
        BEGIN {
            n = split(ports, p, " ")
            for (i = 1; i <= n; i++) {
                name["127.0.0.1:" p[i]] = "b" i
                c["b" i] = 0
                c["from_b" i] = 0
            }
            c["retried"] = c["failed"] = c["abandoned"] = c["all"] = 0
        }
        $1 >= a && $1 < b {
            c["all"]++
            m = split($3, u, ", ")
            if ($2 == 200) {
                c[u[m] in name ? name[u[m]] : "other"]++
                if (m > 1) {
                    c["retried"]++
                    if (u[1] in name) c["from_" name[u[1]]]++
                }
            } else if ($2 == 499) {
                c["abandoned"]++
            } else {
                c["failed"]++
            }
        }
        END { for (k in c) print k, c[k] }' "$dir/logs/access.log")
}

# the counts of the last phase, for a report
phase_line() {
    local i s=""
    for i in "${!backend_ports[@]}"; do
        s="$s b$((i + 1)) ${pc[b$((i + 1))]},"
    done
    echo "${pc[all]} requests, answered by$s retried ${pc[retried]}," \
         "failed ${pc[failed]}, abandoned by the client ${pc[abandoned]}"
}

# [error] lines of nginx about a backend that failed or went away: the
# failures proxy_next_upstream moves requests on from
UPSTREAM_ERRORS='\[error\] [0-9#]+: \*[0-9]+ (connect\(\) failed \(111: Connection refused\)|upstream prematurely closed connection|(recv|readv|send|writev|sendfile)\(\) failed \((32|104): [A-Za-z ]+\)) while (connecting to|sending request to|reading response header from|reading upstream)'

# curl_batch TAG N PARALLEL MAX_TIME SIZE [CURL_OPTIONS]: N POSTs of
# distinct chat bodies of SIZE bytes to /v1/chat/completions, PARALLEL at
# a time, each given up by curl after MAX_TIME s, in the background
# (batch_wait waits for all); each writes "curl_exit_code http_code" to $dir/batch-TAG
# (28, 000: given up)
curl_batch() {
    local tag=$1 n=$2 par=$3 mt=$4 size=$5 opts=${6:-}
    mkdir -p "$dir/bodies-$tag"
    perl -e 'my ($d, $tag, $n, $size) = @ARGV;
             for my $i (1 .. $n) {
                 my $t = "batch $tag $i:";
                 my $k = 0;
                 $t .= " w" . $k++ while length($t) < $size - 60;
                 open my $f, ">", "$d/$i" or die "$d/$i: $!";
                 print $f qq({"model":"m","messages":[{"role":"user","content":"$t"}]});
             }' "$dir/bodies-$tag" "$tag" "$n" "$size"
    : > "$dir/batch-$tag"
    seq "$n" | xargs -P "$par" -I{} sh -c '
        c=$(curl -s -o /dev/null --max-time "$0" $3 \
                 -H "Content-Type: application/json" \
                 --data-binary @"$1" -w "%{http_code}" "$2")
        echo "$? $c"' \
        "$mt" "$dir/bodies-$tag/{}" \
        "http://127.0.0.1:$port/v1/chat/completions" "$opts" \
        >> "$dir/batch-$tag" 2> /dev/null &
    batch_pids+=($!)
    bg[$!]="curl batch $tag"
}
batch_pids=()

# waits for the batches
batch_wait() {
    local p
    for p in "${batch_pids[@]}"; do
        wait "$p"
        unset "bg[$p]"
    done
    batch_pids=()
}

# batch_count TAG EXIT HTTP_CODE: requests of the batch that ended so
batch_count() {
    awk -v e="$2" -v c="$3" '$1 == e && $2 == c { n++ } END { print n + 0 }' \
        "$dir/batch-$1"
}
