# syntax=docker/dockerfile:1
# reactord: a Swift 6.3 builder, then a slim Debian runtime with only what the binary links.
# Built and run for real in CI by scripts/container-test (podman, the same Dockerfile).

FROM swift:6.3-bookworm AS builder
RUN apt-get update \
    && apt-get install -y --no-install-recommends libmicrohttpd-dev libsqlite3-dev libpq-dev libssl-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Only what the release build needs: without Tests/, Package.swift leaves out the test and
# benchmark targets.
COPY Package.swift ./
COPY Sources ./Sources
# The demo page and openapi.yaml are embedded in the binary: it is the one file to copy.
RUN swift build -c release --product reactord --static-swift-stdlib \
    && mkdir -p /out \
    && strip -o /out/reactord "$(swift build -c release --show-bin-path)/reactord"

FROM debian:bookworm-slim
# libmicrohttpd12, libsqlite3-0, libpq5 (the PostgreSQL store) and libssl3 (libcrypto: JWT
# signatures; libpq5 needs it too) are the libraries the binary needs beyond libc; the
# HEALTHCHECK is the binary's own (`reactord healthcheck`), so no curl.
# /data holds the store, owned by the user.
RUN apt-get update \
    && apt-get install -y --no-install-recommends libmicrohttpd12 libsqlite3-0 libpq5 libssl3 \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 reactord \
    && useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin reactord \
    && mkdir /data \
    && chown 10001:10001 /data
COPY --from=builder /out/reactord /usr/local/bin/reactord
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="reactord" \
      org.opencontainers.image.description="Serves ReactorKit-style reactors over HTTP: sessions, actions, state and pulses as Server-Sent Events" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="docker.io/library/debian:bookworm-slim"
USER 10001:10001
WORKDIR /data
ENV REACTORD_HOST=0.0.0.0 \
    REACTORD_PORT=8080 \
    REACTORD_STORE=sqlite:/data/reactord.sqlite
VOLUME /data
EXPOSE 8080
# /readyz: listening, store reachable, not shutting down (/healthz only says the process is alive).
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["/usr/local/bin/reactord", "healthcheck"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/reactord"]
