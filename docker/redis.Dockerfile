# Redis for the farm's state: Debian's redis-server (7.0) on the same base
# as the Nimble images, so the whole fleet builds from one local base with
# no registry to pull from. The compose file runs it with AOF on.
#   podman build -f docker/redis.Dockerfile --build-arg BASE=localhost/debian-base:bookworm .
ARG BASE=debian:bookworm
FROM ${BASE}
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /data && chown redis:redis /data
USER redis
WORKDIR /data
VOLUME /data
EXPOSE 6379
ENTRYPOINT ["redis-server"]
CMD ["--dir", "/data", "--appendonly", "yes"]
