# syntax=docker/dockerfile:1
# reactord: a Swift 6.3 builder, then a slim Debian runtime with only what the binary links.

FROM swift:6.3-bookworm AS builder
RUN apt-get update \
    && apt-get install -y --no-install-recommends libmicrohttpd-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Package.swift ./
COPY Sources ./Sources
COPY openapi.yaml ./
RUN swift build -c release --product reactord --static-swift-stdlib \
    && mkdir -p /out \
    && cp .build/release/reactord /out/ \
    && cp -R .build/release/reactord_ReactorService.resources /out/

FROM debian:bookworm-slim
# libmicrohttpd12 is the one library the binary needs beyond libc (ldd checked in CI);
# curl serves the HEALTHCHECK.
RUN apt-get update \
    && apt-get install -y --no-install-recommends libmicrohttpd12 curl ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin reactord
COPY --from=builder /out/ /usr/local/bin/
USER 10001
ENV REACTORD_HOST=0.0.0.0 \
    REACTORD_PORT=8080
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["sh", "-c", "curl -fsS http://127.0.0.1:${REACTORD_PORT}/healthz || exit 1"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/reactord"]
