# nimble-worker with the compiler (the `nimble` CLI next to it), for CPU
# targets. One image for every CPU target: the compose file passes
# --targets (x86, aarch64, ...). Built for the platform it runs on
# (linux/amd64, or linux/arm64 for worker-aarch64).
# Build from the repository root:  docker build -f docker/worker.Dockerfile .
FROM debian:bookworm AS build
WORKDIR /src
COPY . .
RUN bash scripts/setup.sh \
 && cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DNIMBLE_BUILD_TESTS=OFF \
 && cmake --build /build -j"$(nproc)" \
 && bash docker/bundle.sh /opt/nimble /build/compile-workers/worker/nimble-worker /build/client/nimble

FROM debian:bookworm-slim
COPY --from=build /opt/nimble /opt/nimble
ENV PATH=/opt/nimble/bin:$PATH LD_LIBRARY_PATH=/opt/nimble/lib
RUN useradd --system --create-home nimble
USER nimble
WORKDIR /home/nimble
ENTRYPOINT ["nimble-worker"]
CMD ["--help"]
