#!/usr/bin/perl
# Reads the JSON of prefix_route_status on stdin and prints figures of the
# upstream UPSTREAM, for t/stress/lib.sh:
#
#   status.pl UPSTREAM FIELD...   the values, one a line: a member of the
#                                 upstream (blocks, holders, evictions,
#                                 zone_used...), requests.HIT (.MISS...),
#                                 or requests: the sum over the statuses
#   status.pl UPSTREAM peers      a line a peer: name state inflight
#                                 queued_bytes blocks requests hits
#
# Exits 1 when the input is not JSON or has no such upstream.

use strict;
use warnings;
use JSON::PP ();

my ($name, @fields) = @ARGV;
my $json = do { local $/; <STDIN> } // '';
my $data = eval { JSON::PP->new->decode($json) }
    or do { print STDERR "status: not JSON\n"; exit 1 };
my ($u) = grep { $_->{name} eq $name } @{ $data->{upstreams} || [] }
    or do { print STDERR "status: no upstream $name\n"; exit 1 };

if (@fields == 1 && $fields[0] eq 'peers') {
    for my $p (@{ $u->{peers} }) {
        print join(' ', map { $p->{$_} }
                   qw(name state inflight queued_bytes blocks requests hits)),
              "\n";
    }
    exit 0;
}

for my $f (@fields) {
    my $v;
    if ($f eq 'requests') {
        $v = 0;
        $v += $_ for values %{ $u->{requests} };
    } elsif ($f =~ /^requests\.(\w+)\z/) {
        $v = $u->{requests}{$1};
    } else {
        $v = $u->{$f};
    }
    defined $v && !ref $v
        or do { print STDERR "status: no figure $f\n"; exit 1 };
    print "$v\n";
}
