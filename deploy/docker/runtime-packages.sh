#!/bin/sh
# Prints the Debian/Ubuntu packages that hold the shared libraries the given
# ELF files link directly (their DT_NEEDED entries), one per line, so a
# runtime image installs exactly those (apt adds their own dependencies).
# Used in the build stages of cpu.Dockerfile:
#   runtime-packages.sh build/bin/kforge-learner > learner.packages
# Libraries no package owns (a prefix of our own, PyTorch's wheel) are
# skipped: those images copy them.
set -eu
for elf in "$@"; do
  readelf -d "$elf" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'
done | sort -u | while read -r soname; do
  path=$(ldconfig -p | awk -v s="$soname" '$1 == s && /x86-64|AArch64/ {print $NF; exit}')
  [ -n "$path" ] || continue
  # usrmerge: dpkg may record /lib/... or /usr/lib/...
  for p in "$path" "$(readlink -f "$path")" "/usr$path" "${path#/usr}"; do
    pkg=$(dpkg -S "$p" 2>/dev/null | head -1 | cut -d: -f1) && [ -n "$pkg" ] && { echo "$pkg"; break; }
  done
done | sort -u
