#!/usr/bin/env bash
# Fetch the runtime pieces the GPU check needs but the GPU host lacks, on a
# machine WITH network (Debian 12, as root):
#   libunwind8    -> .gpu/root/usr/lib/x86_64-linux-gnu/libunwind.so.8
#                    (libdsmemtrace dlopens libunwind.so.8 for native stacks)
#   libunwind-dev -> headers and the libunwind.so link, for completeness
# Only downloads (apt-get download) and unpacks (dpkg -x): nothing is
# installed on this machine.  .gpu/ is git-ignored; carry it (or just
# .gpu/root) to the GPU host, where scripts/run-gpu-check.sh puts
# .gpu/root/usr/lib/x86_64-linux-gnu on LD_LIBRARY_PATH.
#
# Usage: bash scripts/gpu-deps.sh          (from anywhere; works in the repo root)
set -euo pipefail

root_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root_dir"

pkgs=(libunwind8 libunwind-dev)
debs=.gpu/debs
dest=.gpu/root
libdir=$dest/usr/lib/x86_64-linux-gnu

for tool in apt-get apt-cache dpkg; do
	command -v "$tool" >/dev/null || { echo "gpu-deps: $tool not found (needs a Debian/Ubuntu machine)" >&2; exit 1; }
done

# An empty package list (fresh machine) gives no candidate: update once.
if ! apt-cache show libunwind8 >/dev/null 2>&1; then
	echo "gpu-deps: no package lists yet, running apt-get update" >&2
	apt-get update -qq
fi

rm -rf "$debs" "$dest"
mkdir -p "$debs" "$dest"
# apt-get download writes into the current directory.  As root it may warn
# that the download runs unsandboxed; harmless.
for p in "${pkgs[@]}"; do
	(cd "$debs" && apt-get download -q "$p") || {
		echo "gpu-deps: apt-get download $p failed" >&2
		# libunwind8 is the one that matters; the -dev package is optional.
		[ "$p" = libunwind8 ] && exit 1
	}
done

for d in "$debs"/*.deb; do
	dpkg -x "$d" "$dest"
done

# Keep it small: static archives and docs are not needed on the GPU host.
find "$dest" -name '*.a' -delete
rm -rf "$dest/usr/share/doc" "$dest/usr/share/man"

if [ ! -e "$libdir/libunwind.so.8" ]; then
	echo "gpu-deps: $libdir/libunwind.so.8 missing after unpacking" >&2
	exit 1
fi

# Check the unpacked library loads on its own (its deps: libc, liblzma).
if command -v python3 >/dev/null; then
	python3 -c 'import ctypes, sys; ctypes.CDLL(sys.argv[1])' "$PWD/$libdir/libunwind.so.8" ||
		{ echo "gpu-deps: $libdir/libunwind.so.8 does not load" >&2; exit 1; }
fi

echo "gpu-deps: ok: $(cd "$debs" && echo *.deb)"
echo "gpu-deps: $libdir/libunwind.so.8 -> $(readlink "$libdir/libunwind.so.8" || echo file)"
echo "gpu-deps: .gpu/ is $(du -sh .gpu | cut -f1) ($(du -sh "$dest" | cut -f1) in $dest)"
