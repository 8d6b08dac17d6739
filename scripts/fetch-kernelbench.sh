#!/usr/bin/env bash
# Exports KernelBench's own tree, at one pinned commit, into an ignored folder
# for bench/kernelbench_peer.py (KernelBench's eval_kernel_against_ref as the
# peer that kforge's verifier is benchmarked against). Carried to the GPU
# machine, which has no network, so what is dropped here is what the peer
# never reads: assets/ (figures) and notebooks/ (1.8 MB); the rest is 1.1 MB (2.1 MB on disk).
#   scripts/fetch-kernelbench.sh [DEST]        (default .gpu-work/kernelbench-repo)
# Sources, in order:
#   KFORGE_KERNELBENCH_GIT=/path/to/repo.git   a local git directory holding the
#                                              commit: git archive, no network;
#   otherwise git clone of KFORGE_KERNELBENCH_URL (default the GitHub repository)
#   and git checkout of the pinned commit.
# Idempotent: DEST holding the pinned commit's stamp is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."

# main of ScalingIntelligence/KernelBench, 2026-03-05 ("update all legacy python
# commands to UV + document integration (#143)").
commit=423217d9fda91e0c2d67e4a43bf62f96f6d104f1
url=${KFORGE_KERNELBENCH_URL:-https://github.com/ScalingIntelligence/KernelBench.git}
dest=${1:-.gpu-work/kernelbench-repo}
stamp=.kforge-kernelbench-commit

if [ "$(cat "$dest/$stamp" 2>/dev/null)" = "$commit" ]; then
  echo "kernelbench: $dest already holds $commit ($(du -sh --apparent-size "$dest" | cut -f1))"
  exit 0
fi
# Never delete a folder this script did not make.
if [ -e "$dest" ] && [ ! -f "$dest/$stamp" ] && [ -n "$(ls -A "$dest" 2>/dev/null)" ]; then
  echo "kernelbench: $dest exists, is not empty and was not made by this script; remove it or pick another folder" >&2
  exit 1
fi

mkdir -p "$(dirname "$dest")"
tmp=$(mktemp -d "$(dirname "$dest")/.kernelbench-tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/tree"

how=
if [ -n "${KFORGE_KERNELBENCH_GIT:-}" ]; then
  if git --git-dir="$KFORGE_KERNELBENCH_GIT" cat-file -e "$commit^{commit}" 2>/dev/null &&
     git --git-dir="$KFORGE_KERNELBENCH_GIT" archive "$commit" | tar -x -C "$tmp/tree"; then
    how="git archive from $KFORGE_KERNELBENCH_GIT"
  else
    echo "kernelbench: $KFORGE_KERNELBENCH_GIT does not hold $commit; trying $url" >&2
    rm -rf "$tmp/tree" && mkdir "$tmp/tree"
  fi
fi
if [ -z "$how" ]; then
  if git clone -q "$url" "$tmp/clone" 2>"$tmp/clone.log" &&
     git -C "$tmp/clone" -c advice.detachedHead=false checkout -q "$commit" 2>>"$tmp/clone.log"; then
    rm -rf "$tmp/clone/.git" "$tmp/tree"
    mv "$tmp/clone" "$tmp/tree"
    how="git clone of $url"
  else
    echo "kernelbench: cannot get commit $commit: ${KFORGE_KERNELBENCH_GIT:+$KFORGE_KERNELBENCH_GIT lacks it and }git clone of $url failed ($(tail -n1 "$tmp/clone.log")). Set KFORGE_KERNELBENCH_GIT to a local git directory that holds it." >&2
    exit 1
  fi
fi

rm -rf "$tmp/tree/assets" "$tmp/tree/notebooks"
echo "$commit" >"$tmp/tree/$stamp"
rm -rf "$dest"
mv "$tmp/tree" "$dest"
echo "kernelbench: exported $commit into $dest by $how ($(du -sh --apparent-size "$dest" | cut -f1))"
