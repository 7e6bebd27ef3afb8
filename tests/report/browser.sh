#!/bin/bash
# browser.sh NVFP4DBG SOURCE_ROOT BUILD_DIR — the report of a real trace in headless Chromium:
# the charts and tables exist in the DOM and have real rendered geometry, sorting works, no
# console message, and a screenshot is saved under BUILD_DIR. Skips (77) without chromium.
set -u
bin=$1 root=$2 out=$3
browser=$(command -v chromium || command -v chromium-browser || true)
[ -n "$browser" ] || { echo "SKIP: chromium not installed"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# a real trace of the seed-bug checkpoint (exit 1: the seed bug is found)
"$bin" trace "$root/golden/seed-bug-v4" --table --out "$tmp/t.h5" > "$tmp/trace.txt" 2>&1
rc=$?
[ $rc -eq 1 ] || { cat "$tmp/trace.txt"; bad "trace exit $rc, expected 1"; exit 1; }
nrows=$(grep -cE '^[^ ]+ +[^ ]+ +(isolated|chained) ' "$tmp/trace.txt")
first=$(sed -n 's/^first divergence at \([^ ]*\) .*/\1/p' "$tmp/trace.txt")
[ -n "$first" ] || bad "no first divergence in the trace output"

"$bin" report "$tmp/t.h5" --html "$tmp/t.html" > "$tmp/report.txt" 2>&1 || { cat "$tmp/report.txt"; bad "report failed"; exit 1; }
[ -e "$tmp/t.html.tmp" ] && bad "t.html.tmp left behind"
size=$(wc -c < "$tmp/t.html")
echo "page: $size bytes, $nrows trace rows, first divergence $first"

run_browser() {  # run_browser FILE.html ARGS... (DOM on stdout, log in $tmp/console.txt)
    local page=$1; shift
    timeout 120 "$browser" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
        --user-data-dir="$tmp/profile" --enable-logging=stderr --v=0 "$@" "file://$page" 2>> "$tmp/console.txt"
}
abs=$(cd "$tmp" && pwd)

# 1. the page as written: DOM structure and console
run_browser "$abs/t.html" --dump-dom > "$tmp/dom.html" || bad "chromium --dump-dom failed"
count() { grep -o -- "$1" "$tmp/dom.html" | wc -l; }
[ "$(count '<svg class="chart ')" -eq 4 ] || bad "expected 4 charts, DOM has $(count '<svg class="chart ')"
[ "$(count '<path class="iso" d="M')" -eq 4 ] || bad "isolated lines missing"
[ "$(count '<path class="chain" d="M')" -eq 4 ] || bad "chained lines missing"
[ "$(count '<path class="thr" d="M')" -eq 2 ] || bad "threshold lines missing"
[ "$(count '<g class="mark">')" -eq 4 ] || bad "first divergence not marked on the 4 charts"
[ "$(count "first divergence: $first (isolated)")" -eq 4 ] || bad "marker label does not name $first"
if command -v h5ls > /dev/null; then
    nroute=$(h5ls "$tmp/t.h5/routing" | wc -l)
    [ "$nroute" -gt 0 ] || bad "the seed-bug trace has no /routing entries"
    [ "$(count '<svg class="rstrip"')" -eq "$nroute" ] || bad "routing strips: $(count '<svg class="rstrip"') for $nroute /routing entries"
fi
grep -q '<table class="heat">' "$tmp/dom.html" || bad "scale-ratio table missing"
table=$(sed -n '/id="stage-table"/,/<\/table>/p' "$tmp/dom.html" | grep -o '<tr' | wc -l)
[ "$table" -eq $((nrows + 1)) ] || bad "stage table has $table rows, expected $nrows + header"
grep -q 'id="first-row"' "$tmp/dom.html" || bad "first divergence row not marked"

# 2. rendering and sorting, checked by a probe script added to a copy of the page
cat > "$tmp/probe.js" <<'JS'
<script>
(function(){
 var r=[];
 var charts=document.querySelectorAll('svg.chart'),drawn=0;
 charts.forEach(function(s){var p=s.querySelector('path.iso');if(p&&p.getBBox().width>s.getBBox().width*0.5)drawn++;});
 r.push('charts='+drawn);
 var tb=document.getElementById('stage-table'),th=tb.tHead.rows[0].cells,col=-1;
 for(var i=0;i<th.length;i++)if(th[i].textContent.trim()==='SQNR dB')col=i;
 function v(row){var s=row.cells[col].textContent;return s==='inf'?Infinity:s==='-inf'?-Infinity:parseFloat(s);}
 th[col].click();
 var rows=tb.tBodies[0].rows,prev=-Infinity,ok=rows.length>1,nan=false;
 for(var j=0;j<rows.length;j++){var x=v(rows[j]);if(isNaN(x)){nan=true;continue;}if(nan||x<prev)ok=false;prev=x;}
 th[col].click();
 if(v(tb.tBodies[0].rows[0])!==prev)ok=false;
 r.push('sorted='+(ok?'yes':'no'));
 document.title='PROBE '+r.join(' ');
})();
</script>
JS
sed '/<\/body>/{
r '"$tmp/probe.js"'
}' "$tmp/t.html" > "$tmp/probe.html"
run_browser "$abs/probe.html" --dump-dom > "$tmp/probe-dom.html" || bad "chromium on the probe page failed"
title=$(sed -n 's/.*<title>\(PROBE[^<]*\)<\/title>.*/\1/p' "$tmp/probe-dom.html")
echo "probe: ${title:-none}"
[ "$title" = "PROBE charts=4 sorted=yes" ] || bad "probe says '${title:-nothing}'"

# 3. the screenshot, kept in the build dir for a person to look at
shot="$out/report-seed-bug-v4.png"
rm -f "$shot"
run_browser "$abs/t.html" --screenshot="$shot" --window-size=1400,3000 --hide-scrollbars > /dev/null || bad "screenshot failed"
[ -s "$shot" ] && [ "$(wc -c < "$shot")" -gt 50000 ] || bad "screenshot missing or blank: $shot"
echo "screenshot: $shot"

# any console message (errors, warnings, uncaught exceptions) fails the test
if grep -E 'CONSOLE|Uncaught' "$tmp/console.txt"; then bad "console messages"; fi
[ $fail -eq 0 ] && echo "browser: ok"
exit $fail
