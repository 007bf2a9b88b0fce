#!/usr/bin/env bash
# The PostgreSQL 18 extension image (called by scripts/package.sh):
#
#   scripts/image.sh STAGE OUT
#
# STAGE is what stage_build lays out (lib/, extension/); writes
# OUT/leaderlock-VERSION-pg18-oci.tar, an OCI image layout (tar) holding one
# image, FROM scratch, with only the extension's files where CloudNativePG's
# image volumes look for them:
#
#   /lib/leaderlock.so                      (dynamic_library_path: <mount>/lib)
#   /share/extension/leaderlock.control     (extension_control_path: <mount>/share)
#   /share/extension/leaderlock--*.sql
#   /licenses/leaderlock/copyright
#
# tagged as CloudNativePG's own extension images are,
# VERSION-18-bookworm and VERSION-YYYYMMDDhhmm-18-bookworm (built on Debian
# 12; the library needs glibc 2.34 or newer, so it runs on the bookworm and
# trixie PostgreSQL images). Built with umoci (from Debian): no daemon, no
# root needed for the layout itself. Push it with skopeo:
#   skopeo copy oci-archive:leaderlock-VERSION-pg18-oci.tar:VERSION-18-bookworm \
#     docker://registry.example.com/leaderlock:VERSION-18-bookworm
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[ $# -eq 2 ] || { echo "usage: $0 STAGE OUT" >&2; exit 2; }
stage=$1 out=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: "${SOURCE_DATE_EPOCH:=$(stat -c %Y "$REPO_ROOT/Cargo.toml")}"
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
tag=$EXT_VERSION-18-bookworm
stamped=$EXT_VERSION-$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y%m%d%H%M)-18-bookworm

root=$tmp/root
mkdir -p "$root/lib" "$root/share/extension" "$root/licenses/leaderlock"
install -m 644 "$stage/lib/leaderlock.so" "$root/lib/"
install -m 644 "$stage"/extension/* "$root/share/extension/"
install -m 644 "$REPO_ROOT/LICENSE" "$root/licenses/leaderlock/copyright"
find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

layout=$tmp/oci
umoci init --layout "$layout"
umoci new --image "$layout:$tag"
umoci insert --image "$layout:$tag" --history.created "$created" "$root" /
labels=(
  org.opencontainers.image.title="leaderlock $EXT_VERSION 18 bookworm"
  org.opencontainers.image.description="leaderlock, leader election inside PostgreSQL: the extension's files for PostgreSQL 18 image volumes"
  org.opencontainers.image.version="$EXT_VERSION"
  org.opencontainers.image.created="$created"
  org.opencontainers.image.licenses=PostgreSQL
  org.opencontainers.image.base.name=scratch
  io.cloudnativepg.image.base.pgmajor=18
  io.cloudnativepg.image.base.os=bookworm
)
args=(--architecture amd64 --os linux --created "$created" --history.created "$created")
for l in "${labels[@]}"; do
  args+=(--config.label "$l" --manifest.annotation "$l")
done
umoci config --image "$layout:$tag" "${args[@]}"
umoci gc --layout "$layout"
umoci tag --image "$layout:$tag" "$stamped"
tar --sort=name --owner=0 --group=0 --mtime="@$SOURCE_DATE_EPOCH" -cf "$out/leaderlock-$EXT_VERSION-pg18-oci.tar" -C "$layout" .
log "wrote $out/leaderlock-$EXT_VERSION-pg18-oci.tar (tags $tag, $stamped)"
