#!/bin/bash
# help.sh NVFP4DBG MANPAGE — every command's --help prints its usage and exits 0; the report's has
# an example; `nvfp4dbg --help` lists the commands and `--version` prints the version; the man page
# names every command and every option the --help texts list, and groff reads it without warnings.
# A command other than report without an "example:" line is printed as a GAP (their help texts
# are owned elsewhere); ND_HELP_STRICT=1 makes gaps fail.
set -u
bin=$1 man=$2
fail=0
bad() { echo "FAIL: $*"; fail=1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

"$bin" --help > "$tmp/top.txt" 2>&1 || bad "nvfp4dbg --help exit $?"
cmds=$(awk '/^  [a-z]+ /{print $1}' "$tmp/top.txt")
[ -n "$cmds" ] || bad "nvfp4dbg --help lists no command"
for c in trace inspect compare synth report; do
    echo "$cmds" | grep -qx "$c" || bad "nvfp4dbg --help does not list $c"
done
ver=$("$bin" --version) || bad "--version exit $?"
echo "$ver" | grep -qE '^nvfp4dbg [0-9]+\.[0-9]+\.[0-9]+' || bad "--version printed '$ver'"
grep -q "\"nvfp4dbg ${ver#nvfp4dbg }\"" "$man" || bad "man page header does not carry version ${ver#nvfp4dbg }"

# the man page as plain text: roff escapes and font changes removed
sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/\\e/\\/g' "$man" > "$tmp/man.txt"
for c in $cmds; do
    "$bin" "$c" --help > "$tmp/$c.txt" 2> "$tmp/$c.err"
    rc=$?
    [ $rc -eq 0 ] || bad "$c --help exit $rc"
    grep -q "^usage: nvfp4dbg $c" "$tmp/$c.txt" || bad "$c --help prints no 'usage: nvfp4dbg $c' on stdout"
    [ -s "$tmp/$c.err" ] && bad "$c --help writes to stderr: $(head -1 "$tmp/$c.err")"
    if ! grep -qE "^example: .*nvfp4dbg $c( |\$)" "$tmp/$c.txt"; then
        if [ "$c" = report ] || [ "${ND_HELP_STRICT:-0}" = 1 ]; then bad "$c --help has no 'example: ... nvfp4dbg $c ...' line"
        else echo "GAP: '$c --help' has no example line"; fi
    fi
    grep -q "^\.SS \"$c " "$man" || bad "man page has no section for $c"
    for opt in $(grep -oE '(^|[ [])--[a-z][a-z-]*' "$tmp/$c.txt" | grep -oE -- '--[a-z-]+' | sort -u); do
        [ "$opt" = --help ] && continue
        grep -qE -- "(^|[^a-z-])$opt([^a-z-]|$)" "$tmp/man.txt" || bad "man page does not mention $c $opt"
    done
done
# usage errors: exit 2, a hint on stderr, nothing on stdout
"$bin" report > "$tmp/o" 2> "$tmp/e"; rc=$?
[ $rc -eq 2 ] && [ ! -s "$tmp/o" ] && grep -q "usage: nvfp4dbg report" "$tmp/e" && grep -q "example:" "$tmp/e" || bad "report without arguments: exit $rc, stderr '$(head -1 "$tmp/e")'"
"$bin" report x.h5 --bogus > "$tmp/o" 2> "$tmp/e"; rc=$?
[ $rc -eq 2 ] && grep -q "unknown option '--bogus'" "$tmp/e" || bad "report --bogus: exit $rc"
"$bin" report no-such-trace.h5 --html "$tmp/x.html" > "$tmp/o" 2> "$tmp/e"; rc=$?
[ $rc -eq 2 ] && grep -q "no-such-trace.h5" "$tmp/e" && [ ! -e "$tmp/x.html" ] && [ ! -e "$tmp/x.html.tmp" ] ||
    bad "report of a missing trace: exit $rc, stderr '$(cat "$tmp/e")'"
printf 'not an hdf5 file\n' > "$tmp/bad.h5"
"$bin" report "$tmp/bad.h5" --html "$tmp/x.html" > "$tmp/o" 2> "$tmp/e"; rc=$?
[ $rc -eq 2 ] && grep -q "bad.h5" "$tmp/e" && [ ! -e "$tmp/x.html" ] || bad "report of a corrupt trace: exit $rc, stderr '$(cat "$tmp/e")'"
if command -v groff > /dev/null; then
    groff -man -ww -z "$man" 2> "$tmp/groff.txt"
    [ -s "$tmp/groff.txt" ] && bad "groff warnings: $(head -3 "$tmp/groff.txt")"
fi
[ $fail -eq 0 ] && echo "help: ok"
exit $fail
