"""``lorentztron`` command line."""

from __future__ import annotations

import os

# The service runs its own threads (one per request in the pool); BLAS threads on top of them
# only oversubscribe the cores (an alignment product took 10x longer with 2 OpenBLAS threads on
# a busy 2-core machine). Set before numpy is imported; an explicit setting wins.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import time  # noqa: E402

import uvicorn  # noqa: E402

from service.config import get_settings  # noqa: E402


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger and message (the fields of an access
    line, passed as ``extra={"fields": {...}}``, are merged in instead of its message)."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):  # an access line: its fields, merged
            entry.update(fields)
        else:
            entry["message"] = record.getMessage()
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def configure_logging(level: str) -> dict:
    """Structured logs for our loggers and uvicorn's (its access log is replaced by ours,
    which carries the request id)."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "json"}},
        "loggers": {
            "lorentztron": {"handlers": ["stderr"], "level": level.upper(), "propagate": False},
            "uvicorn": {"handlers": ["stderr"], "level": level.upper(), "propagate": False},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
        },
    }


#: glibc's mallopt parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3


def tune_malloc() -> bool:
    """Keep freed memory for reuse (glibc only; False elsewhere or if refused).

    By default glibc serves large allocations with their own ``mmap`` and unmaps them when
    freed, so every bulk feedback request (tens of MB of temporaries: the body, the parsed
    batch, its log record, the rollback copy, the averaging copies) faults its memory in
    again page by page. Raising the mmap and trim thresholds keeps that memory for reuse, at
    the price of a resident size that stays near its peak (docs/benchmarks.md has the
    measurements)."""
    import ctypes
    import ctypes.util

    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c")).mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # (int parameters: the trim threshold is at most 2 GiB - 1)
    return bool(mallopt(M_MMAP_THRESHOLD, 1 << 30)) and bool(
        mallopt(M_TRIM_THRESHOLD, (1 << 31) - 1)
    )


def configure_process(settings) -> None:
    """What ``lorentztron serve`` sets up in its process before uvicorn starts (the load
    test's in-process profilers call it too): log records without the caller, thread and
    process fields, which the JSON lines do not use (the "Optimization" section of the
    logging HOWTO), and ``tune_malloc`` unless ``malloc_keep_freed`` is off."""
    logging._srcfile = None
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    if settings.malloc_keep_freed:
        tune_malloc()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="lorentztron", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="start the HTTP service (settings: LORENTZTRON_*)")
    serve.add_argument("--host", default=None)
    serve.add_argument("--port", type=int, default=None)
    args = parser.parse_args(argv)
    settings = get_settings()
    if args.command == "serve":
        configure_process(settings)
        uvicorn.run(
            "service.main:create_app",
            factory=True,
            host=args.host or settings.host,
            port=args.port or settings.port,
            log_config=configure_logging(settings.log_level),
            access_log=False,
        )


if __name__ == "__main__":
    main()
