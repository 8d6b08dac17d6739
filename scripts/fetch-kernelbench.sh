#!/usr/bin/env bash
# Fetches KernelBench (github.com/ScalingIntelligence/KernelBench) at one
# pinned commit into an ignored folder. Its problems are someone else's code
# and stay out of kforge's tree; tests, benchmarks and `kforge eval` look for
# them, in this order (scripts/kernelbench-dir.sh, common/paths/kernelbench_dir.h):
#   1. $KFORGE_KERNELBENCH_DIR   a folder holding level1/, level2/, ...
#   2. third_party/kernelbench/KernelBench   what this script fetches
#   3. ../shared/kernelbench     beside the checkout (this project's CI)
#
#   scripts/fetch-kernelbench.sh [DEST]     (default third_party/kernelbench)
#   scripts/fetch-kernelbench.sh --setup    what setup-debian.sh runs: never
#       fails; skips the fetch when $KFORGE_KERNELBENCH_DIR names a copy, and
#       moves on at once, saying so, when github.com cannot be reached.
#
# Sources, in order:
#   KFORGE_KERNELBENCH_GIT=/path/to/repo.git   a local git directory holding the
#                                              commit: git archive, no network;
#   otherwise a shallow fetch of the pinned commit from KFORGE_KERNELBENCH_URL
#   (default the GitHub repository), or a full clone where the server will not
#   serve a commit by its id.
# The export drops assets/ (figures) and notebooks/ (1.8 MB); the rest is
# 1.1 MB, the whole tree (bench/kernelbench_peer.py runs its evaluator).
# Idempotent: DEST holding the pinned commit's stamp is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."

# main of ScalingIntelligence/KernelBench, 2026-03-05 ("update all legacy python
# commands to UV + document integration (#143)").
commit=423217d9fda91e0c2d67e4a43bf62f96f6d104f1
url=${KFORGE_KERNELBENCH_URL:-https://github.com/ScalingIntelligence/KernelBench.git}
stamp=.kforge-kernelbench-commit
# An offline machine answers at once (no DNS) or never (packets dropped): a
# reachability probe bounded by this many seconds keeps setup from hanging.
probe_timeout_s=${KFORGE_KERNELBENCH_PROBE_S:-15}

setup=0
if [ "${1:-}" = --setup ]; then setup=1; shift; fi
dest=${1:-third_party/kernelbench}

say() { echo "kernelbench: $*"; }
# In setup mode a failure is reported and setup goes on: KernelBench only
# widens the tests, it is not needed to build or run kforge.
give_up() {
  if [ "$setup" = 1 ]; then
    say "$1"
    if found=$(scripts/kernelbench-dir.sh); then
      say "tests, benchmarks and kforge eval use $found"
    else
      say "tests that need KernelBench will skip; set KFORGE_KERNELBENCH_DIR to a copy (a folder holding level1/) or run scripts/fetch-kernelbench.sh when online"
    fi
    exit 0
  fi
  echo "kernelbench: $1" >&2
  exit 1
}

if [ "$setup" = 1 ] && [ -n "${KFORGE_KERNELBENCH_DIR:-}" ]; then
  if [ -d "$KFORGE_KERNELBENCH_DIR/level1" ]; then
    say "using KFORGE_KERNELBENCH_DIR=$KFORGE_KERNELBENCH_DIR; nothing to fetch"
    exit 0
  fi
  say "KFORGE_KERNELBENCH_DIR=$KFORGE_KERNELBENCH_DIR has no level1/; fetching into $dest"
fi

if [ "$(cat "$dest/$stamp" 2>/dev/null)" = "$commit" ]; then
  say "$dest already holds $commit ($(du -sh --apparent-size "$dest" | cut -f1))"
  exit 0
fi
# Never delete a folder this script did not make.
if [ -e "$dest" ] && [ ! -f "$dest/$stamp" ] && [ -n "$(ls -A "$dest" 2>/dev/null)" ]; then
  give_up "$dest exists, is not empty and was not made by this script; remove it or pick another folder"
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
    say "$KFORGE_KERNELBENCH_GIT does not hold $commit; trying $url"
    rm -rf "$tmp/tree" && mkdir "$tmp/tree"
  fi
fi
if [ -z "$how" ]; then
  # Slow links are given up on too (under 1 kB/s for 20 s), not only dead ones.
  export GIT_HTTP_LOW_SPEED_LIMIT=1000 GIT_HTTP_LOW_SPEED_TIME=20 GIT_TERMINAL_PROMPT=0
  started=$(date +%s)
  if ! timeout "$probe_timeout_s" git ls-remote -q "$url" HEAD > /dev/null 2> "$tmp/probe.log"; then
    why=$(grep -m1 -E "fatal|error" "$tmp/probe.log" | sed "s/^fatal: //; s/^unable to access '[^']*': //" || true)
    give_up "cannot reach $url in $(( $(date +%s) - started )) s (${why:-no answer within ${probe_timeout_s} s}); offline? not fetched"
  fi
  say "fetching $commit from $url"
  git init -q "$tmp/clone"
  if git -C "$tmp/clone" fetch -q --depth 1 "$url" "$commit" 2> "$tmp/clone.log" &&
     git -C "$tmp/clone" -c advice.detachedHead=false checkout -q FETCH_HEAD 2>> "$tmp/clone.log"; then
    how="shallow fetch from $url"
  else
    rm -rf "$tmp/clone"
    if git clone -q "$url" "$tmp/clone" 2>> "$tmp/clone.log" &&
       git -C "$tmp/clone" -c advice.detachedHead=false checkout -q "$commit" 2>> "$tmp/clone.log"; then
      how="git clone of $url"
    else
      give_up "cannot get commit $commit from $url ($(tail -n1 "$tmp/clone.log")); set KFORGE_KERNELBENCH_GIT to a local git directory that holds it"
    fi
  fi
  rm -rf "$tmp/clone/.git" "$tmp/tree"
  mv "$tmp/clone" "$tmp/tree"
fi

rm -rf "$tmp/tree/assets" "$tmp/tree/notebooks"
if [ ! -d "$tmp/tree/KernelBench/level1" ]; then
  give_up "commit $commit has no KernelBench/level1/; not installed"
fi
echo "$commit" > "$tmp/tree/$stamp"
rm -rf "$dest"
mv "$tmp/tree" "$dest"
say "exported $commit into $dest by $how ($(du -sh --apparent-size "$dest" | cut -f1)); problems in $dest/KernelBench"
