# syntax=docker/dockerfile:1
#
# profcol container image: a static-ish glibc binary on distroless, run as
# an unprivileged user, configured like the Collector's images.
#
#   docker build -t profcol .
#   docker run --rm -p 4317:4317 -p 4318:4318 -p 13133:13133 \
#     -v $PWD/my-config.yaml:/etc/profcol/config.yaml:ro profcol
#
# BuildKit cache mounts keep the cargo registry and the target directory
# between builds, so a change to one source file rebuilds only its crate
# and the binary, not every dependency.

# The toolchain the tests run on (the crate builds from 1.85 on).
ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS builder
# nasm for ISA-L (gzip level 1); the image has autotools and OpenSSL's headers.
RUN apt-get update -qq && apt-get install -y -qq nasm && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/usr/local/cargo/git,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    cargo build --release --locked --bin profcol \
 && install -D -m 0755 target/release/profcol /out/profcol \
 && install -d -m 0755 /out/etc/profcol \
 && install -m 0644 deploy/docker/config.yaml /out/etc/profcol/config.yaml \
 && install -d -m 0750 /out/var/lib/profcol

# cc: glibc and libgcc, which the binary links; no shell, no package manager.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /out/profcol /usr/bin/profcol
COPY --from=builder /out/etc/profcol/config.yaml /etc/profcol/config.yaml
# Where file_storage keeps persistent queues (mount a volume here).
COPY --from=builder --chown=65532:65532 /out/var/lib/profcol /var/lib/profcol
USER 65532:65532

# OTLP gRPC, OTLP HTTP, Sentry, Pyroscope, health_check, metrics.
EXPOSE 4317 4318 3000 4040 13133 8888

# distroless has no curl: the binary asks its own health_check extension.
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
  CMD ["/usr/bin/profcol", "health", "--endpoint", "127.0.0.1:13133"]

# As the Collector's images: the config path is an argument, so
# `docker run IMAGE --config=/other.yaml` replaces it.
ENTRYPOINT ["/usr/bin/profcol"]
CMD ["--config", "/etc/profcol/config.yaml"]
