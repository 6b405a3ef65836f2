#!/bin/sh
# As the official image's entrypoint does: options alone run haproxy, and haproxy runs in
# the foreground (-db) as a master with its worker (-W).
set -e
if [ "${1#-}" != "$1" ]; then
    set -- haproxy "$@"
fi
if [ "$1" = "haproxy" ]; then
    shift
    set -- haproxy -W -db "$@"
fi
exec "$@"
