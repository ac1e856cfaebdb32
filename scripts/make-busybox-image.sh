#!/usr/bin/env bash
# Builds a minimal OCI image from Debian's static busybox (package busybox-static) and imports it
# into Podman's store under NAME, unless it is there already: the image the container tests and
# bench/launcher_bench run (no registry is reachable from the project's machines). Given
# ARCHIVE, it also saves the image there as an OCI archive, the format of an agent's image
# directory (docs/containers.md, "The node's image cache").
#   scripts/make-busybox-image.sh NAME [ARCHIVE]
set -euo pipefail
name=${1:?usage: make-busybox-image.sh NAME [ARCHIVE]}
archive=${2:-}
save() {
  if [ -n "$archive" ]; then podman save -q --format oci-archive -o "$archive" "$name"; fi
}
if podman image exists "$name"; then
  save
  exit 0
fi
busybox=/bin/busybox
[ -x "$busybox" ] || busybox=/usr/bin/busybox
root=$(mktemp -d /tmp/gpool-image-XXXXXX)
trap 'rm -rf "$root"' EXIT
r=$root/rootfs
mkdir -p "$r/bin" "$r/etc" "$r/tmp" "$r/dev" "$r/proc" "$r/sys"
cp "$busybox" "$r/bin/busybox"
for a in sh id ls cat echo env sleep dd grep head true test mkdir touch; do
  ln -s busybox "$r/bin/$a"
done
echo gpool-test-image > "$r/etc/gpool-image"
chmod 1777 "$r/tmp"
tar -C "$r" -cf "$root/image.tar" .
podman import -q "$root/image.tar" "$name" > /dev/null
save
