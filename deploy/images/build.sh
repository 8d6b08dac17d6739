#!/usr/bin/env bash
# Builds OCI images of the kforge services without a daemon or a container
# engine, from Debian packages, reproducibly:
#
#   deploy/images/build.sh [--out DIR] [--build DIR] [--update-lock] [SERVICE...]
#
# SERVICE: learner, rollout, verifier (default: all three). Each image is two
# layers: a Debian bookworm root filesystem made by mmdebstrap
# (--variant=apt) with exactly the packages in bookworm.lock, at the pinned
# versions, and a layer with the service's files from the CMake build
# (--build, default build/: bin/ and share/kforge/), stripped of debug
# information. umoci turns them into an OCI image layout at DIR/oci
# (default build/images/oci), tagged learner-cpu, rollout-cpu, verifier-cpu;
# DIR/digests.txt lists each image's manifest digest and size.
#
# Reproducible: the same binaries, lock file and SOURCE_DATE_EPOCH (default:
# the commit time of HEAD) give the same digests. Every timestamp of the
# service layer and the image config is SOURCE_DATE_EPOCH; the root
# filesystem layer's are the lock's own epoch, so that layer keeps its digest
# across kforge commits. Files are sorted, owners numeric. Root filesystems
# are cached by the hash of their inputs under KFORGE_IMAGE_CACHE (default
# ~/.cache/kforge-images).
# A pinned version the mirror no longer serves (a Debian point release or a
# security update replaced it) fails the build naming it: run with
# --update-lock to re-pin to the mirror's current versions, and commit the
# lock. For bit-exact rebuilds later, point KFORGE_DEBIAN_MIRROR and
# KFORGE_DEBIAN_SECURITY at snapshot.debian.org as of the lock's date.
#
# Needs root (mmdebstrap's root mode; as another user it uses unshare
# mode with subuids) and the Debian packages mmdebstrap and umoci.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

out="$repo/build/images"
build="$repo/build"
update_lock=0
services=()
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --update-lock) update_lock=1; shift ;;
    learner|rollout|verifier) services+=("$1"); shift ;;
    *) sed -n '2,29p' "$0" >&2; exit 2 ;;
  esac
done
[ ${#services[@]} -gt 0 ] || services=(learner rollout verifier)
for tool in mmdebstrap umoci; do
  command -v "$tool" >/dev/null || { echo "build.sh: $tool missing (apt-get install mmdebstrap umoci)" >&2; exit 2; }
done

export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct)}
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
mirror=${KFORGE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${KFORGE_DEBIAN_SECURITY:-http://deb.debian.org/debian-security}
cache=${KFORGE_IMAGE_CACHE:-$HOME/.cache/kforge-images}
lock="$here/bookworm.lock"
mkdir -p "$out" "$cache"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# What each service's root filesystem holds beyond Debian's essential set:
# the shared libraries its binaries link (deploy/docker/runtime-packages.sh
# lists them from the ELF files), tini as PID 1, and for the verifier the
# Python with torch that runs candidates.
rootfs_of() { case $1 in verifier) echo python ;; *) echo torch ;; esac; }
roots_packages() {
  local base="tini ca-certificates libabsl20220623 libgrpc++1.51 libgrpc29 libprometheus-cpp-core1.0 libprotobuf32 libssl3"
  case $1 in
    torch) echo "$base libtorch1.13" ;;
    python) echo "$base python3 python3-torch" ;;
  esac
}

# The pinned closure of a root filesystem ("pkg=version,..."), from the lock.
pinned() { sed -n "s/^$1 //p" "$lock" | paste -sd, -; }
# The root filesystems' own SOURCE_DATE_EPOCH, fixed when the lock was made,
# so their layers (the bulk of each image) keep their digests from one
# kforge commit to the next.
lock_epoch() { sed -n 's/^epoch //p' "$lock"; }
rootfs_path() {  # variant, includes, epoch -> the cache path for those inputs
  local key
  key=$(printf '%s\n' "$1" "$2" "$mirror" "$security" "$3" "$(sed -n '/^mmdebstrap_rootfs()/,/^}/p' "$0")" |
        sha256sum | cut -c1-16)
  echo "$cache/rootfs-$1-$key.tar"
}

# mmdebstrap: variant, comma-separated packages, epoch, output tarball;
# writes the installed closure beside it (.packages).
mmdebstrap_rootfs() {
  local variant=$1 includes=$2 epoch=$3 tar=$4
  echo "build.sh: mmdebstrap the $variant root filesystem (a few minutes)" >&2
  # Documentation, manuals and translations out (licences kept), and what
  # only OpenGL would load (Mesa's drivers and the LLVM and Z3 they link,
  # Intel's media runtime): Debian's LibTorch depends on OpenCV's GUI and
  # video parts, which pull them in. The boot test starts every binary on
  # the result, so a library needed at load time cannot go missing
  # unnoticed. A kforge user and group (uid/gid 10001, as the pods run).
  # apt's auto-installed marks go: they differ between a build from the
  # direct packages (--update-lock) and one from the pinned closure, and a
  # runtime image never removes packages.
  if ! SOURCE_DATE_EPOCH=$epoch mmdebstrap --variant=apt --format=tar --include="$includes" \
      --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
      --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
      --dpkgopt='path-include=/usr/share/doc/*/copyright' \
      --dpkgopt='path-exclude=/usr/lib/x86_64-linux-gnu/dri/*' \
      --dpkgopt='path-exclude=/usr/lib/x86_64-linux-gnu/libLLVM-15.so*' \
      --dpkgopt='path-exclude=/usr/lib/x86_64-linux-gnu/libz3.so*' \
      --dpkgopt='path-exclude=/usr/lib/x86_64-linux-gnu/libmfxhw64.so*' \
      --dpkgopt='path-exclude=/usr/lib/x86_64-linux-gnu/mfx/*' \
      --customize-hook='echo "kforge:x:10001:10001:kforge:/home/kforge:/usr/sbin/nologin" >> "$1/etc/passwd"' \
      --customize-hook='echo "kforge:x:10001:" >> "$1/etc/group"' \
      --customize-hook='echo "kforge:!:0::::::" >> "$1/etc/shadow"' \
      --customize-hook='install -d -o 10001 -g 10001 -m 0755 "$1/home/kforge"' \
      --customize-hook='rm -f "$1"/var/log/apt/* "$1"/var/log/dpkg.log "$1"/var/log/alternatives.log "$1"/var/cache/debconf/*-old' \
      --customize-hook='rm -f "$1"/var/lib/apt/extended_states' \
      --customize-hook="chroot \"\$1\" dpkg-query -W -f='\${Package}=\${Version}\n' > '$work/$variant.packages'" \
      bookworm "$work/$variant.tar" \
      "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
      "deb $security bookworm-security main" >"$work/$variant.log" 2>&1; then
    tail -20 "$work/$variant.log" >&2
    echo "build.sh: mmdebstrap failed; if a pinned version is gone from the mirror, run --update-lock" >&2
    exit 1
  fi
  sort "$work/$variant.packages" > "${tar%.tar}.packages"
  mv "$work/$variant.tar" "$tar"
}

make_rootfs() {  # variant -> path of the cached tarball of its pinned closure
  local variant=$1 includes epoch tar
  includes=$(pinned "$variant")
  epoch=$(lock_epoch)
  [ -n "$includes" ] && [ -n "$epoch" ] || {
    echo "build.sh: no '$variant' packages or epoch in $lock (run with --update-lock)" >&2; exit 2; }
  tar=$(rootfs_path "$variant" "$includes" "$epoch")
  [ -f "$tar" ] || mmdebstrap_rootfs "$variant" "$includes" "$epoch" "$tar"
  echo "$tar"
}

if [ "$update_lock" = 1 ]; then
  # Newest versions of the direct packages; their closure becomes the pins,
  # and the tarball built here is cached as the pinned one.
  epoch=$(date -u +%s)
  {
    echo "# Debian bookworm packages of the kforge images, pinned: deploy/images/build.sh"
    echo "# --update-lock wrote this on $(date -u -d "@$epoch" +%Y-%m-%d) from $mirror and $security."
    echo "epoch $epoch"
  } > "$work/lock"
  for variant in torch python; do
    mmdebstrap_rootfs "$variant" "$(roots_packages "$variant" | tr ' ' ,)" "$epoch" "$work/unpinned.tar"
    sed "s/^/$variant /" "$work/unpinned.packages" >> "$work/lock"
    closure=$(paste -sd, "$work/unpinned.packages")
    target=$(rootfs_path "$variant" "$closure" "$epoch")
    mv "$work/unpinned.tar" "$target"
    mv "$work/unpinned.packages" "${target%.tar}.packages"
  done
  mv "$work/lock" "$lock"
  echo "build.sh: wrote $lock" >&2
fi

# The service's own layer: /opt/kforge/{bin,share/kforge}, as the binaries
# expect share/kforge beside bin/.
service_layer() {
  local svc=$1 stage="$work/stage-$1"
  mkdir -p "$stage/opt/kforge/bin" "$stage/opt/kforge/share/kforge"
  case $svc in
    learner) bins="kforge-learner kforge"; data=tasks ;;
    rollout) bins="kforge-rollout kforge"; data=tasks ;;
    verifier) bins="kforge-verifier"; data=harness ;;
  esac
  for b in $bins; do
    [ -x "$build/bin/$b" ] || { echo "build.sh: $build/bin/$b missing (scripts/build.sh first)" >&2; exit 2; }
    objcopy --strip-debug "$build/bin/$b" "$stage/opt/kforge/bin/$b"
  done
  cp -r "$build/share/kforge/$data" "$stage/opt/kforge/share/kforge/"
  find "$stage" -name __pycache__ -prune -exec rm -rf {} +
  chmod -R u=rwX,go=rX "$stage"
  tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --clamp-mtime --owner=0 --group=0 --numeric-owner \
      --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
      -C "$stage" -cf "$work/$svc.tar" opt
  echo "$work/$svc.tar"
}

port_of() { case $1 in learner) echo 50051 ;; verifier) echo 50052 ;; rollout) echo 50053 ;; esac; }

layout="$out/oci"
[ -d "$layout" ] || umoci init --layout "$layout"
: > "$work/digests"
for svc in "${services[@]}"; do
  variant=$(rootfs_of "$svc")
  rootfs=$(make_rootfs "$variant")
  layer=$(service_layer "$svc")
  tag="$svc-cpu"
  image="$layout:$tag"
  umoci new --image "$image"
  umoci raw add-layer --image "$image" --history.created "$created" \
    --history.created_by "mmdebstrap --variant=apt bookworm ($variant; deploy/images/bookworm.lock)" \
    "$rootfs"
  umoci raw add-layer --image "$image" --history.created "$created" \
    --history.created_by "kforge $svc $(git -C "$repo" describe --always --dirty 2>/dev/null || echo unknown)" \
    "$layer"
  # tini as PID 1 reaps the sandboxes' orphans and passes SIGTERM on, on
  # which the service drains. The CMD is the ConfigMap the pods mount.
  umoci config --image "$image" --no-history --created "$created" --author kforge \
    --architecture amd64 --os linux --config.user 10001:10001 --config.workingdir /home/kforge \
    --config.env PATH=/opt/kforge/bin:/usr/local/bin:/usr/bin:/bin \
    --config.env HOME=/tmp --config.env PYTHONDONTWRITEBYTECODE=1 \
    --config.entrypoint /usr/bin/tini --config.entrypoint -- --config.entrypoint "kforge-$svc" \
    --config.cmd --config --config.cmd "/etc/kforge/$svc.json" \
    --config.exposedports "$(port_of "$svc")/tcp" --config.exposedports 9090/tcp \
    --config.label org.opencontainers.image.title="kforge-$svc" \
    --config.label org.opencontainers.image.created="$created" \
    --manifest.annotation org.opencontainers.image.ref.name="$tag"
  echo "$svc $variant" >> "$work/digests"
done
umoci gc --layout "$layout"

# Digest and size (compressed layers + config, what a registry stores) of
# each image, from the layout's index.
python3 - "$layout" "$work/digests" "$out/digests.txt" <<'PY'
import json, sys, os
layout, done, target = sys.argv[1:]
index = json.load(open(os.path.join(layout, "index.json")))
blob = lambda d: os.path.join(layout, "blobs", *d.split(":"))
rows = {}
if os.path.exists(target):
    for line in open(target):
        if line.strip() and not line.startswith("#"):
            rows[line.split()[0]] = line.rstrip("\n")
for svc, variant in (l.split() for l in open(done)):
    tag = f"{svc}-cpu"
    desc = next(m for m in index["manifests"]
                if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag)
    manifest = json.load(open(blob(desc["digest"])))
    size = manifest["config"]["size"] + sum(l["size"] for l in manifest["layers"])
    rows[f"kforge-{svc}"] = f"kforge-{svc} {tag} {desc['digest']} {size}"
with open(target, "w") as f:
    f.write("# image tag manifest-digest compressed-bytes\n")
    for k in sorted(rows):
        f.write(rows[k] + "\n")
print(open(target).read(), end="")
PY
