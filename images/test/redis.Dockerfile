# A Redis server for the tests' testcontainers path on machines where no registry serves redis
# images: Debian bookworm's redis-server on the Debian base (tools/chart/base-image.sh).
# No persistence, no protected mode: a throwaway test server. Built by tools/scripts/test-images.sh.
ARG BASE_IMAGE=webcodex/base:bookworm
FROM ${BASE_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends redis-server \
 && rm -rf /var/lib/apt/lists/*
USER redis
CMD ["redis-server", "--bind", "0.0.0.0", "--protected-mode", "no", "--save", "", "--appendonly", "no"]
EXPOSE 6379
