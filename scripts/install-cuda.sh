#!/usr/bin/env bash
# Puts the parts of Debian 12's CUDA 11.8 toolkit that `make cuda` needs
# (nvcc, cicc, ptxas, libdevice; the CUDA headers and the stub libcuda.so
# that links the driver API) into one user folder, without root and without
# touching the system: the .debs are fetched with `apt-get download` using a
# private sources list (Debian's non-free component, where the toolkit is)
# and a private package-list folder, and unpacked with dpkg-deb. Nothing is
# installed system-wide; the NVIDIA driver is not needed to build.
#
# Usage: install-cuda.sh [DIR]   (default: $XDG_CACHE_HOME/arborist/cuda-11.8,
# or ~/.cache/arborist/cuda-11.8). DIR/root is the unpacked tree; a finished
# unpack is reused. Prints DIR on success; any failure (no network, a
# package missing) exits non-zero with the reason, so CI fails loudly.
set -euo pipefail

DEST=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/arborist/cuda-11.8}
ROOT=$DEST/root
NVCC=$ROOT/usr/lib/nvidia-cuda-toolkit/bin/nvcc
# The packages and the members of each that the build needs. nvidia-cuda-dev
# is 774 MB (static libraries of every CUDA library); only its headers and
# the stub libcuda.so are unpacked.
TOOLKIT=nvidia-cuda-toolkit
DEV=nvidia-cuda-dev
WANT_VERSION=11.8

if [ -f "$DEST/.complete" ] && [ -x "$NVCC" ]; then
	echo "$DEST"
	exit 0
fi

for tool in apt-get dpkg-deb tar; do
	command -v "$tool" >/dev/null 2>&1 || { echo "install-cuda: $tool not found (this script needs Debian 12 or a derivative)" >&2; exit 1; }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/debs"
printf 'deb http://deb.debian.org/debian bookworm main contrib non-free non-free-firmware\n' >"$work/sources.list"
# Private lists and cache, no lock on the system's apt folders, and no
# privilege drop to _apt (which could not write a user's folder), so this
# runs as any user.
apt_opts=(
	-o Dir::Etc::sourcelist="$work/sources.list"
	-o Dir::Etc::sourceparts=/dev/null
	-o Dir::State::lists="$work/lists"
	-o Dir::State::status=/dev/null
	-o Dir::Cache="$work/cache"
	-o Debug::NoLocking=1
	-o APT::Sandbox::User="$(id -un)"
)
echo "install-cuda: fetching the package lists of Debian bookworm (main contrib non-free)" >&2
apt-get -q "${apt_opts[@]}" update >&2 || { echo "install-cuda: apt-get update failed (network?)" >&2; exit 1; }
echo "install-cuda: downloading $TOOLKIT and $DEV (about 860 MB)" >&2
(cd "$work/debs" && apt-get -q "${apt_opts[@]}" download "$TOOLKIT" "$DEV" >&2) ||
	{ echo "install-cuda: apt-get download $TOOLKIT $DEV failed" >&2; exit 1; }

rm -rf "$DEST.tmp"
mkdir -p "$DEST.tmp/root"
dpkg-deb -x "$work/debs/${TOOLKIT}_"*.deb "$DEST.tmp/root"
dpkg-deb --fsys-tarfile "$work/debs/${DEV}_"*.deb |
	tar -x -C "$DEST.tmp/root" ./usr/include ./usr/lib/x86_64-linux-gnu/stubs/libcuda.so

bin=$DEST.tmp/root/usr/lib/nvidia-cuda-toolkit/bin
# Debian's nvcc.profile is a link to /etc/nvcc.profile with absolute /usr
# paths; this one finds everything relative to the unpacked tree. Debian's
# gcc/g++ wrappers (which look for g++-11 and older) are removed: the
# Makefile names the host compiler itself.
rm -f "$bin/nvcc.profile" "$bin/gcc" "$bin/g++"
cat >"$bin/nvcc.profile" <<'EOF'
TOP = $(_HERE_)/../../../..
NVVMIR_LIBRARY_DIR = $(TOP)/usr/lib/nvidia-cuda-toolkit/libdevice
PATH += $(TOP)/usr/lib/nvidia-cuda-toolkit/bin:$(TOP)/usr/bin:
INCLUDES += "-I$(TOP)/usr/include" $(_SPACE_)
LIBRARIES =+ $(_SPACE_) "-L$(TOP)/usr/lib/x86_64-linux-gnu/stubs"
EOF

got=$("$bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p')
if [ "$got" != "$WANT_VERSION" ]; then
	echo "install-cuda: expected nvcc $WANT_VERSION, got '${got:-nothing}'" >&2
	exit 1
fi
test -f "$DEST.tmp/root/usr/include/cuda.h" || { echo "install-cuda: cuda.h missing from $DEV" >&2; exit 1; }
test -f "$DEST.tmp/root/usr/lib/x86_64-linux-gnu/stubs/libcuda.so" || { echo "install-cuda: stub libcuda.so missing from $DEV" >&2; exit 1; }

rm -rf "$DEST"
mv "$DEST.tmp" "$DEST"
touch "$DEST/.complete"
echo "install-cuda: CUDA $got in $DEST ($(du -sh "$DEST" | cut -f1))" >&2
echo "$DEST"
