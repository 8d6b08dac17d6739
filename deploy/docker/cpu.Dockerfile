# syntax=docker/dockerfile:1.7
# kforge CPU images on Debian bookworm packages (gRPC 1.51, protobuf 3.21,
# LibTorch 1.13 CPU): the laptop-cluster overlay (deploy/k8s/overlays/cpu)
# and CPU-only trials. One Dockerfile, three targets, one image per service,
# each with only what that service needs at run time:
#   learner   kforge-learner + kforge CLI + built-in tasks (LibTorch)
#   rollout   kforge-rollout + kforge CLI + built-in tasks (LibTorch)
#   verifier  kforge-verifier + the Python harness + python3-torch
# Build from the repository root (the build context), e.g.
#   docker build -f deploy/docker/cpu.Dockerfile --target learner  -t kforge/kforge-learner:cpu-dev .
#   docker build -f deploy/docker/cpu.Dockerfile --target rollout  -t kforge/kforge-rollout:cpu-dev .
#   docker build -f deploy/docker/cpu.Dockerfile --target verifier -t kforge/kforge-verifier:cpu-dev .
# (BuildKit reads cpu.Dockerfile.dockerignore beside this file.)
ARG DEBIAN_IMAGE=debian:bookworm-slim

# --- build -----------------------------------------------------------------
FROM ${DEBIAN_IMAGE} AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config binutils \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
      libabsl-dev prometheus-cpp-dev libtorch-dev python3 \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake --preset cpu -B /build -DKFORGE_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release \
 && cmake --build /build --target kforge kforge-learner kforge-rollout kforge-verifier \
      kforge_harness_files kforge_builtin_tasks
# One tree per image, laid out as the binaries expect: share/kforge beside bin/.
RUN set -eu; \
    for svc in learner rollout verifier; do mkdir -p /out/$svc/bin /out/$svc/share/kforge; done; \
    cp /build/bin/kforge-learner /build/bin/kforge /out/learner/bin/; \
    cp -r /build/share/kforge/tasks /out/learner/share/kforge/; \
    cp /build/bin/kforge-rollout /build/bin/kforge /out/rollout/bin/; \
    cp -r /build/share/kforge/tasks /out/rollout/share/kforge/; \
    cp /build/bin/kforge-verifier /out/verifier/bin/; \
    cp -r /build/share/kforge/harness /out/verifier/share/kforge/; \
    strip --strip-debug /out/*/bin/*; \
    for svc in learner rollout verifier; do \
      deploy/docker/runtime-packages.sh /out/$svc/bin/* > /out/$svc.packages; \
    done; \
    echo python3 python3-torch >> /out/verifier.packages; \
    head -50 /out/*.packages

# --- runtime ---------------------------------------------------------------
FROM ${DEBIAN_IMAGE} AS runtime
# tini as PID 1 reaps orphaned processes (candidate sandboxes fork) and
# forwards SIGTERM, on which kforge drains.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends tini ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 kforge \
 && useradd --system --uid 10001 --gid kforge --create-home --home-dir /home/kforge \
      --shell /usr/sbin/nologin kforge
ENV PATH=/opt/kforge/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
WORKDIR /home/kforge

FROM runtime AS learner
COPY --from=build /out/learner.packages /tmp/
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(cat /tmp/learner.packages) \
 && rm -rf /var/lib/apt/lists/* /tmp/learner.packages
COPY --from=build /out/learner/ /opt/kforge/
USER 10001:10001
EXPOSE 50051 9090 8081
ENTRYPOINT ["/usr/bin/tini", "--", "kforge-learner"]
CMD ["--config", "/etc/kforge/learner.json"]

FROM runtime AS rollout
COPY --from=build /out/rollout.packages /tmp/
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(cat /tmp/rollout.packages) \
 && rm -rf /var/lib/apt/lists/* /tmp/rollout.packages
COPY --from=build /out/rollout/ /opt/kforge/
USER 10001:10001
EXPOSE 50053 9090 8081
ENTRYPOINT ["/usr/bin/tini", "--", "kforge-rollout"]
CMD ["--config", "/etc/kforge/rollout.json"]

FROM runtime AS verifier
COPY --from=build /out/verifier.packages /tmp/
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(cat /tmp/verifier.packages) \
 && rm -rf /var/lib/apt/lists/* /tmp/verifier.packages \
 && python3 -c "import torch; print('torch', torch.__version__)"
COPY --from=build /out/verifier/ /opt/kforge/
USER 10001:10001
# Works with a read-only root filesystem: everything written goes to /tmp.
ENV HOME=/tmp PYTHONDONTWRITEBYTECODE=1
EXPOSE 50052 9090 8081
ENTRYPOINT ["/usr/bin/tini", "--", "kforge-verifier"]
CMD ["--config", "/etc/kforge/verifier.json"]
