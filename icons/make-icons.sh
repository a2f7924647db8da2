#!/usr/bin/env bash
# Regenerates every icon in this directory from the drawing below.
# Needs ImageMagick 6 (/usr/bin/convert; on this project's Linux machines /usr/local/bin/convert
# is a stand-in) and ui/node_modules (for `tauri icon`). Run: icons/make-icons.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
convert=${CONVERT:-/usr/bin/convert}
[[ -x $convert ]] || convert=$(command -v convert)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

# App icon: a rounded slate square holding an arched door (a postern is a small back gate).
"$convert" -size 1024x1024 gradient:'#3a4a6b'-'#121826' grad.png
"$convert" -size 1024x1024 xc:none -fill white -draw 'roundrectangle 64,64 960,960 200,200' mask.png
"$convert" grad.png mask.png -alpha off -compose CopyOpacity -composite base.png
"$convert" -size 1024x1024 gradient:'#5eead4'-'#2cb5a0' teal.png
"$convert" -size 1024x1024 xc:none -fill white \
  -draw 'circle 512,442 512,302' -draw 'rectangle 372,442 652,800' doormask.png
"$convert" teal.png doormask.png -alpha off -compose CopyOpacity -composite door.png
"$convert" base.png \
  -fill '#e9eef8' -draw 'circle 512,430 512,230' -draw 'rectangle 312,430 712,800' \
  door.png -compose over -composite \
  -fill '#e9eef8' -draw 'roundrectangle 236,800 788,836 12,12' \
  -fill '#121826' -draw 'circle 600,600 600,618' \
  -depth 8 PNG32:source-1024.png

# Tray: the arch alone. Black for macOS (a template image the menu bar recolours), light for Linux panels.
"$convert" -size 64x64 xc:none -fill black -draw 'circle 32,26 32,10' -draw 'rectangle 16,26 48,54' \
  \( -size 64x64 xc:none -fill white -draw 'circle 32,28 32,18' -draw 'rectangle 22,28 42,54' \) \
  -compose DstOut -composite -compose over -fill black -draw 'rectangle 8,54 56,58' \
  PNG32:tray-template.png
"$convert" tray-template.png -fill '#e9eef8' -colorize 100 PNG32:tray.png

"$here/../ui/node_modules/.bin/tauri" icon source-1024.png -o out >/dev/null 2>&1
cp source-1024.png tray.png tray-template.png "$here/"
cp out/32x32.png out/128x128.png out/128x128@2x.png out/icon.png out/icon.icns out/icon.ico "$here/"
echo "icons written to $here"
