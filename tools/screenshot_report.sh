#!/usr/bin/env bash
# The tour's report as a person sees it: headless Chromium (Debian's `chromium` package) renders
# the page to a PNG, then the PNG is checked to be an image of the page's full size.
#   tools/screenshot_report.sh [report.html] [out.png] [width]   defaults: tour/report.html tour/report.png 1100
set -euo pipefail
html=${1:-tour/report.html}
png=${2:-tour/report.png}
width=${3:-1100}
command -v chromium > /dev/null || { echo "screenshot_report: chromium is not installed (apt-get install chromium)" >&2; exit 2; }
[ -s "$html" ] || { echo "screenshot_report: no report at $html" >&2; exit 2; }
# --screenshot captures the window: make it tall enough for the table and every chart.
height=$(( $(grep -c "<svg" "$html") * 330 + 800 ))
rm -f "$png"
# --no-sandbox: Chromium's sandbox refuses to run as root, as CI and these machines do.
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size="$width,$height" \
  --screenshot="$(realpath -m "$png")" "file://$(realpath "$html")" > /dev/null 2>&1 || true
# A PNG of the window's size: signature, then IHDR's width and height (big-endian, bytes 16-23).
[ -s "$png" ] || { echo "screenshot_report: chromium wrote no $png" >&2; exit 1; }
[ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || { echo "screenshot_report: $png is not a PNG" >&2; exit 1; }
read -r w h < <(od -An -tu1 -j16 -N8 "$png" | awk '{print $1*16777216+$2*65536+$3*256+$4, $5*16777216+$6*65536+$7*256+$8}')
[ "$w" = "$width" ] && [ "$h" = "$height" ] || { echo "screenshot_report: $png is ${w}x$h, expected ${width}x$height" >&2; exit 1; }
echo "$png (${w}x$h)"
