import { NO_SPACE_EXIT } from "./hop.js";
import { WRITE_ALL_PERL } from "./perl-snippets.js";

/**
 * The one program `models sync` runs to read or write a node's Hugging Face cache. A recipe's
 * container gets that cache as a mount, and runs as root: an image, `--trust-remote-code` model
 * code or an engine exploit can put anything there, symbolic links included. So every path below
 * the cache's root (the HF_HOME mount's host side, named by the recipe or the default, and so
 * trusted) is checked on the node right before it is used: each component's lstat, none a
 * symbolic link, each but the last a directory; names with `.`/`..`/empty parts, a leading `/`
 * or control characters are refused; files open with O_NOFOLLOW (open(2): "If the trailing
 * component (i.e., basename) of pathname is a symbolic link, then the open fails"), new ones also
 * with O_EXCL. A refusal is exit 9, `unsafe: WHY` on stderr (names made printable and bounded).
 *
 * What it does not stop: a container that keeps running while the sync runs and swaps a checked
 * directory for a link in the instant between the check and the write (perl-base has no openat).
 *
 * Perl for the same reason as the hop (hop.ts): perl-base is Essential in Debian and Ubuntu, and
 * this uses only its core (Fcntl, POSIX, Errno).
 *
 * Operations, `perl -e CACHE_PERL -- OP ROOT ARGS...` (every REL relative to ROOT):
 *   inspect REPO PIN   what the node holds of the repo (see the lines in plan/weights.ts's
 *                      parseInspection): the ref file read (refs/PIN, else refs/main), and every
 *                      entry of its snapshot, names and link targets as hex, never followed
 *   prepare DIR... -- FILE...  makes the directories, removes the files (never through a link)
 *   state BLOBS SUFFIX NAME... `NAME SIZE PARTIAL_SIZE` of each blob (-1: absent)
 *   check REL...       each absent or a regular file
 *   append REL         stdin appended to REL (created 0644); a full disk exits NO_SPACE_EXIT (hop.ts)
 *   read REL OFFSET    REL from byte OFFSET on, to stdout
 *   hash REL...        the SHA-256 of each, one line each
 *   link SNAP PATH TARGET...   symbolic links SNAP/PATH -> TARGET, made anew
 *   ref REL VALUE      REL written anew with VALUE
 */
export const CACHE_PERL = String.raw`
use strict; use warnings; use Fcntl qw(O_RDONLY O_WRONLY O_CREAT O_APPEND O_EXCL O_NOFOLLOW SEEK_SET); use POSIX (); use Errno ();
my ($op, $root, @a) = @ARGV;
sub said { my $s = join(' ', @_); $s =~ s/[^\x20-\x7e]/?/g; return substr($s, 0, 300); }
sub refuse { print STDERR 'unsafe: ', said(@_), "\n"; exit 9; }
# A write that failed: ENOSPC (the disk is full) has an exit status of its own, the rest exit 1.
sub failed { my $full = $!{ENOSPC}; print STDERR said(@_), "\n"; exit($full ? ${NO_SPACE_EXIT} : 1); }
${WRITE_ALL_PERL}
sub hx { return unpack('H*', $_[0]); }
sub plain { my ($p) = @_; return length($p) > 0 && length($p) <= 4096 && $p !~ m{^/} && $p !~ m{(?:^|/)\.{0,2}(?:/|\z)} && $p !~ /[\x00-\x1f\x7f]/; }
# The lstat of ROOT/REL, every component checked (see above); with $mk every component must be a
# directory and a missing one is made. Empty when REL (or a parent) is absent.
sub walk {
  my ($rel, $mk) = @_;
  refuse("$rel: not a plain relative path") unless plain($rel);
  my @c = split m{/}, $rel; my $p = $root;
  for my $i (0 .. $#c) {
    $p .= "/$c[$i]";
    my @st = lstat $p;
    if (!@st && $mk) { mkdir($p, 0755) or $!{EEXIST} or refuse("$rel: cannot make it: $!"); @st = lstat $p; }
    return () unless @st;
    my $at = join('/', @c[0 .. $i]);
    refuse("$at is a symbolic link") if -l _;
    refuse("$at is not a directory") if ($i < $#c || $mk) && !-d _;
    return @st if $i == $#c;
  }
}
sub parent { (my $p = $_[0]) =~ s{/[^/]+\z}{}; return $p; }
sub file_st { my @st = walk($_[0], 0); refuse("$_[0] is not a regular file") if @st && !-f _; return @st; }
sub open_read {
  my ($rel) = @_; file_st($rel) or refuse("$rel is missing");
  sysopen(my $fh, "$root/$rel", O_RDONLY | O_NOFOLLOW) or refuse("$rel: cannot open it: $!");
  -f $fh or refuse("$rel is not a regular file"); return $fh;
}
# Removes REL when it is there and not a directory: unlink(2) removes a link, never what it points to.
sub clear {
  my ($rel) = @_; walk(parent($rel), 0) or return;
  lstat "$root/$rel" or return; refuse("$rel is a directory") if -d _ && !-l _;
  unlink("$root/$rel") or refuse("$rel: cannot remove it: $!");
}
sub make_root { my $q = ''; for my $c (grep { $_ ne '' } split m{/}, $root) { $q .= "/$c"; mkdir($q, 0755) unless -d $q; } -d $root or refuse("$root: cannot make it"); }
sub inspect {
  my ($repo, $pin) = @a;
  my @st = -d $root ? walk($repo, 0) : ();
  if (!@st) { print "missing no folder\n"; return; }
  refuse("$repo is not a directory") unless -d _;
  my $ref = $pin eq '' ? 'main' : $pin; my $rev = $pin;
  if (plain("refs/$ref") && file_st("$repo/refs/$ref")) {
    my $fh = open_read("$repo/refs/$ref"); defined sysread($fh, my $body, 256) or refuse("$repo/refs/$ref: cannot read it: $!");
    print 'ref ', hx($ref), ' ', hx($body), "\n";
    ($rev = $body) =~ s/\n\z//;
  } elsif ($pin eq '') { print "missing no refs/main\n"; return; }
  # A value that is no plain name: plan/weights.ts refuses it, naming the ref file.
  return print "end\n" unless plain("snapshots/$rev");
  my $snap = "$repo/snapshots/$rev";
  my @s = walk($snap, 0);
  if (!@s) { print "missing no snapshot\n"; return; }
  refuse("$snap is not a directory") unless -d _;
  print "snapshot\n";
  my ($count, @todo) = (0, '');
  while (@todo) {
    my $dir = shift @todo; my $at = $dir eq '' ? $snap : "$snap/$dir";
    opendir(my $dh, "$root/$at") or refuse("$at: cannot list it: $!");
    for my $e (sort grep { $_ ne '.' && $_ ne '..' } readdir $dh) {
      refuse("$snap holds more than 100000 entries") if ++$count > 100000;
      my $rel = $dir eq '' ? $e : "$dir/$e";
      my @f = lstat "$root/$snap/$rel";
      if (!@f) { next; }
      elsif (-l _) {
        my $to = readlink("$root/$snap/$rel") // ''; my $size = -1;
        if ($to =~ m{^(?:\.\./)+blobs/([^/]+)\z}) { my $blob = "$repo/blobs/$1"; my @b = plain($blob) ? walk($blob, 0) : (); $size = $b[7] if @b && -f _; }
        print "L $size ", hx($rel), ' ', hx($to), "\n";
      }
      elsif (-d _) { refuse("$snap is deeper than 32 folders") if ($rel =~ tr{/}{}) >= 32; push @todo, $rel; }
      elsif (-f _) { print "F $f[7] ", hx($rel), "\n"; }
      else { print 'O -1 ', hx($rel), "\n"; }
    }
    closedir $dh;
  }
  print "end\n";
}
my %ops = (
  inspect => \&inspect,
  prepare => sub {
    make_root(); my $files = 0;
    for (@a) { if ($_ eq '--') { $files = 1; next; } $files ? clear($_) : walk($_, 1); }
  },
  state => sub {
    my ($blobs, $suffix, @names) = @a;
    for my $n (@names) { my @c = file_st("$blobs/$n"); my @p = file_st("$blobs/$n$suffix"); print "$n ", (@c ? $c[7] : -1), ' ', (@p ? $p[7] : -1), "\n"; }
  },
  check => sub { file_st($_) for @a; },
  append => sub {
    my ($rel) = @a; file_st($rel);
    sysopen(my $fh, "$root/$rel", O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW, 0644) or refuse("$rel: cannot open it: $!");
    -f $fh or refuse("$rel is not a regular file");
    # Not cat: a full disk must be told apart from any other failure (failed above).
    binmode STDIN; my $buf;
    while (1) {
      my $n = sysread(STDIN, $buf, 1 << 20); defined $n or failed("reading the payload: $!"); last unless $n;
      write_all($fh, $buf) or failed("$rel: $!");
    }
    close $fh or failed("$rel: $!");
  },
  read => sub {
    my ($rel, $off) = @a; my $fh = open_read($rel);
    $off =~ /^\d+\z/ && defined sysseek($fh, $off, SEEK_SET) or refuse("$rel: cannot start at byte $off");
    open(STDIN, '<&', $fh) or refuse("$rel: $!"); close $fh; exec('cat') or refuse("cannot start cat: $!");
  },
  hash => sub {
    for my $rel (@a) {
      my $fh = open_read($rel); my $pid = open(my $out, '-|') // refuse("cannot fork: $!");
      if (!$pid) { open(STDIN, '<&', $fh) or POSIX::_exit(1); exec('sha256sum') or POSIX::_exit(1); }
      my $h = <$out> // ''; close $out; close $fh;
      $h =~ /^([0-9a-f]{64})/ or refuse("$rel: sha256sum gave no digest"); print "$1\n";
    }
  },
  link => sub {
    my ($snap, @pairs) = @a;
    while (@pairs) {
      my ($path, $to) = splice(@pairs, 0, 2); my $rel = "$snap/$path";
      walk(parent($rel), 1); clear($rel);
      symlink($to, "$root/$rel") or refuse("$rel: cannot link it: $!");
    }
  },
  ref => sub {
    my ($rel, $value) = @a; walk(parent($rel), 1); clear($rel);
    sysopen(my $fh, "$root/$rel", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644) or refuse("$rel: cannot write it: $!");
    (syswrite($fh, $value) // -1) == length($value) or refuse("$rel: cannot write it: $!"); close $fh or refuse("$rel: $!");
  },
);
($ops{$op} // sub { refuse("no operation $op") })->();
`;

/** The exit status of a refusal, and the line it writes on stderr. */
export const UNSAFE_EXIT = 9;

export type CacheOp = "inspect" | "prepare" | "state" | "check" | "append" | "read" | "hash" | "link" | "ref";

/** The argv that runs one operation of CACHE_PERL on a node. `--`: an argument starting with `-` is not perl's switch. */
export const cacheArgv = (op: CacheOp, root: string, ...args: readonly string[]): string[] => ["perl", "-e", CACHE_PERL, "--", op, root, ...args];
