# syntax=docker/dockerfile:1.7
# kforge GPU images on a PyTorch CUDA base image (PyTorch's LibTorch, NCCL
# and, for the verifier, Triton), with gRPC / protobuf / Abseil /
# prometheus-cpp from Debian bookworm's packages unpacked into /opt/kdeps:
# the recipe scripts/gpu-deps.sh uses on the GPU build machines
# (/work/shared/device/NOTES.md). Three targets, one image per service:
#   learner   kforge-learner + kforge CLI + built-in tasks
#   rollout   kforge-rollout + kforge CLI + built-in tasks
#   verifier  kforge-verifier + the Python harness (torch + triton from the base)
# Build from the repository root:
#   docker build -f deploy/docker/cuda.Dockerfile --target learner  -t REGISTRY/kforge-learner:cuda-0.1.0 .
#   docker build -f deploy/docker/cuda.Dockerfile --target rollout  -t REGISTRY/kforge-rollout:cuda-0.1.0 .
#   docker build -f deploy/docker/cuda.Dockerfile --target verifier -t REGISTRY/kforge-verifier:cuda-0.1.0 .
#
# The base must have glibc >= 2.36 (the Debian bookworm libraries need it):
# an Ubuntu 24.04 based PyTorch image such as NGC's 25.01 or later. Its
# python3 must import torch and triton; overlays/gpu/config/verifier.json
# names that interpreter (/usr/bin/python3 in NGC images; /opt/conda/bin/python3
# in conda-based ones). The runtime images keep the whole base: the verifier
# needs Python, torch and Triton, and the learner and rollout worker link the
# base's LibTorch, CUDA libraries and NCCL at the paths it installs them.
ARG PYTORCH_IMAGE=nvcr.io/nvidia/pytorch:25.01-py3
ARG DEBIAN_IMAGE=debian:bookworm-slim

# --- C++ dependencies as Debian packages -------------------------------------
FROM ${DEBIAN_IMAGE} AS debs
WORKDIR /debs
# The list of /work/shared/device/fetch-debs.sh. apt-get download fetches the
# named packages only (no dependencies): this is the complete set.
RUN apt-get update \
 && apt-get download \
      libgrpc++-dev libgrpc++1.51 libgrpc-dev libgrpc29 protobuf-compiler-grpc \
      libprotobuf-dev libprotobuf32 libprotobuf-lite32 libprotoc32 protobuf-compiler \
      libabsl-dev libabsl20220623 libre2-9 libre2-dev libc-ares2 libc-ares-dev \
      prometheus-cpp-dev libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 \
      libcivetweb-dev libcivetweb1 civetweb \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /opt/kdeps \
 && for deb in /debs/*.deb; do dpkg -x "$deb" /opt/kdeps; done

# --- build -------------------------------------------------------------------
FROM ${PYTORCH_IMAGE} AS build
RUN v=$(getconf GNU_LIBC_VERSION | awk '{print $2}'); \
    if [ "$(printf '%s\n' 2.36 "$v" | sort -V | head -1)" != 2.36 ]; then \
      echo "PYTORCH_IMAGE has glibc $v; the Debian bookworm libraries need >= 2.36 (use an Ubuntu 24.04 based image)" >&2; \
      exit 1; \
    fi
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      cmake ninja-build pkg-config binutils libssl-dev zlib1g-dev \
 && rm -rf /var/lib/apt/lists/*
COPY --from=debs /opt/kdeps /opt/kdeps
# What `eval "$(scripts/gpu-deps.sh)"` exports.
ENV KFORGE_DEPS_PREFIX=/opt/kdeps \
    PATH=/opt/kdeps/usr/bin:${PATH} \
    LD_LIBRARY_PATH=/opt/kdeps/usr/lib/x86_64-linux-gnu \
    CMAKE_PREFIX_PATH=/opt/kdeps/usr:/opt/kdeps/usr/lib/x86_64-linux-gnu/cmake \
    PKG_CONFIG_PATH=/opt/kdeps/usr/lib/x86_64-linux-gnu/pkgconfig:/opt/kdeps/usr/share/pkgconfig \
    PKG_CONFIG_SYSROOT_DIR=/opt/kdeps \
    PKG_CONFIG_LIBDIR=/opt/kdeps/usr/lib/x86_64-linux-gnu/pkgconfig:/opt/kdeps/usr/share/pkgconfig
WORKDIR /src
COPY . .
RUN cmake --preset cuda -B /build -DKFORGE_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release \
      -DKFORGE_PYTHON="$(command -v python3)" \
 && cmake --build /build --target kforge kforge-learner kforge-rollout kforge-verifier \
      kforge_harness_files kforge_builtin_tasks
# One tree per image (share/kforge beside bin/), and only the shared libraries
# of the Debian prefix, not its headers and tools.
RUN set -eu; \
    for svc in learner rollout verifier; do mkdir -p /out/$svc/bin /out/$svc/share/kforge; done; \
    cp /build/bin/kforge-learner /build/bin/kforge /out/learner/bin/; \
    cp -r /build/share/kforge/tasks /out/learner/share/kforge/; \
    cp /build/bin/kforge-rollout /build/bin/kforge /out/rollout/bin/; \
    cp -r /build/share/kforge/tasks /out/rollout/share/kforge/; \
    cp /build/bin/kforge-verifier /out/verifier/bin/; \
    cp -r /build/share/kforge/harness /out/verifier/share/kforge/; \
    strip --strip-debug /out/*/bin/*; \
    mkdir -p /out/kdeps-lib; \
    cp -a /opt/kdeps/usr/lib/x86_64-linux-gnu/*.so.* /out/kdeps-lib/

# --- runtime -------------------------------------------------------------------
FROM ${PYTORCH_IMAGE} AS runtime
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 kforge \
 && useradd --system --uid 10001 --gid kforge --create-home --home-dir /home/kforge \
      --shell /usr/sbin/nologin kforge
COPY --from=build /out/kdeps-lib/ /opt/kdeps/lib/
# libgrpc under libgrpc++ is not found through the executables' RUNPATH
# (NOTES.md): the prefix goes on the loader path. NVLink multicast stays off.
ENV LD_LIBRARY_PATH=/opt/kdeps/lib \
    PATH=/opt/kforge/bin:${PATH} \
    NCCL_NVLS_ENABLE=0
WORKDIR /home/kforge

FROM runtime AS learner
COPY --from=build /out/learner/ /opt/kforge/
USER 10001:10001
EXPOSE 50051 9090 8081
ENTRYPOINT ["/usr/bin/tini", "--", "kforge-learner"]
CMD ["--config", "/etc/kforge/learner.json"]

FROM runtime AS rollout
COPY --from=build /out/rollout/ /opt/kforge/
USER 10001:10001
EXPOSE 50053 9090 8081
ENTRYPOINT ["/usr/bin/tini", "--", "kforge-rollout"]
CMD ["--config", "/etc/kforge/rollout.json"]

FROM runtime AS verifier
RUN python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
COPY --from=build /out/verifier/ /opt/kforge/
USER 10001:10001
ENV HOME=/tmp PYTHONDONTWRITEBYTECODE=1 TRITON_CACHE_DIR=/tmp/triton-cache
EXPOSE 50052 9090 8081
ENTRYPOINT ["/usr/bin/tini", "--", "kforge-verifier"]
CMD ["--config", "/etc/kforge/verifier.json"]
