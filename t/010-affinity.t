# Routing properties of prefix_route over a fleet of 4 backends: a shared
# system prompt sticks to one backend, a hot prefix spills under concurrent
# load, a global preamble does not pull every conversation to one backend,
# new prompts spread over idle backends with a hash tie-break, and
# conversations stay on the backend that holds them.
#
# Each backend answers with its name.  The proxy location logs one line per
# request to logs/routes.log, "backend status match length" (the backend
# name, $prefix_route_status, $prefix_route_match, $prefix_route_length),
# and a final GET /routes returns that log, so that one pattern can check
# which backend served each request of a block.  Prompt lengths are those of
# the canonical prompt of docs/design.md: a message with a string content is
# RS, its role, US, "c", its text (see canon_len() below).
use Test::Nginx::Socket 'no_plan';
use FindBin;
use lib $FindBin::Bin;
use PrefixRoute qw(:DEFAULT :prompts);

no_shuffle();

# http_config: upstream "llm" with prefix_route over the 4 backends b1..b4,
# the routes log's map of their names, and the backends; with sleep => $s,
# a backend answers after $s seconds
sub fleet {
    my (%o) = @_;
    return upstream(1 .. 4) . routes(1 .. 4) . backends({%o}, 1 .. 4);
}

our $Proxy = proxy(routes => 1);

# every block runs with the configuration above (the echo module for the
# slow backends and the concurrent subrequests of /fan), unless it has its
# own, and checks that error.log has no [error], [alert] or [crit] line
add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value(main_config => $LoadModule . $LoadEcho) unless defined $block->main_config;
    $block->set_value(http_config => fleet()) unless defined $block->http_config;
    $block->set_value(config => $Proxy) unless defined $block->config;
    $block->set_value(no_error_log => $NoErrorLog) unless defined $block->no_error_log;
    return $block;
});

# http_config of four pairs of upstreams over the 4 backends, llm_a1..4
# and llm_b1..4, each its own zone, with prefix_route parameters $params:
# two nginx instances A and B, four times; and the location that sends
# /llm_a1/... to llm_a1 and so on
sub instance_fleet {
    my ($params) = @_;
    $params = $params ? " $params" : "";
    return CORE::join("", map { upstream("zone=llm_a$_:1m$params", 1 .. 4)
                                . upstream("zone=llm_b$_:1m$params", 1 .. 4) }
                              1 .. 4)
           . routes(1 .. 4) . backends(1 .. 4);
}

our $InstanceProxy = proxy(path => '~ ^/(?<fleet>llm_[ab][1-4])/',
                           to => '$fleet', routes => 1);

# for pair i of the upstreams llm_a1..4 and llm_b1..4 (two instances A
# and B): P to A, then E (P's system prompt, another question) and P to B;
# single-turn prompts of pairs 1 to 4, then GET /routes
sub instance_pairs {
    my @r;
    for my $i (1 .. 4) {
        my $s = sys(text("Rules $i", 1000));
        my @t = map { chat([$s, user(text("$_$i question", 300))]) }
                    "P", "E", "P";
        $t[0] =~ s{^POST /v1/}{POST /llm_a$i/v1/};
        $t[$_] =~ s{^POST /v1/}{POST /llm_b$i/v1/} for 1, 2;
        push @r, @t;
    }
    return [@r, "GET /routes"];
}

# length of the canonical prompt of messages with string contents:
# RS role US "c" content, per message
sub canon_len {
    my $n = 0;
    $n += 1 + length($_->{role}) + 2 + length($_->{content}) for @_;
    return $n;
}

# a --- response_body_like pattern for GET /routes that matches when
# $check->(@backends) is true, @backends being the first word of each
# line (the backend of each request, in the order they were logged); on a
# mismatch it prints the number of requests each backend served
sub routes_where {
    my ($what, $check) = @_;
    return qr/\A(.*)\z(?(?{ routes_check($what, $check, $^N) })|(*FAIL))/s;
}

sub routes_check {
    my ($what, $check, $log) = @_;
    my @b = map { (split / /)[0] } split /\n/, $log;
    return 1 if $check->(@b);
    my %n;
    $n{$_}++ for @b;
    Test::More::diag("routes do not satisfy \"$what\": "
                     . join(", ", map { "$_ served $n{$_}" } sort keys %n));
    return 0;
}

sub count {
    my %n;
    $n{$_}++ for @_;
    return \%n;
}

sub max_count { my $n = count(@_); my ($m) = sort { $b <=> $a } values %$n; $m // 0 }

# TEST 8: 4 users x 4 turns, interleaved (user 1 turn 1, user 2 turn 1, ...
# user 1 turn 2, ...); a turn is the whole history plus a new question
sub four_users {
    my @turns;
    for my $t (1 .. 4) {
        for my $u (1 .. 4) {
            my @m = (sys("You help user $u. " . text("rules$u", 300)));
            for my $k (1 .. $t) {
                push @m, user(text("User $u question $k", 300));
                push @m, asst(text("Answer $k to user $u", 400)) if $k < $t;
            }
            push @turns, \@m;
        }
    }
    return @turns;
}

# TEST 9: the same with a shared 1 KB preamble instead of one system prompt
# per user, so that the first users' conversations stack on one backend
sub four_users_preamble {
    my @turns;
    for my $t (1 .. 4) {
        for my $u (1 .. 4) {
            my @m = (sys(text("Company policy", 1015)));
            for my $k (1 .. $t) {
                push @m, user(text("User $u question $k", 1000));
                push @m, asst(text("Answer $k to user $u", 400)) if $k < $t;
            }
            push @turns, \@m;
        }
    }
    return @turns;
}

# TEST 10: conversations A and B share a system prompt and a first question;
# turn 1 (the shared start), then A2, B2, A3, B3, A4, B4, where turn N of
# X is the start plus N - 1 rounds of X's answers and questions
sub two_branches {
    my @start = (sys(text("Shared rules", 300)), user(text("First question", 237)));
    my $turn = sub {
        my ($x, $n) = @_;
        return [@start, map { (asst(text("$x answer $_", 600)),
                               user(text("$x question $_", 600))) } 2 .. $n];
    };
    return ([@start], map { ($turn->("A", $_), $turn->("B", $_)) } 2 .. 4);
}

run_tests();

__DATA__

=== TEST 1: 10 requests sharing a 2 KB system prompt go to one backend, HIT on the system prompt's 32 blocks from the second on
--- request eval
# RS "system" US "c" and 2039 bytes: 2048 bytes, 32 blocks
my $system = ::text("You are a support agent", 2039);
my @q = map { "Question $_: " . ::text("topic$_", 20 + 7 * $_) } 1 .. 10;
[(map { ::chat([::sys($system), ::user($_)]) } @q), "GET /routes"]
--- response_headers eval
my @q = map { "Question $_: " . ::text("topic$_", 20 + 7 * $_) } 1 .. 10;
my @len = map { 2048 + 7 + length } @q;
["X-Prefix-Route: MISS 0 $len[0]",
 (map { "X-Prefix-Route: HIT 2048 $_" } @len[1 .. 9]),
 ""]
--- response_body_like eval
[("^b[1-4]\n\$") x 10,
 qr/\A(b[1-4]) MISS 0 \d+\n(?:\1 HIT 2048 \d+\n){9}\z/]



=== TEST 2: a hot prefix under 12 concurrent requests spills onto the other backends instead of drowning its holder
# The first request puts the 2 KB system prompt on one backend; then /fan
# sends 12 requests with that system prompt at once, to backends that
# answer after 0.5 s, so all 12 are placed while all are in flight.
# Prompt: 2048 (system) + 7 (RS "user" US "c") + 53 (question) = 2108 bytes.
--- http_config eval: ::fleet(sleep => 0.5)
--- config eval
my $system = ::text("You are a support agent", 2039);
$::Proxy . ::fan("/fan", map {
    ::chat_body([::sys($system), ::user(sprintf("Question %02d: ", $_) . ::text("q$_", 40))])
} 1 .. 12)
--- request eval
my $system = ::text("You are a support agent", 2039);
[::chat([::sys($system), ::user("Question 00: " . ::text("q0", 40))]),
 "GET /fan",
 "GET /routes"]
--- response_headers eval
["X-Prefix-Route: MISS 0 2108", "", ""]
--- response_body_like eval
["^b[1-4]\n\$",
 # the subrequests' answers, in the order they were sent
 ::routes_where("12 concurrent requests: more than one backend, none serves more than half",
                sub { @_ == 12 && keys %{ ::count(@_) } > 1 && ::max_count(@_) <= 6 }),
 # the warm-up, then 12 lines in the order they finished: the prompt was
 # read from every subrequest (no BYPASS), and load beat affinity (SPILL)
 qr/\A(b[1-4]) MISS 0 2108\n(?=[\s\S]*^b[1-4] SPILL 0 2108$)(?:b[1-4] (?:HIT 2048|SPILL 0) 2108\n){12}\z/m]
--- timeout: 5



=== TEST 3: a held prefix under low load (2 concurrent requests) stays on its holder
# A 3 KB system prompt (48 blocks): one request in flight on the holder
# (its uncached tail plus the fixed cost of a request, about 2.1 KB of
# work) is worth less than the prefix, so the second concurrent request
# stays.  Prompt: 3072 (system) + 7 + 53 = 3132 bytes.
--- http_config eval: ::fleet(sleep => 0.5)
--- config eval
my $system = ::text("You are a support agent", 3063);
$::Proxy . ::fan("/fan", map {
    ::chat_body([::sys($system), ::user(sprintf("Question %02d: ", $_) . ::text("q$_", 40))])
} 1 .. 2)
--- request eval
my $system = ::text("You are a support agent", 3063);
[::chat([::sys($system), ::user("Question 00: " . ::text("q0", 40))]),
 "GET /fan",
 "GET /routes"]
--- response_headers eval
["X-Prefix-Route: MISS 0 3132", "", ""]
--- response_body_like eval
["^b[1-4]\n\$",
 "^(b[1-4])\n\\1\n\$",
 qr/\A(b[1-4]) MISS 0 3132\n\1 HIT 3072 3132\n\1 HIT 3072 3132\n\z/]
--- timeout: 5



=== TEST 4: 12 conversations behind a shared 1 KB preamble, one after another on an idle fleet, go where the preamble is: all HIT it
# Nothing is queued anywhere: the backend that holds the preamble starts
# each of them soonest, 1 KB of prefill ahead of the others (under load,
# queued work and max_load spread them: TEST 2, and bench/ "hotspot").
--- request eval
# RS "system" US "c" and 1015 bytes: 1024 bytes, 16 blocks
my $preamble = ::text("Company policy", 1015);
[(map { ::chat([::sys($preamble), ::user(::text("User $_ asks", 400))]) } 1 .. 12),
 "GET /routes"]
--- response_headers_like eval
# 1024 + RS "user" US "c" + 400
["X-Prefix-Route: MISS 0 1431",
 ("X-Prefix-Route: HIT 1024 1431") x 11,
 ""]
--- response_body_like eval
[("^b[1-4]\n\$") x 12,
 ::routes_where("all on the backend of the first",
                sub { @_ == 12 && keys %{ ::count(@_) } == 1 })]



=== TEST 5: 8 distinct new prompts sent one after another spread over 4 idle backends: 3 or more used, none serves more than 3
# On an idle fleet every estimate is the same: each goes to the highest
# ranked backend whose share of the index is at most max_load (150%) of
# the mean.  A backend with j of t prompts so far takes another only if
# j <= 1.5 t / 4: the first three go to three backends, none gets a
# fourth before the ninth.
--- request eval
[(map { ::chat([::user(::text("Prompt $_", 500))]) } 1 .. 8), "GET /routes"]
--- response_headers eval
[("X-Prefix-Route: MISS 0 507") x 8, ""]
--- response_body_like eval
[("^b[1-4]\n\$") x 8,
 ::routes_where("3 backends or more, none more than 3 of 8",
                sub { @_ == 8 && keys %{ ::count(@_) } >= 3
                      && ::max_count(@_) <= 3 })]



=== TEST 6: on two fresh instances with the same servers, the same first prompt lands on the same backend
# Two upstreams with the same 4 servers and their own zones stand for two
# nginx instances started with the same configuration.
--- http_config eval
::upstream("zone=llm_a:1m", 1 .. 4) . ::upstream("zone=llm_b:1m", 1 .. 4)
. ::routes(1 .. 4) . ::backends(1 .. 4)
--- config eval
::proxy(path => '~ ^/(?<fleet>llm_[ab])/', to => '$fleet', routes => 1)
--- request eval
my $p = ::chat([::user(::text("Prompt A", 500))]);
(my $a = $p) =~ s{^POST /v1/}{POST /llm_a/v1/};
(my $b = $p) =~ s{^POST /v1/}{POST /llm_b/v1/};
[$a, $b, "GET /routes"]
--- response_headers eval
["X-Prefix-Route: MISS 0 507", "X-Prefix-Route: MISS 0 507", ""]
--- response_body_like eval
["^b[1-4]\n\$", "^b[1-4]\n\$",
 qr/\A(b[1-4]) MISS 0 507\n\1 MISS 0 507\n\z/]



=== TEST 7: on fresh instances, different first prompts land on different backends
# 12 fresh upstreams with the same 4 servers, each receiving one different
# prompt: the tie between idle backends is broken by a hash of the prompt,
# so they do not all land on one backend (all 12 on one: p = 4^-11).
--- http_config eval
(CORE::join "", map { ::upstream("zone=fresh$_:128k", 1 .. 4) } 1 .. 12)
. ::routes(1 .. 4) . ::backends(1 .. 4)
--- config eval
::proxy(path => '~ ^/(?<fleet>fresh\d+)/', to => '$fleet', routes => 1)
--- request eval
[(map { my $r = ::chat([::user(::text("Prompt $_", 500))]);
        $r =~ s{^POST /v1/}{POST /fresh$_/v1/}; $r } 1 .. 12),
 "GET /routes"]
--- response_headers eval
[("X-Prefix-Route: MISS 0 507") x 12, ""]
--- response_body_like eval
[("^b[1-4]\n\$") x 12,
 ::routes_where("12 fresh instances, 12 prompts: more than one backend",
                sub { @_ == 12 && keys %{ ::count(@_) } > 1 })]



=== TEST 8: 4 users x 4 turns, interleaved: turn 1s on 3 backends or more, each user's turns stay on the backend of its turn 1, HIT on the whole previous turn
--- request eval
[(map { ::chat($_) } ::four_users()), "GET /routes"]
--- response_headers eval
my @turns = ::four_users();
[(map { "X-Prefix-Route: MISS 0 " . ::canon_len(@{ $turns[$_] }) } 0 .. 3),
 # turn t of a user holds its turn t - 1, 4 requests earlier, in full blocks
 (map { "X-Prefix-Route: HIT " . ::full_blocks(::canon_len(@{ $turns[$_ - 4] }))
        . " " . ::canon_len(@{ $turns[$_] }) } 4 .. 15),
 ""]
--- response_body_like eval
[("^b[1-4]\n\$") x 16,
 ::routes_where("turn 1s on 3 backends or more; every turn on its turn 1's backend",
                sub { my @b = @_;
                      @b == 16 && keys %{ ::count(@b[0 .. 3]) } >= 3
                      && !grep { $b[$_] ne $b[$_ % 4] } 4 .. 15 })]



=== TEST 9: conversations behind a shared preamble stay on their backend, HIT on their whole previous turn
# 4 users behind a shared 1 KB preamble, one request at a time: the first
# turns go where the preamble is (it starts them soonest), and every later
# turn stays with its own conversation.
--- request eval
[(map { ::chat($_) } ::four_users_preamble()), "GET /routes"]
--- response_headers_like eval
my @turns = ::four_users_preamble();
["X-Prefix-Route: MISS 0 " . ::canon_len(@{ $turns[0] }),
 (map { "X-Prefix-Route: (?:HIT 1024|SPILL 0) " . ::canon_len(@{ $turns[$_] }) } 1 .. 3),
 (map { "X-Prefix-Route: HIT " . ::full_blocks(::canon_len(@{ $turns[$_ - 4] }))
        . " " . ::canon_len(@{ $turns[$_] }) } 4 .. 15),
 ""]
--- response_body_like eval
[("^b[1-4]\n\$") x 16,
 ::routes_where("every turn on its turn 1's backend",
                sub { my @b = @_;
                      @b == 16 && !grep { $b[$_] ne $b[$_ % 4] } 4 .. 15 })]



=== TEST 10: two conversations that diverge after a shared beginning each continue on one backend, HIT on their own whole previous turn
# A and B share a system prompt and a first question (553 bytes); A goes
# on (turn 2), then B branches off with another answer and question.  B2
# goes to the backend of A, which holds its first 512 bytes (it starts
# soonest there), or elsewhere if that one were busy.  Then A and B
# alternate, each on its own backend, HIT on its whole previous turn.
--- request eval
[(map { ::chat($_) } ::two_branches()), "GET /routes"]
--- response_headers_like eval
my @len = map { ::canon_len(@$_) } ::two_branches();
# turn 1, A2, B2, A3, B3, A4, B4
["X-Prefix-Route: MISS 0 $len[0]",
 "X-Prefix-Route: HIT " . ::full_blocks($len[0]) . " $len[1]",
 "X-Prefix-Route: (?:HIT 512|SPILL 0) $len[2]",
 "X-Prefix-Route: HIT " . ::full_blocks($len[1]) . " $len[3]",
 "X-Prefix-Route: HIT " . ::full_blocks($len[2]) . " $len[4]",
 "X-Prefix-Route: HIT " . ::full_blocks($len[3]) . " $len[5]",
 "X-Prefix-Route: HIT " . ::full_blocks($len[4]) . " $len[6]",
 ""]
--- response_body_like eval
[("^b[1-4]\n\$") x 7,
 qr/\A(b[1-4])\ MISS\ [^\n]*\n \1\ HIT\ [^\n]*\n (b[1-4])\ \S+\ [^\n]*\n
      \1\ HIT\ [^\n]*\n \2\ HIT\ [^\n]*\n \1\ HIT\ [^\n]*\n \2\ HIT\ [^\n]*\n\z/x]



=== TEST 11: a later turn of a conversation another instance placed goes where its first turn went, although this instance knows its system prompt elsewhere
# Pairs of upstreams over the same servers, each with its own zone, stand
# for two nginx instances A and B; four pairs, four conversations.  A
# places conversation C (turn 1).  B has never seen C, but has placed E,
# which has C's system prompt, where E's own first turn ranks.  C's turn 2
# reaches B: B's index knows only the system prompt, yet C goes where A
# put it.  Where E's and C's first turns rank apart (the ranks hash the
# servers' addresses, so the pairs that do depend on the ports), B
# without the guess would send C after its system prompt instead.
--- http_config eval: ::instance_fleet("")
--- config eval: $::InstanceProxy
--- request eval
my @r;
for my $i (1 .. 4) {
    my $s = ::sys(::text("Rules $i", 1000));
    my @c1 = ($s, ::user(::text("C$i question 1", 300)));
    my @c2 = (@c1, ::asst(::text("C$i answer 1", 400)),
              ::user(::text("C$i question 2", 300)));
    my @e1 = ($s, ::user(::text("E$i question 1", 300)));
    my @t = map { ::chat($_) } \@c1, \@e1, \@c2;
    $t[0] =~ s{^POST /v1/}{POST /llm_a$i/v1/};
    $t[$_] =~ s{^POST /v1/}{POST /llm_b$i/v1/} for 1, 2;
    push @r, @t;
}
[@r, "GET /routes"]
--- response_body_like eval
[("^b[1-4]\n\$") x 12,
 qr/\A(?:(b[1-4])\ MISS\ [^\n]*\n b[1-4]\ MISS\ [^\n]*\n
         \g{-1}\ [^\n]*\n){4}\z/x]



=== TEST 12: with instances=2, a prompt without answers that this instance never saw goes where the other instance put it (the top rank of its first turn), although this instance knows its system prompt elsewhere
# As TEST 11, with single-turn prompts: A places P; B places E, which has
# P's system prompt; then P reaches B.  Told that another instance exists,
# B expects P where its first turn ranks first, which is where A put it.
--- http_config eval: ::instance_fleet("instances=2")
--- config eval: $::InstanceProxy
--- request eval: ::instance_pairs()
--- response_body_like eval
[("^b[1-4]\n\$") x 12,
 qr/\A(?:(b[1-4])\ MISS\ [^\n]*\n b[1-4]\ MISS\ [^\n]*\n
         \g{-1}\ (?:SPILL|HIT)\ [^\n]*\n){4}\z/x]



=== TEST 13: with one instance (the default), the same prompt follows the system prompt this instance knows
--- http_config eval: ::instance_fleet("")
--- config eval: $::InstanceProxy
--- request eval: ::instance_pairs()
--- response_body_like eval
[("^b[1-4]\n\$") x 12,
 qr/\A(?:b[1-4]\ MISS\ [^\n]*\n (b[1-4])\ MISS\ [^\n]*\n
         \g{-1}\ HIT\ [^\n]*\n){4}\z/x]
