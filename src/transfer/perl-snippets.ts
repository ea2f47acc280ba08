/**
 * Perl subroutines shared by the programs launcher runs on a node (the transfer hop in hop.ts, the
 * Docker API client in docker-api.ts). They run under perl-base, the perl every node has (Essential
 * in Debian and Ubuntu), so they use only its core.
 */

/** `write_all(FH, DATA[, FROM])`: every byte of DATA from offset FROM, or 0 on a write error (syswrite may write less than asked, to a pipe or socket). */
export const WRITE_ALL_PERL = String.raw`sub write_all {
  my ($fh, $off) = ($_[0], $_[2] // 0);
  while ($off < length $_[1]) { my $w = syswrite($fh, $_[1], length($_[1]) - $off, $off); return 0 unless defined $w; $off += $w; }
  return 1;
}`;
