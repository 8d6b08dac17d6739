#!/usr/bin/env bash
# The slow image test (not in `scripts/test.sh`; run it on its own, as root,
# with Debian's mirror reachable):
#
#   deploy/images/test-images.sh [--keep DIR]
#
# Builds the CPU images (deploy/images/build.sh, from build/), then for each
# of learner, verifier and rollout: unpacks it with umoci, starts the
# image's own entrypoint (tini and the service, as the image's user, with
# the image's environment) in its root filesystem under chroot, in fresh
# mount and PID namespaces (unshare; the host's network, so it answers on
# loopback), and waits until grpc.health.v1 says SERVING (`kforge health`
# from the host). The rollout worker registers with the learner running from
# its image, and the verifier's verifies a candidate. It also checks each
# image's size against a budget, that each service runs as the image's
# user, and that a second assembly from the same inputs gives the same
# digests.
# Exit 0 when all hold; prints a table of digests, sizes and start times.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
kforge="$repo/build/bin/kforge"

keep=""
[ "${1:-}" = "--keep" ] && keep=$2
[ "$(id -u)" = 0 ] || { echo "test-images: needs root (chroot, unshare, umoci unpack)" >&2; exit 2; }
for p in mmdebstrap umoci; do
  command -v "$p" >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap umoci
done
[ -x "$kforge" ] || { echo "test-images: build first (scripts/build.sh)" >&2; exit 2; }

work=${keep:-$(mktemp -d /var/tmp/kforge-images-test.XXXXXX)}
mkdir -p "$work"
pids=()
cleanup() {
  # SIGTERM to each image's PID 1 (tini, the unshare's child): the service
  # drains; the rest of its PID namespace dies with it.
  for pid in "${pids[@]}"; do pkill -TERM -P "$pid" 2>/dev/null || true; done
  sleep 3
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -z "$keep" ]; then rm -rf "$work"; fi
}
trap cleanup EXIT

# Compressed bytes (what a registry stores and a node pulls) each image may
# take at most: what it took when measured (README "Images": learner and
# rollout 266 MiB, sharing one root filesystem layer; verifier 361 MiB with
# Python and torch) plus about 15%, so a package that grows the image by
# much is noticed.
declare -A budget=([learner]=$((310 << 20)) [rollout]=$((310 << 20)) [verifier]=$((420 << 20)))

echo "== building (deploy/images/build.sh)"
SECONDS=0
"$here/build.sh" --out "$work/a" >"$work/build-a.log" 2>&1 || { tail -30 "$work/build-a.log"; exit 1; }
echo "   built in ${SECONDS}s"
# Reproducibility of the assembly: the same inputs, a second layout.
"$here/build.sh" --out "$work/b" >"$work/build-b.log" 2>&1 || { tail -30 "$work/build-b.log"; exit 1; }
if ! diff <(grep -v '^#' "$work/a/digests.txt") <(grep -v '^#' "$work/b/digests.txt"); then
  echo "FAIL: two builds from the same inputs gave different digests" >&2
  exit 1
fi
echo "ok   two builds, same digests"

# Runs an unpacked image's entrypoint with the given arguments in place of
# its CMD, in the background, output to `log`; sets `started` to the PID of
# the unshare process.
start_image() {
  local bundle=$1 log=$2; shift 2
  local spec=$bundle/config.json rootfs=$bundle/rootfs
  # What the image says to run: user, environment, working folder, entrypoint.
  local user env cwd entry
  user=$(python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["process"]["user"]; print("%d:%d" % (p["uid"], p["gid"]))' "$spec")
  [ -n "$user" ] || { echo "test-images: no user in $spec" >&2; exit 1; }
  env=$(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["process"]["env"]))' "$spec")
  cwd=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["process"]["cwd"])' "$spec")
  # The OCI runtime spec's args are ENTRYPOINT + CMD; replace CMD (the pods'
  # --config) with the test's flags: entrypoint is tini -- kforge-<svc>.
  mapfile -t entry < <(python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["process"]["args"]; print("\n".join(a[:a.index("--")+2]))' "$spec")
  mapfile -t envs <<<"$env"
  # New mount and PID namespaces: /proc and /dev inside the root
  # filesystem stay invisible outside, and everything dies with the image's
  # PID 1 (tini). The host's network, so the service answers on loopback.
  unshare --mount --pid --fork --kill-child --propagation private sh -c '
    rootfs=$1; shift
    mount -t proc proc "$rootfs/proc"
    mount --rbind /dev "$rootfs/dev"
    exec "$@"' sh "$rootfs" \
    chroot --userspec="$user" "$rootfs" env -i "${envs[@]}" sh -c 'cd "$0" && exec "$@"' "$cwd" \
    "${entry[@]}" "$@" >"$log" 2>&1 &
  started=$!
}

# The uid the image's service (tini's child) runs as, from the host.
service_uid() {
  local tini service
  tini=$(pgrep -P "$1" | head -1)
  service=$(pgrep -P "$tini" | head -1)
  awk '/^Uid:/ {print $2}' "/proc/$service/status"
}

wait_serving() {  # name, port file (in the rootfs), timeout
  local name=$1 ports=$2 limit=$3 start=$SECONDS port
  while [ ! -s "$ports" ]; do
    (( SECONDS - start < limit )) || { echo "FAIL: $name wrote no port file" >&2; return 1; }
    sleep 0.5
  done
  port=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["grpc_port"])' "$ports")
  until "$kforge" health --server "127.0.0.1:$port" >/dev/null 2>&1; do
    (( SECONDS - start < limit )) || { echo "FAIL: $name not SERVING after ${limit}s" >&2; return 1; }
    sleep 0.5
  done
  echo "$port"
}

printf '%-9s %-73s %9s %9s %8s\n' IMAGE DIGEST MB BUDGET SERVING
status=0
learner_port=""
for svc in learner verifier rollout; do
  bundle="$work/bundle-$svc"
  umoci unpack --image "$work/a/oci:$svc-cpu" "$bundle" >/dev/null
  rootfs=$bundle/rootfs
  mkdir -p "$rootfs/tmp/test" && chmod 1777 "$rootfs/tmp/test"
  args=(--host=127.0.0.1 --port=0 --metrics_port=0 --port_file=/tmp/test/ports)
  case $svc in
    learner) args+=(--state_dir=/tmp/test/state) ;;
    verifier) args+=(--device=cpu) ;;
    rollout) args+=("--learner=127.0.0.1:$learner_port" --verifiers=127.0.0.1:1) ;;
  esac
  SECONDS=0
  start_image "$bundle" "$work/$svc.log" "${args[@]}"
  pids+=("$started")
  if port=$(wait_serving "$svc" "$rootfs/tmp/test/ports" 300); then
    took="${SECONDS}s"
  else
    took=FAIL; status=1; tail -20 "$work/$svc.log" >&2
  fi
  uid=$(service_uid "$started" || true)
  if [ "$uid" != 10001 ]; then echo "FAIL: $svc runs as uid '$uid', not the image's 10001" >&2; status=1; fi
  [ "$svc" = learner ] && learner_port=$port
  # The verifier image does its job: a candidate goes through the funnel
  # (sandboxed child, reference outputs) inside it and comes back correct.
  if [ "$svc" = verifier ] && [ "$took" != FAIL ]; then
    if "$kforge" verify --server "127.0.0.1:$port" --require_triton=false --json \
         --task "$repo/tasks/kforge-mini/level1/1_ReLU.py" \
         --candidate "$repo/tasks/kforge-mini/solutions-torch/level1/1_ReLU.py" \
         >"$work/verdict.json" 2>&1 && grep -q '"correct": true' "$work/verdict.json"; then
      echo "ok   the verifier image verified a candidate: correct"
    else
      echo "FAIL: the verifier image did not verify a correct candidate:" >&2
      head -c 2000 "$work/verdict.json" >&2
      status=1
    fi
  fi
  read -r _ _ digest bytes < <(grep "^kforge-$svc " "$work/a/digests.txt")
  mb=$((bytes >> 20))
  printf '%-9s %-73s %9s %9s %8s\n' "$svc" "$digest" "$mb" "$((budget[$svc] >> 20))" "$took"
  if (( bytes > budget[$svc] )); then echo "FAIL: $svc is $mb MB, over its budget" >&2; status=1; fi
  unpacked=$(du -sm "$rootfs" | cut -f1)
  echo "          unpacked ${unpacked} MB; entrypoint: $(python3 -c 'import json,sys; print(" ".join(json.load(open(sys.argv[1]))["process"]["args"][:3]))' "$bundle/config.json")"
done
[ $status = 0 ] && echo "ok   every image starts its entrypoint and reports SERVING" || echo "FAIL"
exit $status
