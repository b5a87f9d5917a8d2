# nimble-store, the artifact store (OCI distribution API over a directory).
# Build from the repository root:  docker build -f docker/store.Dockerfile .
FROM debian:bookworm AS build
WORKDIR /src
COPY . .
RUN bash scripts/setup.sh \
 && cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DNIMBLE_BUILD_TESTS=OFF \
 && cmake --build /build -j"$(nproc)" --target nimble-store \
 && bash docker/bundle.sh /opt/nimble /build/artifact-store/server/nimble-store

FROM debian:bookworm-slim
COPY --from=build /opt/nimble /opt/nimble
ENV PATH=/opt/nimble/bin:$PATH LD_LIBRARY_PATH=/opt/nimble/lib
RUN useradd --system --home /var/lib/nimble-store nimble \
 && mkdir -p /var/lib/nimble-store && chown nimble /var/lib/nimble-store
USER nimble
VOLUME /var/lib/nimble-store
EXPOSE 5000
ENTRYPOINT ["nimble-store"]
CMD ["--listen", "0.0.0.0:5000", "--root", "/var/lib/nimble-store"]
