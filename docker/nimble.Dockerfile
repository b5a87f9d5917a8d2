# The Nimble farm's images: one build of every program, then one image per
# role (targets `store`, `scheduler`, `worker`) over the same runtime layer,
# so building all three compiles once (the build stage is cached).
# Build from the repository root:
#
#   docker build -f docker/nimble.Dockerfile --target worker -t nimble/worker .
#   podman build --build-arg BASE=localhost/debian-base:bookworm \
#                --build-arg RUNTIME_BASE=localhost/debian-base:bookworm ...   (a local base)
#
# The programs are built as the tests build them (RelWithDebInfo, -O2; the
# debug info is stripped). BASE builds (it needs Debian's package mirror:
# scripts/setup.sh --build);
# RUNTIME_BASE runs the programs, which bring their own libraries
# (docker/bundle.sh), so any glibc-2.36-or-newer Linux will do.
ARG BASE=debian:bookworm
ARG RUNTIME_BASE=debian:bookworm-slim

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

FROM ${RUNTIME_BASE} AS runtime
COPY --from=build /opt/nimble /opt/nimble
# nimble compile links kernels with GNU ld, one per target (bundled): found on PATH.
ENV PATH=/opt/nimble/bin:$PATH LD_LIBRARY_PATH=/opt/nimble/lib
# /var/lib/nimble-keys: the compose file's CurveZMQ keys volume (a new
# volume takes this directory's owner).
RUN useradd --system --create-home nimble \
 && mkdir -p /var/lib/nimble-store /var/lib/nimble-keys \
 && chown nimble /var/lib/nimble-store /var/lib/nimble-keys
USER nimble
WORKDIR /home/nimble

FROM runtime AS store
VOLUME /var/lib/nimble-store
EXPOSE 5000
ENTRYPOINT ["nimble-store"]
CMD ["--listen", "0.0.0.0:5000", "--root", "/var/lib/nimble-store"]

FROM runtime AS scheduler
# clients, workers, events; the dashboard and /metrics (--metrics)
EXPOSE 5555 5556 5557 9090
ENTRYPOINT ["nimble-scheduler"]
CMD ["--help"]

# One image for every CPU target: the compose file passes --targets (x86,
# aarch64, ...). The compiler cross-compiles, so an x86_64 worker serves
# aarch64 too; built on an arm64 host, the same image runs natively there.
FROM runtime AS worker
ENTRYPOINT ["nimble-worker"]
CMD ["--help"]
