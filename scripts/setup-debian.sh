#!/usr/bin/env bash
# Installs what kforge needs to build, test and run on Debian bookworm, and
# nothing when it is all there already (idempotent: apt is not touched), then
# fetches KernelBench's problems when the machine is online
# (scripts/fetch-kernelbench.sh --setup: never fails, quick when offline).
# Python packages by purpose: requirements/ (README, "Python").
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev prometheus-cpp-dev libtorch-dev
  libgtest-dev libgmock-dev
  # The verifier's interpreter (requirements/harness-cpu.txt) and the deploy
  # tests' YAML (requirements/tests.txt).
  python3-torch python3-yaml
  # Tests: promtool (deploy/tests, /metrics checks).
  prometheus
  # Tests: certificates made at test time (deploy/tls/make-certs.sh).
  openssl
  # curves.png beside curves.svg (the learner calls rsvg-convert when present).
  librsvg2-bin fonts-dejavu-core
)
# The deploy tests run node and npm; a machine with NodeSource's nodejs has
# both from one package, so look for the commands, not Debian's packages.
if ! command -v node > /dev/null || ! command -v npm > /dev/null; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
else
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

scripts/fetch-kernelbench.sh --setup
