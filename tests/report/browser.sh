#!/bin/bash
# browser.sh NVFP4DBG SOURCE_ROOT BUILD_DIR — the report of real traces in headless Chromium:
#  1-3. the seed-bug trace: charts and tables in the DOM with real rendered geometry, every stage
#       in its layer's group, sorting, every header explained, a screenshot;
#  4.   a 60-layer DeepSeek-V4 trace with a planted fault in layer 41, against the clean model's
#       trace, at phone width (390x844) and on a wide screen (1400x1000): the verdict and cause
#       inside the first viewport, no sideways scrolling of the page, every layer present in every
#       table, groups open and close, the four charts drawn for that width (the phone's below
#       600 px) with axis text at least 10 px high and the other trace's lines over the run's, the
#       stage column staying in view when a table scrolls sideways, screenshots of both widths
#       under BUILD_DIR. Headless Chromium
#       will not make a window narrower than 500 px, so the probe runs in an iframe of the exact
#       size (it reports its own innerWidth); screenshots use the window size itself.
# Any console message fails. Skips (77) without chromium or h5dump (the trace's figures are read
# with h5dump, not from the terminal output).
set -u
bin=$1 root=$2 out=$3
browser=$(command -v chromium || command -v chromium-browser || command -v chromium-headless-shell || true)
[ -n "$browser" ] || { echo "SKIP: chromium not installed"; exit 77; }
command -v h5dump > /dev/null || { echo "SKIP: h5dump not installed"; exit 77; }
mkdir -p "$out" || exit 1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
attr() { h5dump -a "/summary/$2" "$1" | sed -n 's/^ *(0): "\(.*\)"$/\1/p'; }
nrows_of() { h5dump -H -d /stages "$1" | sed -n 's/.*DATASPACE *SIMPLE { ( \([0-9]*\) ).*/\1/p'; }

# a real trace of the seed-bug checkpoint (exit 1: the seed bug is found)
"$bin" trace --force "$root/golden/seed-bug-v4" --out "$tmp/t.h5" > "$tmp/trace.txt" 2>&1
rc=$?
[ $rc -eq 1 ] || { cat "$tmp/trace.txt"; bad "trace exit $rc, expected 1"; exit 1; }
nrows=$(nrows_of "$tmp/t.h5")
first=$(attr "$tmp/t.h5" first_divergence)
[ -n "$first" ] && [ -n "$nrows" ] || { bad "no rows or no first divergence in the trace"; exit 1; }

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
# with_probe PAGE PROBE OUT: a copy of PAGE with the probe script added before </body>
with_probe() { sed '/<\/body>/{
r '"$2"'
}' "$1" > "$3"; }
probe_title() { sed -n 's/.*<title>\(PROBE[^<]*\)<\/title>.*/\1/p' "$1"; }

# 1. the page as written: DOM structure and console
run_browser "$abs/t.html" --dump-dom > "$tmp/dom.html" || bad "chromium --dump-dom failed"
count() { grep -o -- "$1" "$tmp/dom.html" | wc -l; }
# four charts, each drawn for three widths (wide, medium, narrow)
[ "$(count '<svg class="chart ')" -eq 12 ] || bad "expected 4 charts x 3 widths, DOM has $(count '<svg class="chart ')"
for v in wide medium narrow; do
    [ "$(grep -oE "<svg class=\"chart [a-z]+ $v( dense)?\"" "$tmp/dom.html" | wc -l)" -eq 4 ] || bad "expected 4 charts drawn $v"
done
[ "$(count '<path class="iso" d="M')" -eq 12 ] || bad "isolated lines missing"
[ "$(count '<path class="chain" d="M')" -eq 12 ] || bad "chained lines missing"
[ "$(count '<path class="thr" d="M')" -eq 6 ] || bad "threshold lines missing"
[ "$(count '<g class="mark">')" -eq 12 ] || bad "first divergence not marked on the 12 drawings"
[ "$(count "<title>first divergence: $first (isolated)</title>")" -eq 12 ] || bad "marker tooltip does not name $first"
[ "$(count ">first divergence: $first (isolated)</text>")" -eq 8 ] || bad "marker label does not name $first on the wide and medium drawings"
nroute=$(h5dump -n "$tmp/t.h5" | grep -c 'dataset */routing/.*/ref$')
[ "$nroute" -gt 0 ] || bad "the seed-bug trace has no /routing entries"
[ "$(count '<svg class="rstrip"')" -eq "$nroute" ] || bad "routing strips: $(count '<svg class="rstrip"') for $nroute /routing entries"
grep -q '<table class="heat">' "$tmp/dom.html" || bad "scale-ratio table missing"
# every row in the groups of the stage section: one header row per group
stages=$(sed -n '/<section id="stages">/,/<\/section>/p' "$tmp/dom.html")
ngroups=$(grep -o '<details class="grp' <<< "$stages" | wc -l)
ntr=$(grep -o '<tr' <<< "$stages" | wc -l)
[ "$ngroups" -eq 4 ] || bad "stage groups: $ngroups, expected 4 (in, layers 0 and 1, head)"
[ "$ntr" -eq $((nrows + ngroups)) ] || bad "stage groups hold $ntr rows, expected $nrows + $ngroups headers"
for id in layer-in layer-0 layer-1 layer-head; do grep -q "id=\"$id\"" <<< "$stages" || bad "group $id missing"; done
grep -q 'id="first-row"' "$tmp/dom.html" || bad "first divergence row not marked"

# 2. rendering, sorting, tooltips, checked by a probe script added to a copy of the page
cat > "$tmp/probe.js" <<'JS'
<script>
(function(){
 var r=[];
 var charts=document.querySelectorAll('svg.chart'),drawn=0;
 charts.forEach(function(s){var p=s.querySelector('path.iso');if(p&&p.getBBox().width>s.getBBox().width*0.5)drawn++;});
 r.push('charts='+drawn);
 var tb=document.getElementById('first-row').closest('table'),th=tb.tHead.rows[0].cells,col=-1;
 for(var i=0;i<th.length;i++)if(th[i].textContent.trim()==='SQNR dB')col=i;
 function v(row){var s=row.cells[col].textContent;return s==='inf'?Infinity:s==='-inf'?-Infinity:parseFloat(s);}
 th[col].click();
 var rows=tb.tBodies[0].rows,prev=-Infinity,ok=rows.length>1,nan=false;
 for(var j=0;j<rows.length;j++){var x=v(rows[j]);if(isNaN(x)){nan=true;continue;}if(nan||x<prev)ok=false;prev=x;}
 th[col].click();
 if(v(tb.tBodies[0].rows[0])!==prev)ok=false;
 r.push('sorted='+(ok?'yes':'no'));
 var ths=document.querySelectorAll('thead th'),untitled=0;
 ths.forEach(function(h){if(!h.title||h.title.length<10)untitled++;});
 r.push('untitled='+untitled);
 document.title='PROBE '+r.join(' ');
})();
</script>
JS
with_probe "$tmp/t.html" "$tmp/probe.js" "$tmp/probe.html"
run_browser "$abs/probe.html" --dump-dom > "$tmp/probe-dom.html" || bad "chromium on the probe page failed"
title=$(probe_title "$tmp/probe-dom.html")
echo "probe: ${title:-none}"
[ "$title" = "PROBE charts=4 sorted=yes untitled=0" ] || bad "probe says '${title:-nothing}'"

# 3. the screenshot, kept in the build dir for a person to look at
shot="$out/report-seed-bug-v4.png"
rm -f "$shot"
run_browser "$abs/t.html" --screenshot="$shot" --window-size=1400,3000 --hide-scrollbars > /dev/null || bad "screenshot failed"
[ -s "$shot" ] && [ "$(wc -c < "$shot")" -gt 50000 ] || bad "screenshot missing or blank: $shot"
echo "screenshot: $shot"

# 4. a 60-layer trace against the clean model's, at two widths
"$bin" synth "$tmp/bad60" --recipe deepseek_v4 --size tiny --layers 60 \
    --inject input-scale-inverted@layers.41.self_attn.q_b_proj > "$tmp/synth.txt" 2>&1 || { cat "$tmp/synth.txt"; bad "synth"; exit 1; }
"$bin" synth "$tmp/clean60" --recipe deepseek_v4 --size tiny --layers 60 > "$tmp/synth.txt" 2>&1 || { cat "$tmp/synth.txt"; bad "synth"; exit 1; }
"$bin" trace --force "$tmp/bad60" --out "$tmp/bad60.h5" > "$tmp/trace60.txt" 2>&1
[ $? -eq 1 ] || { cat "$tmp/trace60.txt"; bad "60-layer trace did not exit 1"; exit 1; }
"$bin" trace --force "$tmp/clean60" --out "$tmp/clean60.h5" > "$tmp/trace60c.txt" 2>&1
[ $? -eq 0 ] || { cat "$tmp/trace60c.txt"; bad "clean 60-layer trace did not exit 0"; exit 1; }
"$bin" report "$tmp/bad60.h5" --against "$tmp/clean60.h5" --html "$tmp/r60.html" > "$tmp/report60.txt" 2>&1 ||
    { cat "$tmp/report60.txt"; bad "report --against failed"; exit 1; }
cause=$(attr "$tmp/bad60.h5" cause)
[ "$(attr "$tmp/bad60.h5" first_divergence)" = "layers.41.self_attn.q_b_proj" ] || bad "60-layer first divergence"
echo "60 layers: $(nrows_of "$tmp/bad60.h5") rows, $(wc -c < "$tmp/r60.html") bytes with --against, cause $cause"
cat > "$tmp/probe60.js" <<'JS'
<script>
(function(){
 var r=[],W=window.innerWidth,H=window.innerHeight;
 r.push('w='+W);
 function inview(id){var e=document.getElementById(id);if(!e)return 'missing';var b=e.getBoundingClientRect();
  return b.top>=0&&b.bottom<=H&&b.left>=0&&b.right<=W+0.5&&b.height>0?'yes':'no('+Math.round(b.top)+','+Math.round(b.bottom)+')';}
 r.push('status='+inview('verdict-status'));
 r.push('cause='+inview('verdict-cause'));
 r.push('cause_text='+document.getElementById('verdict-cause').querySelector('code').textContent);
 r.push('sideways='+(document.documentElement.scrollWidth>W?'yes':'no'));
 function ids(sel,pre){var n=0;for(var L=0;L<60;L++)if(document.querySelector(sel+'#'+pre+L))n++;return n;}
 r.push('stage_groups='+ids('details.grp','layer-'));
 r.push('against_groups='+ids('details.grp','against-layer-'));
 var lt=document.getElementById('layer-table'),n=0;
 for(var L=0;L<60;L++)if(lt.querySelector('a[href="#layer-'+L+'"]'))n++;
 r.push('layer_lines='+n);
 var heat=document.querySelector('table.heat'),hn=0;
 Array.prototype.forEach.call(heat.tBodies[0].rows,function(row){if(/^[0-9]+$/.test(row.cells[0].textContent))hn++;});
 r.push('heat_rows='+hn);
 var g50=document.getElementById('layer-50'),row50=g50.querySelector('tbody tr');
 var closed=!g50.open&&!row50.checkVisibility();
 document.querySelector('#stages a.openall').click();
 var all=document.querySelectorAll('#stages details.grp'),nopen=0;
 all.forEach(function(d){if(d.open)nopen++;});
 var shown=row50.checkVisibility();
 document.querySelector('#stages a.closeall').click();
 var nclosed=0;all.forEach(function(d){if(!d.open)nclosed++;});
 r.push('toggle='+(closed&&shown&&nopen===all.length&&nclosed===all.length?'yes':'no'));
 // the charts drawn for this width: which view is shown, its size, its smallest axis text, the other trace's lines
 var vis=[],views={},minpx=99,over=0;
 document.querySelectorAll('svg.chart').forEach(function(s){if(getComputedStyle(s).display!=='none')vis.push(s);});
 vis.forEach(function(s){
  ['wide','medium','narrow'].forEach(function(v){if(s.classList.contains(v))views[v]=1;});
  var b=s.getBoundingClientRect();if(b.right>W+0.5||b.width<W*0.5)minpx=-1;
  s.querySelectorAll('.yax text,.xlab text').forEach(function(t){var h=t.getBoundingClientRect().height;if(h>0&&h<minpx)minpx=h;});
  var o=s.querySelector('path.oiso');if(o&&o.getAttribute('d').indexOf('M')===0)over++;});
 r.push('charts='+vis.length+':'+Object.keys(views).join('+'));
 r.push('axis_text='+(minpx>=10?'legible':'small('+minpx.toFixed(1)+')'));
 r.push('overlay='+over);
 // the stage column of a table scrolled sideways stays at the box's left edge
 document.querySelector('#stages a.openall').click();
 var box=document.querySelector('#stages details.grp .scroll'),cell=box.querySelector('tbody td');
 box.scrollLeft=300;
 var moved=box.scrollLeft>0,dx=Math.abs(cell.getBoundingClientRect().left-box.getBoundingClientRect().left);
 r.push('sticky='+(W>=box.querySelector('table').offsetWidth?'fits':(moved&&dx<2?'yes':'no('+dx.toFixed(0)+')')));
 parent.postMessage('PROBE '+r.join(' '),'*');
})();
</script>
JS
with_probe "$tmp/r60.html" "$tmp/probe60.js" "$tmp/probe60.html"
png_size() { od -An -tu1 -j16 -N8 "$1" | awk '{print $1*16777216+$2*65536+$3*256+$4 "x" $5*16777216+$6*65536+$7*256+$8}'; }
for size in 390,844 1400,1000; do
    w=${size%,*} h=${size#*,}
    cat > "$tmp/frame-$w.html" <<HTML
<!DOCTYPE html><html><head><title>none</title></head><body style="margin:0">
<iframe src="probe60.html" style="border:0;width:${w}px;height:${h}px"></iframe>
<script>window.addEventListener('message',function(ev){document.title=ev.data;});</script></body></html>
HTML
    run_browser "$abs/frame-$w.html" --window-size=$((w < 500 ? 500 : w)),$h --dump-dom > "$tmp/probe60-$w.html" || bad "chromium at $size failed"
    title=$(probe_title "$tmp/probe60-$w.html")
    echo "probe at $size: ${title:-none}"
    view=wide sticky=fits; [ "$w" -lt 600 ] && view=narrow sticky=yes
    want="PROBE w=$w status=yes cause=yes cause_text=$cause sideways=no stage_groups=60 against_groups=60 layer_lines=60 heat_rows=60 toggle=yes charts=4:$view axis_text=legible overlay=4 sticky=$sticky"
    [ "$title" = "$want" ] || bad "at $size the probe says '${title:-nothing}', expected '$want'"
    shot="$out/report-60-layers-$w.png"
    rm -f "$shot"
    run_browser "$abs/r60.html" --screenshot="$shot" --window-size=$size --hide-scrollbars > /dev/null || bad "screenshot at $size failed"
    [ -s "$shot" ] && [ "$(wc -c < "$shot")" -gt 20000 ] || bad "screenshot missing or blank: $shot"
    [ "$(png_size "$shot")" = "${w}x$h" ] || bad "screenshot $shot is $(png_size "$shot"), expected ${w}x$h"
    echo "screenshot: $shot"
done

# any console message (errors, warnings, uncaught exceptions) fails the test
if grep -E 'CONSOLE|Uncaught' "$tmp/console.txt"; then bad "console messages"; fi
[ $fail -eq 0 ] && echo "browser: ok"
exit $fail
