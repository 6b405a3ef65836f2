"""Run inside the service's container as ``python - log|snapshot MODEL`` with this file on
standard input: prints, base64 encoded, one per line, the records of the model's feedback log
in Redis or its latest snapshot, read with the service's own classes and settings (Redis is
not published outside the compose network)."""

from __future__ import annotations

import base64
import sys


def main(what: str, model: str) -> None:
    import redis

    from service.config import Settings
    from service.durability.redis_log import RedisLog
    from service.durability.redis_store import RedisStore

    settings = Settings()
    if what == "log":
        client = redis.Redis.from_url(settings.redis_url)
        blobs = [
            record for _, record in RedisLog(client, settings.redis_prefix).read_after(model, None)
        ]
        client.close()
    else:
        store = RedisStore(settings.redis_url, settings.redis_prefix)
        blobs = [store.load(model)]
        store.close()
    for blob in blobs:
        print(base64.b64encode(bytes(blob)).decode())


if __name__ == "__main__":
    main(*sys.argv[1:3])
