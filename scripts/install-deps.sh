#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages named as arguments that are missing.
# As root it runs apt-get; otherwise it uses sudo when sudo works without
# a password prompt failing, and else prints the one command to run and
# exits 1, instead of failing halfway with "sudo: Permission denied".
set -euo pipefail
missing=()
for p in "$@"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
	sudo apt-get update -qq
	sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
elif [ -t 0 ] && command -v sudo >/dev/null 2>&1 && sudo -v; then
	sudo apt-get update -qq
	sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
else
	echo "These packages are missing and this user cannot install them (not root, no sudo)." >&2
	echo "Ask an administrator to run:" >&2
	echo "  apt-get install ${missing[*]}" >&2
	exit 1
fi
