# nimble-worker for the cuda target, on an NVIDIA CUDA base image so that
# tuning can run kernels on the GPU the compose file reserves. The programs
# are built on Debian and bundled with their libraries (docker/bundle.sh);
# Ubuntu 24.04's glibc is newer than Debian 12's, so they run unchanged.
# Build from the repository root:  docker build -f docker/worker-cuda.Dockerfile .
FROM debian:bookworm AS build
WORKDIR /src
COPY . .
RUN bash scripts/setup.sh \
 && cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DNIMBLE_BUILD_TESTS=OFF \
 && cmake --build /build -j"$(nproc)" \
 && bash docker/bundle.sh /opt/nimble /build/compile-workers/worker/nimble-worker /build/client/nimble

FROM nvidia/cuda:12.6.3-runtime-ubuntu24.04
COPY --from=build /opt/nimble /opt/nimble
ENV PATH=/opt/nimble/bin:$PATH LD_LIBRARY_PATH=/opt/nimble/lib \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
RUN useradd --system --create-home nimble
USER nimble
WORKDIR /home/nimble
ENTRYPOINT ["nimble-worker"]
CMD ["--help"]
