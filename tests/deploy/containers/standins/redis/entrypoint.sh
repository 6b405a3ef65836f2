#!/bin/sh
# As the official image's entrypoint does: a redis-server started without a configuration
# file listens to every address of the container's network, so protected mode goes off.
set -e
if [ "$1" = "redis-server" ] && [ ! -f "${2:-}" ]; then
    shift
    set -- redis-server --protected-mode no "$@"
fi
exec "$@"
