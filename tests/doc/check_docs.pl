#!/usr/bin/perl
# The prose (README.md, docs/*.md, man/*.[0-9]) against the code:
#   - every HMEMREG_* name it mentions is a row of the settings table or a
#     name the sources use (a C constant, a test harness variable);
#   - a default it states for a setting is the table's default;
#   - its links between pages, and their #anchors, resolve;
#   - the repository paths and source file names it names exist.
#
#   check_docs.pl --top DIR --settings FILE [FILE...]
#
# FILE: `mr_cache_stat --env --json` (the table as the library has it).
# Without FILEs: README.md, docs/*.md and man/* under DIR. Prints one line
# per finding (file:line: what) and exits 1 if there is any, 0 otherwise.
use strict;
use warnings;
use File::Find;
use JSON::PP;

my ($top, $settings_json, @files);
while (@ARGV) {
	my $a = shift @ARGV;
	if ($a eq '--top') { $top = shift @ARGV }
	elsif ($a eq '--settings') { $settings_json = shift @ARGV }
	else { push @files, $a }
}
die "usage: check_docs.pl --top DIR --settings FILE [FILE...]\n" unless $top && $settings_json;
chdir $top or die "cd $top: $!\n";
@files = ('README.md', sort(glob('docs/*.md')), sort(glob('man/*.[0-9]'))) unless @files;

open my $jf, '<', $settings_json or die "$settings_json: $!\n";
my $table = decode_json(do { local $/; <$jf> });
my %setting = map { $_->{name} => $_ } @{$table->{settings}};
die "no settings in $settings_json\n" unless %setting;

# Names and file names the sources use (everything but the prose itself).
my (%code_name, %basename);
find({ no_chdir => 1, follow_fast => 1, follow_skip => 2, wanted => sub {
	my $p = $File::Find::name;
	if (-d $p) {
		$File::Find::prune = 1 if $p =~ m{^\./(\.git|build[^/]*|docs|man|\.gpu)$};
		return;
	}
	my $b = $p =~ s{.*/}{}r;
	$basename{$b} = 1;
	# Not the prose, and not this check's own mistakes (14-doc-settings.sh).
	return if $p eq './README.md' || $p =~ m{^\./tests/(doc/|host\.d/14-doc)} || -s $p > 4 << 20 || -B $p;
	open my $f, '<', $p or return;
	while (<$f>) { $code_name{$1} = 1 while /\b(HMEMREG_[A-Z0-9_]+)\b/g }
}}, '.');

my @findings;
sub finding { push @findings, "$_[0]:$_[1]: $_[2]" }

# Sizes and booleans as the library parses them; anything else as text.
sub canon {
	my ($v, $kind) = @_;
	$v = lc $v;
	$v =~ s/^\s+|\s+$//g;
	if ($kind eq 'bool') {
		return '1' if $v =~ /^(1|yes|y|true|on|enabled?)\b/;
		return '0' if $v =~ /^(0|no|n|false|off|disabled?|unset)\b/;
	}
	if ($v =~ /^(\d+)\s*([kmgt]?)(i?b)?\b/) {
		my %mul = ('' => 1, k => 1 << 10, m => 1 << 20, g => 1 << 30, t => 1 << 40);
		return $1 * $mul{$2};
	}
	$v =~ s/[.,:]+$//;
	return $v;
}

# Does a default the prose states agree with the table's?
sub agrees {
	my ($claim, $s) = @_;
	my $def = $s->{default} =~ s/\s*\(.*\)\s*$//r; # "0 (no limit)": 0
	my ($c, $d) = (canon($claim, $s->{kind}), canon($def, $s->{kind}));
	return 1 if $c eq $d;
	# A text default ("4 on tcp, else 1", "the engine's"): the claim begins with it.
	my $cl = lc($claim) =~ s/\s+/ /gr;
	return index($cl, lc $def) == 0;
}

# The prose of a file as sentences: [line, text] pairs, markup removed.
sub sentences {
	my ($file) = @_;
	open my $f, '<', $file or die "$file: $!\n";
	my @out;
	my ($buf, $start) = ('', 0);
	my $flush = sub { push @out, [$start, $buf] if $buf =~ /\S/; $buf = '' };
	my $man = $file =~ /\.[0-9]$/;
	while (my $l = <$f>) {
		chomp $l;
		if ($man) {
			if ($l =~ /^\.(TP|PP|SH|SS|TH|P|LP|IP|br|nf|fi)\b/) { $flush->(); next }
			$l =~ s/^\.[A-Z]{1,2}\s+//;
			$l =~ s/\\f[BIRP]//g;
			$l =~ s/\\-/-/g;
			$l =~ s/\\\(..//g;
			$l =~ s/"//g;
		} else {
			if ($l =~ /^\s*$/ || $l =~ /^(#|```|\|)/ || $l =~ /^\s*([-*]|\d+\.)\s/) { $flush->(); }
			next if $l =~ /^\|[-| ]+\|$/;
		}
		$start = $. if $buf eq '';
		$buf .= ' ' . $l;
		$flush->() if !$man && $l =~ /^(#|\|)/;
	}
	$flush->();
	# Split paragraphs at sentence ends.
	my @s;
	for my $p (@out) {
		my $t = $p->[1] =~ s/`//gr;
		push @s, [$p->[0], $_] for split /(?<=[.!?])\s+/, $t;
	}
	return @s;
}

# 1. Settings names and defaults.
for my $file (@files) {
	for my $sn (sentences($file)) {
		my ($line, $t) = @$sn;
		my @hits;
		push @hits, [$1, $-[1], $+[1]] while $t =~ /\b(HMEMREG_[A-Z0-9_]+)\b/g;
		for my $i (0 .. $#hits) {
			my ($name, $from, $to) = @{$hits[$i]};
			unless ($setting{$name}) {
				finding($file, $line, "$name is not a setting (mr_cache_stat --env) and no source names it")
					unless $code_name{$name};
				next;
			}
			my $s = $setting{$name};
			# What follows the name, up to the next name.
			my $end = $i < $#hits ? $hits[$i + 1][1] : length $t;
			my $after = substr($t, $to, $end - $to);
			my @claims;
			push @claims, $1 if $after =~ /^=(\S+?)[,;)]?\s+\(default\)/;
			push @claims, $1 if $after =~ /\bdefaults?(?:\s+is|\s+to|:)?\s+([^\s(,;)][^,;)]*)/i;
			push @claims, $1 if $after =~ /(?:^|[\s(])([\w'.]+)\s+\(default\)/;
			push @claims, $1 if $after =~ /(?:^|[\s(])([\w'.]+)\s+by default\b/;
			for my $c (@claims) {
				# "the engine's default without a completion": not a value.
				next if $c =~ /^(the|a|an)$/i || $c =~ /^(without|when|where|if|for|of|in|from|with|and|or|but|that|which|unless|values?|settings?)\b/i;
				finding($file, $line, "$name: the prose says the default is '$c', the settings table '$s->{default}'")
					unless agrees($c, $s);
			}
		}
	}
}

# 2. Links, anchors, paths and file names (Markdown pages).
sub slug {
	my $h = lc shift;
	$h =~ s/`//g;
	$h =~ s/[^\w\- ]//g;
	$h =~ s/ /-/g;
	return $h;
}
my %anchors;
sub anchors_of {
	my ($file) = @_;
	return $anchors{$file} if $anchors{$file};
	my %a;
	if (open my $f, '<', $file) {
		my $fence = 0;
		while (<$f>) {
			$fence = !$fence if /^```/;
			$a{slug($1)} = 1 if !$fence && /^#+\s+(.*?)\s*$/;
		}
	}
	return $anchors{$file} = \%a;
}
my $roots = qr{(?:kmod|userlib|plugins|tools|tests|softroce|cuda-driver|udev|modprobe\.d|debian|docs|man)};
for my $file (@files) {
	open my $f, '<', $file or die "$file: $!\n";
	my $dir = $file =~ m{/} ? $file =~ s{/[^/]*$}{}r : '.';
	my ($fence, $n) = (0, 0);
	while (my $l = <$f>) {
		$n++;
		$fence = !$fence if $l =~ /^```/;
		if ($file =~ /\.md$/) {
			while ($l =~ /\]\(([^)\s]+)\)/g) {
				my $target = $1;
				next if $target =~ m{^[a-z]+://};
				my ($path, $anchor) = split /#/, $target, 2;
				my $p = $path eq '' ? $file : "$dir/$path";
				$p =~ s{(^|/)\./}{$1}g;
				1 while $p =~ s{[^/]+/\.\./}{};
				if (!-e $p) { finding($file, $n, "link to $target: no $p"); next }
				finding($file, $n, "link to $target: no heading with that anchor in $p")
					if defined $anchor && $p =~ /\.md$/ && !anchors_of($p)->{$anchor};
			}
		}
		next if $fence;
		my @tokens = $file =~ /\.md$/ ? ($l =~ /`([^`\s]+)`/g) : ($l =~ /(\S+)/g);
		for my $tok (@tokens) {
			$tok =~ s/\\f[BIRP]//g;
			$tok =~ s/\\-/-/g;
			$tok =~ s/^[("]+|[),.;:"]+$//g;
			if ($tok =~ m{^$roots/[\w./+-]*$} && $tok !~ /\.\.\./) {
				my $p = $tok =~ s{:\d+(-\d+)?$}{}r;
				# A program built from a source of that name counts.
				finding($file, $n, "names $tok, which does not exist")
					unless -e $p || grep { -e "$p.$_" } qw(c cpp sh);
			} elsif ($file =~ /\.md$/ && $tok =~ /^[\w-]+\.(c|h|hpp|cpp|inl|sh|pl|py|patch)$/) {
				finding($file, $n, "names $tok, which no file of the tree is") unless $basename{$tok};
			}
		}
		# Man pages of the project: NAME(N) is man/NAME.N.
		while ($l =~ /\b(hmemreg|mr_cache_stat|hmemreg_bench)\s?\((\d)\)/g) {
			finding($file, $n, "names $1($2): no man/$1.$2") unless -e "man/$1.$2";
		}
	}
}

print "$_\n" for @findings;
exit(@findings ? 1 : 0);
