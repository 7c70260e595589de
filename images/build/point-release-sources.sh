#!/bin/bash
# Usage: point-release-sources.sh SUITE ETC_APT OUT
# apt's sources of SUITE's own dist only, never SUITE-updates or SUITE-security (issue 52: every
# layer below the runtime's last step is built at the point release): OUT/sources.list and
# OUT/parts/, for apt's Dir::Etc::SourceList and Dir::Etc::SourceParts. Read from ETC_APT's
# one-line sources.list (as `make base-offline` writes it) and sources.list.d/*.list, and its
# deb822 sources.list.d/*.sources (as Docker Hub's debian images have them), keeping only the
# entries of exactly SUITE. Stops when none is left: apt would then install nothing from Debian.
set -euo pipefail
suite=$1 etc=$2 out=$3
mkdir -p "$out/parts"
# deb [options] URI SUITE COMPONENT...: the options, where there are any, may span fields.
one_line() {
  awk -v s="$suite" '$1 == "deb" { i = 2
      if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
      if ($(i + 1) == s) print }' "$1"
}
if [ -f "$etc/sources.list" ]; then one_line "$etc/sources.list" > "$out/sources.list"; else : > "$out/sources.list"; fi
for f in "$etc"/sources.list.d/*.list; do
  if [ -f "$f" ]; then one_line "$f" > "$out/parts/$(basename "$f")"; fi
done
for f in "$etc"/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  # One stanza per paragraph; its Suites: keeps SUITE alone, and a stanza without SUITE goes.
  awk -v s="$suite" 'BEGIN { RS = ""; FS = "\n" }
    { out = ""; found = 0
      for (i = 1; i <= NF; i++) {
        line = $i
        if (line ~ /^Suites:/) {
          m = split(substr(line, 8), names, /[ \t]+/)
          for (j = 1; j <= m; j++) if (names[j] == s) found = 1
          line = "Suites: " s
        }
        out = out line "\n"
      }
      if (found) printf "%s\n", out }' "$f" > "$out/parts/$(basename "$f")"
done
if ! grep -rhE "^(deb |Suites: )" "$out" >/dev/null; then
  echo "point-release-sources.sh: no apt source in $etc names Debian $suite itself: add \"deb <mirror> $suite main\" to its sources.list" >&2
  exit 1
fi
