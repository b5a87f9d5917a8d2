# nimble-worker for the cuda target, on an NVIDIA CUDA base image so that
# tuning can run kernels on the GPU the compose file reserves. The programs
# are built on Debian and bundled with their libraries (docker/bundle.sh);
# Ubuntu 24.04's glibc is newer than Debian 12's, so they run unchanged.
# The build stage is docker/nimble.Dockerfile's, word for word, so a fleet
# build compiles once.
# Build from the repository root:  docker build -f docker/worker-cuda.Dockerfile .
ARG BASE=debian:bookworm
ARG CUDA_BASE=nvidia/cuda:12.6.3-runtime-ubuntu24.04

FROM ${BASE} AS build
WORKDIR /src
COPY . .
RUN bash scripts/setup.sh --build \
 && cmake -S . -B /build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNIMBLE_BUILD_TESTS=OFF \
      -DNIMBLE_CHECK_INCLUDE_LAYERS=OFF > /build.configure.log \
 && cmake --build /build -j"$(nproc)" --target nimble-store nimble-scheduler nimble-worker nimble nimble-compile nimble-run \
 && bash docker/bundle.sh /opt/nimble /build/artifact-store/server/nimble-store \
      /build/scheduler/nimble-scheduler /build/compile-workers/worker/nimble-worker \
      /build/client/nimble /build/client/nimble-compile /build/runtime/tools/nimble-run \
      /usr/bin/x86_64-linux-gnu-ld.bfd /usr/bin/aarch64-linux-gnu-ld.bfd \
 && strip --strip-debug /opt/nimble/bin/nimble*

FROM ${CUDA_BASE}
COPY --from=build /opt/nimble /opt/nimble
ENV PATH=/opt/nimble/bin:$PATH LD_LIBRARY_PATH=/opt/nimble/lib \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
RUN useradd --system --create-home nimble \
 && mkdir -p /var/lib/nimble-keys && chown nimble /var/lib/nimble-keys
USER nimble
WORKDIR /home/nimble
ENTRYPOINT ["nimble-worker"]
CMD ["--help"]
