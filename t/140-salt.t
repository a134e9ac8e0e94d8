# prefix_route_salt: a salt nginx knows (here the query argument "tenant",
# standing for $remote_user, an mTLS subject or an auth_request header)
# keys the index apart per value.  Two identities sending the same prompt
# do not share its blocks, one identity shares with itself; the body's
# cache_salt counts too (the default) or is ignored (cache_salt=off); an
# empty value keys a request by its body alone.  Each request's
# X-Prefix-Route header says its status, match and length.
use Test::Nginx::Socket 'no_plan';
use FindBin;
use lib $FindBin::Bin;
use PrefixRoute qw(:DEFAULT chat sys user text);

# upstream llm over the 4 backends with "prefix_route_salt $salt", and
# "prefix_route $args" if given
sub salted {
    my ($salt, $args) = @_;
    my $u = defined $args ? ::upstream($args, 1 .. 4) : ::upstream(1 .. 4);
    $u =~ s/(    prefix_route [^\n]*\n)/$1    prefix_route_salt $salt;\n/;
    return $u . ::backends(1 .. 4);
}

# a chat request of one long user message, for tenant $t (none: undef),
# with the body's cache_salt $s (none: undef)
sub ask {
    my ($t, $s) = @_;
    my $body = '{"model":"m",'
             . (defined $s ? "\"cache_salt\":\"$s\"," : "")
             . '"messages":[{"role":"user","content":"'
             . ::text("Salted question", 600) . '"}]}';
    return "POST /v1/chat/completions" . (defined $t ? "?tenant=$t" : "")
         . "\n$body";
}

# a tenant flood that repeats each prompt, against a victim: the victim
# sends its prompt twice, "mallory" 80 prompts of 2 KiB twice each into a
# 128k zone, then the victim its prompt again; the victim's headers
sub flood {
    my $victim = "POST /v1/chat/completions?tenant=alice\n"
               . '{"model":"m","messages":[{"role":"user","content":"'
               . ::text("Victim prompt", 2048) . '"}]}';
    my @r = ($victim, $victim);
    for my $i (1 .. 80) {
        my $q = "POST /v1/chat/completions?tenant=mallory\n"
              . '{"model":"m","messages":[{"role":"user","content":"'
              . ::text("Flood $i", 2048) . '"}]}';
        push @r, $q, $q;
    }
    return [@r, $victim];
}

# the headers of flood(): the victim's last request as given
sub flood_headers {
    my ($last) = @_;
    return [map { "X-Prefix-Route: $_" } "MISS 0 \\d+", "HIT [1-9]\\d* \\d+",
                                          ("\\w+ \\d+ \\d+") x 160, $last];
}

our $Miss = qr/^X-Prefix-Route: MISS 0 \d+$/;
our $Hit = qr/^X-Prefix-Route: HIT [1-9]\d* \d+$/;

add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value(main_config => $LoadModule) unless defined $block->main_config;
    $block->set_value(config => ::proxy()) unless defined $block->config;
    $block->set_value(no_error_log => $NoErrorLog) unless defined $block->no_error_log
                                                         || defined $block->must_die;
    return $block;
});

no_shuffle();
run_tests();

__DATA__

=== TEST 1: two identities sending the same prompt are kept apart, and each shares with itself
--- http_config eval: ::salted('$arg_tenant')
--- request eval
[::ask("alice"), ::ask("alice"), ::ask("bob"), ::ask("bob"), ::ask("alice")]
--- response_headers_like eval
[map { "X-Prefix-Route: $_" } "MISS 0 \\d+", "HIT [1-9]\\d* \\d+",
                              "MISS 0 \\d+", "HIT [1-9]\\d* \\d+",
                              "HIT [1-9]\\d* \\d+"]



=== TEST 2: by default the body's cache_salt counts too, as the engine keys its cache by it: an identity's two salts are kept apart
--- http_config eval: ::salted('$arg_tenant')
--- request eval
[::ask("alice", "x"), ::ask("alice", "y"), ::ask("alice", "x"),
 ::ask("bob", "x"), ::ask("alice")]
--- response_headers_like eval
[map { "X-Prefix-Route: $_" } "MISS 0 \\d+", "MISS 0 \\d+",
                              "HIT [1-9]\\d* \\d+", "MISS 0 \\d+",
                              "MISS 0 \\d+"]



=== TEST 3: an empty value keys a request by its body alone, as without the directive: the body's cache_salt then keeps apart, and no identity shares with it
--- http_config eval: ::salted('$arg_tenant')
--- request eval
[::ask(undef, "x"), ::ask(undef, "x"), ::ask(undef, "y"), ::ask(undef),
 ::ask("x"), ::ask(undef)]
--- response_headers_like eval
[map { "X-Prefix-Route: $_" } "MISS 0 \\d+", "HIT [1-9]\\d* \\d+",
                              "MISS 0 \\d+", "MISS 0 \\d+",
                              "MISS 0 \\d+", "HIT [1-9]\\d* \\d+"]



=== TEST 4: cache_salt=off: nginx's salt stands in place of the body's cache_salt: one identity shares whatever cache_salt its client claims
--- http_config eval: ::salted('$arg_tenant cache_salt=off')
--- request eval
[::ask("alice", "x"), ::ask("alice", "y"), ::ask("alice"), ::ask("bob", "x")]
--- response_headers_like eval
[map { "X-Prefix-Route: $_" } "MISS 0 \\d+", "HIT [1-9]\\d* \\d+",
                              "HIT [1-9]\\d* \\d+", "MISS 0 \\d+"]



=== TEST 5: the salt may join several variables and text, as any nginx value
--- http_config eval: ::salted('org-$http_x_org:$arg_tenant')
--- more_headers
X-Org: acme
--- request eval
[::ask("alice"), ::ask("alice"), ::ask("bob")]
--- response_headers_like eval
[map { "X-Prefix-Route: $_" } "MISS 0 \\d+", "HIT [1-9]\\d* \\d+",
                              "MISS 0 \\d+"]



=== TEST 6: prefix_route_salt without prefix_route in the upstream
--- http_config
upstream llm {
    prefix_route_salt $remote_user;
    server 127.0.0.1:$TEST_NGINX_RAND_PORT_1;
}
--- must_die
--- error_log
"prefix_route_salt" needs "prefix_route" in upstream "llm"



=== TEST 7: prefix_route_salt given twice
--- http_config eval
my $u = ::upstream(1);
$u =~ s/(    prefix_route [^\n]*\n)/$1    prefix_route_salt \$remote_user;\n    prefix_route_salt \$arg_tenant;\n/;
$u
--- must_die
--- error_log
"prefix_route_salt" directive is duplicate



=== TEST 8: prefix_route_salt with an unknown parameter
--- http_config eval: ::salted('$remote_user cache_salt=yes')
--- must_die
--- error_log
invalid parameter "cache_salt=yes", it must be "cache_salt=on" or "cache_salt=off"



=== TEST 9: prefix_route_salt outside an upstream
--- http_config
prefix_route_salt $remote_user;
--- must_die
--- error_log
"prefix_route_salt" directive is not allowed here



=== TEST 10: tenant_share=50%: a tenant repeating a flood of prompts cannot take another tenant's protected prefix from a full zone
--- http_config eval: ::salted('$arg_tenant', 'zone=llm:128k tenant_share=50%')
--- request eval: ::flood()
--- response_headers_like eval: ::flood_headers('HIT [1-9]\d* \d+')



=== TEST 11: without tenant_share the same flood takes it (the zone forgets the victim's prompt)
--- http_config eval: ::salted('$arg_tenant', 'zone=llm:128k')
--- request eval: ::flood()
--- response_headers_like eval: ::flood_headers('MISS 0 \d+')
