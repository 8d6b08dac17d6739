#!/usr/bin/env bash
# Points the kustomize base at the images build.sh made, by digest:
#
#   deploy/images/pin.sh REGISTRY [DIGESTS]      # e.g. registry.example.com/kforge
#
# Rewrites the `images:` block of deploy/k8s/base/kustomization.yaml so each
# role (kforge-learner, kforge-rollout, kforge-verifier) is
# REGISTRY/kforge-<service>@<manifest digest> from DIGESTS (default
# build/images/digests.txt), and renames the GPU overlay's entries to match
# (they replace the CPU images with the CUDA ones by tag or digest). Push the
# images first with their digests kept:
#   skopeo copy --preserve-digests oci:build/images/oci:learner-cpu docker://REGISTRY/kforge-learner:cpu
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
[ $# -ge 1 ] || { sed -n '2,12p' "$0" >&2; exit 2; }
registry=${1%/}
digests=${2:-$repo/build/images/digests.txt}
python3 - "$registry" "$digests" "$repo/deploy/k8s/base/kustomization.yaml" \
  "$repo/deploy/k8s/overlays/gpu/kustomization.yaml" <<'PY'
import re, sys
registry, digests, base, gpu = sys.argv[1:]
pins = {}
for line in open(digests):
    if line.strip() and not line.startswith("#"):
        name, _tag, digest, _size = line.split()
        pins[name] = digest
missing = {"kforge-learner", "kforge-rollout", "kforge-verifier"} - pins.keys()
if missing:
    sys.exit(f"pin.sh: {digests} has no digest for {', '.join(sorted(missing))}")
text = open(base).read()
head = text[: text.index("images:\n")]
block = "images:\n" + "".join(
    f"  - name: {name}\n    newName: {registry}/{name}\n    digest: {pins[name]}\n"
    for name in sorted(pins))
open(base, "w").write(head + block)
overlay = open(gpu).read()
overlay = re.sub(r"(  - name: )\S*/(kforge-(?:learner|rollout|verifier))\n",
                 lambda m: f"{m.group(1)}{registry}/{m.group(2)}\n", overlay)
open(gpu, "w").write(overlay)
for name in sorted(pins):
    print(f"{name}: {registry}/{name}@{pins[name]}")
PY
