#!/usr/bin/env bash
# For a GPU node that has PyTorch but no Debian packages (and no network): fetches, on a
# Debian 12 machine, what scripts/gpu-check.sh needs besides PyTorch (protoc, protobuf and
# Gloo's headers) and unpacks it into DIR/root, to be copied to the node:
#   scripts/gpu-node-deps.sh DIR        # here, then copy DIR to the node's checkout
#   PROTOBUF_ROOT=DIR/root/usr GLOO_ROOT=DIR/root/usr/include scripts/gpu-check.sh   # there
# Links become copies (some copy tools carry no links); static libraries are left out.
set -euo pipefail
dir="${1:?usage: $0 DIR}"
packages=(protobuf-compiler libprotoc32 libprotobuf32 libprotobuf-dev libgloo-dev)
debs="$(mktemp -d)"
trap 'rm -rf "$debs"' EXIT
chmod 777 "$debs" # apt-get download drops root to _apt for the download
(cd "$debs" && apt-get download "${packages[@]}")
rm -rf "$dir/root"
mkdir -p "$dir/root"
for deb in "$debs"/*.deb; do dpkg -x "$deb" "$dir/root"; done
rm -rf "$dir/root/usr/share/doc"
find "$dir/root" -name '*.a' -delete
find "$dir/root" -type l | while read -r link; do
    target="$(readlink -f "$link")"
    rm "$link"
    if [ -e "$target" ]; then cp "$target" "$link"; fi # a link to nothing unpacked goes
done
echo "gpu-node-deps: $(du -sh "$dir/root" | cut -f1) in $dir/root; on the node:" \
     "PROTOBUF_ROOT=$dir/root/usr GLOO_ROOT=$dir/root/usr/include scripts/gpu-check.sh"
