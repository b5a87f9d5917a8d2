# nimble-scheduler, the farm's broker (state in Redis).
# Build from the repository root:  docker build -f docker/scheduler.Dockerfile .
FROM debian:bookworm AS build
WORKDIR /src
COPY . .
RUN bash scripts/setup.sh \
 && cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DNIMBLE_BUILD_TESTS=OFF \
 && cmake --build /build -j"$(nproc)" --target nimble-scheduler \
 && bash docker/bundle.sh /opt/nimble /build/scheduler/nimble-scheduler

FROM debian:bookworm-slim
COPY --from=build /opt/nimble /opt/nimble
ENV PATH=/opt/nimble/bin:$PATH LD_LIBRARY_PATH=/opt/nimble/lib
RUN useradd --system nimble
USER nimble
# clients, workers, events
EXPOSE 5555 5556 5557
ENTRYPOINT ["nimble-scheduler"]
CMD ["--help"]
