#!/usr/bin/env bash
# yolo.sh - the edge-vision demo end to end on a real server + agent:
#  1. scripts/yolo_infer.py as --image-hook where Ultralytics is absent: the
#     upload commits byte-exact, the hook exits with a clear message, the
#     server logs it and counts the failure;
#  2. the stand-in hook (tests/tools/yolo_standin_hook.py: same JSON format,
#     real detections of red regions) on uploaded BMPs: the boxes drawn come back;
#  3. scripts/yolo_viewer.py: its JSON API and file serving (no traversal);
#  4. the page in headless Chromium: a DOM check of the server-rendered page,
#     of the page's own polling redraw (?js=1) after a new upload, and a
#     screenshot (kept in $RDMEM_ARTIFACTS when set). Skipped with a reason
#     when chromium is not installed (Debian package: chromium).
# Needs RDMEM_BIN.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
export RDMEM_BIN=${RDMEM_BIN:-build}
if [ ! -x "$RDMEM_BIN/rdmem-server" ] || ! command -v python3 >/dev/null; then
	# Built by make test; python3 is a dependency: missing is a failure.
	echo "not ok - yolo: $RDMEM_BIN/rdmem-server not built or no python3 (run make; scripts/install-deps.sh)"
	exit 1
fi
# shellcheck source=scripts/local-stack.sh
. scripts/local-stack.sh
tmp=$(mktemp -d /tmp/rdmem-yolo-test.XXXXXX)
viewer=
cleanup() {
	if [ -n "$viewer" ]; then
		kill "$viewer" 2>/dev/null || true
		wait "$viewer" 2>/dev/null || true
	fi
	ls_stop
	rm -rf "$tmp"
}
trap cleanup EXIT
failed=0
expect() {
	local what=$1
	shift
	if "$@"; then echo "ok - $what"; else echo "not ok - $what" && failed=1; fi
}
shm=/rdmem-yolo-$$
r() { "$RDMEM_BIN/rdmem" --shm-name "$shm" "$@"; }
put() { r image-put "$@" >/dev/null; } # quiet: only ok/not ok lines on stdout
stat_of() { r stats --json | python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
wait_hooks_idle() { # wait_hooks_idle RUNS: until that many hooks ran and none runs
	local i
	for ((i = 0; i < 200; i++)); do
		[ "$(stat_of "['hooks']['runs']")" -ge "$1" ] && [ "$(stat_of "['hooks']['running']")" = 0 ] && return 0
		sleep 0.05
	done
	return 1
}
wait_file() {
	local i
	for ((i = 0; i < 200; i++)); do
		[ -s "$1" ] && return 0
		sleep 0.05
	done
	return 1
}

# --- 1. the real hook without Ultralytics ----------------------------------------
mkdir -p "$tmp/s1" "$tmp/img1"
if python3 -c "import ultralytics" 2>/dev/null; then
	echo "ok - yolo_infer without Ultralytics # SKIP Ultralytics is installed here"
else
	ls_start_server "$tmp/s1" --image-dir "$tmp/img1" --image-hook "python3 $root/scripts/yolo_infer.py"
	ls_start_agent "$tmp/s1" "$shm" --clients 2 --slots 8
	head -c 200000 /dev/urandom >"$tmp/photo.jpg"
	expect "upload with the YOLO hook commits" put photo.jpg "$tmp/photo.jpg"
	expect "the image is stored byte-exact" cmp -s "$tmp/photo.jpg" "$tmp/img1/photo.jpg"
	expect "the hook ran and finished" wait_hooks_idle 1
	expect "the server counts the hook failure" [ "$(stat_of "['hooks']['failures']")" = 1 ]
	expect "the server logs the hook's clear message" \
		grep -q "hook: .*photo.jpg: exit 3: yolo_infer: Ultralytics YOLO is not installed" "$tmp/s1/server.log"
	expect "no result file without a detector" [ ! -e "$tmp/img1/photo.jpg.json" ]
	expect "the next upload still works" put photo2.jpg "$tmp/photo.jpg"
	ls_stop
fi
set +e
python3 scripts/yolo_infer.py "$tmp/img1/none.jpg" 2>"$tmp/err1"
rc1=$?
echo x >"$tmp/notes.txt"
python3 scripts/yolo_infer.py "$tmp/notes.txt" >"$tmp/out2" 2>&1
rc2=$?
set -e
expect "yolo_infer: a missing file is a usage error (exit 2)" [ "$rc1" = 2 ]
expect "yolo_infer: a file that is not an image is skipped (exit 0)" \
	bash -c "[ $rc2 = 0 ] && grep -q 'not an image' '$tmp/out2'"

# --- 2. the stand-in hook --------------------------------------------------------
standin="python3 $root/tests/tools/yolo_standin_hook.py"
mkdir -p "$tmp/s2" "$tmp/img2"
ls_start_server "$tmp/s2" --image-dir "$tmp/img2" --image-hook "$standin"
ls_start_agent "$tmp/s2" "$shm" --clients 2 --slots 8
$standin --make "$tmp/street.bmp" 320 200 40,30,120,90 200,110,290,180
$standin --make "$tmp/empty.bmp" 160 120
expect "upload street.bmp" put street.bmp "$tmp/street.bmp" --chunk-size 7000
expect "upload empty.bmp" put empty.bmp "$tmp/empty.bmp"
expect "the stand-in wrote street.bmp.json" wait_file "$tmp/img2/street.bmp.json"
expect "the stand-in wrote empty.bmp.json" wait_file "$tmp/img2/empty.bmp.json"
expect "street.bmp: the two drawn boxes come back" python3 - "$tmp/img2/street.bmp.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
boxes = sorted(x["box"] for x in d["detections"])
ok = boxes == [[40.0, 30.0, 120.0, 90.0], [200.0, 110.0, 290.0, 180.0]]
ok = ok and all(x["class"] == "red-square" and x["confidence"] == 1.0 for x in d["detections"])
ok = ok and d["image"] == "street.bmp" and d["annotated"] == "street.bmp.annotated.bmp"
sys.exit(0 if ok and (d["width"], d["height"]) == (320, 200) else 1)
EOF
expect "empty.bmp: no detections" \
	python3 -c "import json; import sys; sys.exit(len(json.load(open('$tmp/img2/empty.bmp.json'))['detections']))"
expect "annotated image written" [ -s "$tmp/img2/street.bmp.annotated.bmp" ]
wait_hooks_idle 2 || true
expect "no hook failure with the stand-in" [ "$(stat_of "['hooks']['failures']")" = 0 ]

# --- 3. the viewer --------------------------------------------------------------
vport=$(ls_free_ports 1)
python3 scripts/yolo_viewer.py --image-dir "$tmp/img2" --port "$vport" >"$tmp/viewer.log" 2>&1 &
viewer=$!
expect "viewer starts" ls_wait_log "$tmp/viewer.log" "serving http://127.0.0.1:$vport/" 10
get() { python3 tests/tools/http_probe.py get "$vport" "$1"; }
expect "viewer binds loopback only" bash -c "ss -Hltn | awk '{print \$4}' | grep -qx '127.0.0.1:$vport'"
expect "API lists both images, newest first, with the detections" bash -c "
	get() { python3 tests/tools/http_probe.py get $vport \"\$1\"; }
	get /api/images | sed '1,/^\$/d' | python3 -c '
import json, sys
items = json.load(sys.stdin)
names = sorted(i[\"name\"] for i in items)
street = [i for i in items if i[\"name\"] == \"street.bmp\"][0]
sys.exit(0 if names == [\"empty.bmp\", \"street.bmp\"] and len(street[\"detections\"]) == 2
         and street[\"annotated\"] == \"street.bmp.annotated.bmp\" and street[\"state\"] == \"done\" else 1)'"
expect "an image is served with its type" bash -c "python3 tests/tools/http_probe.py get $vport /image/street.bmp | grep -qi '^Content-Type: image/bmp'"
expect "path traversal is refused" [ "$(get /image/..%2F..%2Fetc%2Fpasswd | head -1)" = 404 ]
expect "result files are not served as images" [ "$(get /image/street.bmp.json | head -1)" = 404 ]
expect "unknown paths are 404" [ "$(get /nope | head -1)" = 404 ]

# --- 4. headless Chromium -------------------------------------------------------
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
	echo "ok - viewer in headless Chromium # SKIP chromium is not installed (apt-get install chromium)"
	exit $failed
fi
chrome() { # chrome PROFILE ARGS...: one headless run, bounded in time
	local profile=$1
	shift
	timeout 90 "$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
		--disable-background-networking --disable-component-update --disable-sync \
		--user-data-dir="$tmp/$profile" "$@" 2>>"$tmp/chrome.err"
}
chrome p1 --dump-dom "http://127.0.0.1:$vport/" >"$tmp/dom1.html" || true
expect "Chromium renders the page" grep -q "<h1>Images received</h1>" "$tmp/dom1.html"
expect "DOM lists both images" \
	bash -c "grep -q 'data-name=\"street.bmp\"' '$tmp/dom1.html' && grep -q 'data-name=\"empty.bmp\"' '$tmp/dom1.html'"
expect "DOM shows the two detections of street.bmp" \
	bash -c "[ \$(grep -o '<td class=\"cls\">red-square</td>' '$tmp/dom1.html' | wc -l) = 2 ]"
expect "DOM shows the box numbers" grep -q '<td class="box">40, 30, 120, 90</td>' "$tmp/dom1.html"
expect "DOM shows the annotated picture" grep -q 'src="/image/street.bmp.annotated.bmp"' "$tmp/dom1.html"
expect "DOM says empty.bmp has no detections" grep -q 'no detections' "$tmp/dom1.html"

# A new upload, then the page's own script draws the list (?js=1 leaves it empty in the HTML).
$standin --make "$tmp/late.bmp" 200 150 10,10,60,50
r image-put late.bmp "$tmp/late.bmp" >/dev/null
wait_file "$tmp/img2/late.bmp.json" || true
chrome p2 --virtual-time-budget=5000 --dump-dom "http://127.0.0.1:$vport/?js=1" >"$tmp/dom2.html" || true
expect "the page's polling script redraws the list" grep -q 'data-rendered="js"' "$tmp/dom2.html"
expect "a new upload appears with its detection" \
	bash -c "grep -q 'data-name=\"late.bmp\"' '$tmp/dom2.html' && grep -q '<td class=\"box\">10, 10, 60, 50</td>' '$tmp/dom2.html'"

chrome p3 --window-size=1000,1100 --screenshot="$tmp/viewer.png" "http://127.0.0.1:$vport/" >/dev/null || true
expect "screenshot taken" python3 - "$tmp/viewer.png" <<'EOF'
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
# A PNG of the window size whose pixels are not all one colour (the page drew something).
assert data[:8] == b"\x89PNG\r\n\x1a\n"
w, h = struct.unpack(">II", data[16:24])
idat, pos = b"", 8
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    if kind == b"IDAT":
        idat += data[pos + 8:pos + 8 + n]
    pos += 12 + n
raw = zlib.decompress(idat)
sys.exit(0 if (w, h) == (1000, 1100) and len(set(raw)) > 8 else 1)
EOF
if [ -n "${RDMEM_ARTIFACTS:-}" ]; then
	mkdir -p "$RDMEM_ARTIFACTS" && cp "$tmp/viewer.png" "$tmp/dom1.html" "$RDMEM_ARTIFACTS/"
fi
exit $failed
