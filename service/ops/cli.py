"""lorentztron: online-learning models served over HTTP, or learned offline from files.

examples:
  lorentztron serve --port 8000
  lorentztron learn data/a9a --kind dos --param rank=8 --n-features 123 -o a9a.safetensors
  lorentztron eval data/a9a.t --model a9a.safetensors
  lorentztron import a9a.safetensors --url http://127.0.0.1:8000 --key $WRITE_KEY
  lorentztron challenger add a9a c1 --kind dos --param rank=16 --key $WRITE_KEY
  lorentztron eval a9a data/a9a.t          # every member and variant of a served model
  lorentztron promote a9a c1 --key $WRITE_KEY"""

# This module: the parser, logs, process set-up and ``serve`` (its docstring is the
# parser's description); the commands on files and a running service are in
# ``service.ops.cli_commands``.

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
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import uvicorn  # noqa: E402

from service.config import get_settings  # noqa: E402
from service.ops.cli_commands import (  # noqa: E402
    challenger,
    evaluate,
    evaluate_members,
    learn,
    learning,
    promote,
    transfer,
)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger and message (the fields of an access
    line, passed as ``extra={"fields": {...}}``, are merged in instead of its message)."""

    #: (second, its text): one strftime per second, not per line
    _second: tuple[int, str] = (-1, "")

    def format(self, record: logging.LogRecord) -> str:
        second, text = self._second
        if int(record.created) != second:
            second = int(record.created)
            text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = (second, text)
        entry = {
            "ts": f"{text}.{int(record.msecs):03d}Z",
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


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("lorentztron")
    except PackageNotFoundError:  # pragma: no cover (a source tree without install)
        return "unknown"


def settings_help() -> str:
    """Every setting with its default and the ``#:`` comment above it in ``Settings``."""
    import inspect
    import re
    import textwrap

    from service.config import Settings

    comments: dict[str, str] = {}
    pending: list[str] = []
    for line in inspect.getsource(Settings).splitlines():
        stripped = line.strip()
        if stripped.startswith("#:"):
            pending.append(stripped[2:].strip())
            continue
        field = re.match(r"\s{4}(\w+)\s*:", line)
        if field and pending:
            comments[field.group(1)] = " ".join(pending)
        pending = []
    lines = ["settings (environment variables; a .env file is not read):"]
    for name, info in Settings.model_fields.items():
        default = info.default if not callable(info.default_factory) else info.default_factory()
        if isinstance(default, list):
            default = ",".join(default) or "(none)"
        text = comments.get(name, "").replace("``", "`")
        lines.append(f"  LORENTZTRON_{name.upper()} (default {default})")
        lines += textwrap.wrap(text, 88, initial_indent="      ", subsequent_indent="      ")
    return "\n".join(lines)


#: the service the commands that talk to one reach without --url and $LORENTZTRON_URL
DEFAULT_URL = "http://127.0.0.1:8000"


class ConfigurationError(Exception):
    """A setting cannot be used: one line naming the variable."""


def load_settings():
    """The settings, or ConfigurationError naming each bad variable in one line."""
    from pydantic import ValidationError

    from service.main import check_role

    get_settings.cache_clear()
    try:
        settings = get_settings()
        check_role(settings)
    except ValidationError as error:
        problems = []
        for e in error.errors():
            variable = "LORENTZTRON_" + "_".join(str(p) for p in e["loc"]).upper()
            problems.append(f"{variable}={e.get('input')!r}: {e['msg']}")
        raise ConfigurationError("; ".join(problems)) from None
    except ValueError as error:
        raise ConfigurationError(str(error)) from None
    return settings


def _parser() -> argparse.ArgumentParser:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(prog="lorentztron", description=__doc__, formatter_class=raw)
    parser.add_argument("--version", action="version", version=f"lorentztron {version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        help="start the HTTP service",
        description="Start the HTTP service (uvicorn). Every setting is a LORENTZTRON_* "
        "environment variable; --host, --port and --workers override three of them.",
        formatter_class=raw,
        epilog=settings_help(),
    )
    serve.add_argument("--host", help="address to listen on (LORENTZTRON_HOST)")
    serve.add_argument("--port", type=int, help="port to listen on (LORENTZTRON_PORT)")
    serve.add_argument(
        "--workers",
        type=int,
        help="HTTP processes sharing the port (LORENTZTRON_WORKERS); above 1: api processes "
        "and a learner over Redis (LORENTZTRON_REDIS_URL), supervised by this one",
    )

    learn = commands.add_parser(
        "learn",
        help="learn a model from files",
        formatter_class=raw,
        description="Learn a model from svmlight or NDJSON files, in order, each example scored "
        "before it is learned (progressive validation, shown as it goes), with the service's "
        "own code; write it as a safetensors file that `lorentztron eval` and the service's "
        "`PUT /v1/models/NAME` read.",
        epilog="example:\n  lorentztron learn a9a --kind dos --param rank=8 --param C=0.1 "
        "--n-features 123 -o a9a.safetensors",
    )
    learn.add_argument("files", nargs="+", type=Path, metavar="FILE")
    learn.add_argument("--kind", required=True, help="linear-pa, dos, pqr, mofm, perceptron, ...")
    learn.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a parameter of the kind (VALUE read as JSON, else as text); repeat",
    )
    size = learn.add_mutually_exclusive_group()
    size.add_argument("--n-features", type=int, help="inputs (default: the files' widest row)")
    size.add_argument("--hashed", type=int, help="hashed buckets for named features")
    learn.add_argument(
        "--classes",
        help="comma-separated labels (default: the files' labels, sorted; 'none' for regression)",
    )
    learn.add_argument("--multiclass", choices=("ovo", "ovr", "ordinal"), default="ovo")
    learn.add_argument("--averaging-interval", type=int, help="time-average every N examples")
    learn.add_argument("--calibration", choices=("platt", "none"))
    learn.add_argument("--name", help="the model's name (default: the first file's name)")
    learn.add_argument("-o", "--output", type=Path, help="default: NAME.safetensors")
    learn.add_argument("--quiet", action="store_true", help="no progress line")

    evaluate = commands.add_parser(
        "eval",
        help="score files with a model file, or with every member of a served model",
        formatter_class=raw,
        usage="lorentztron eval (--model MODEL.safetensors FILE... | NAME FILE...) [options]",
        description=_paragraphs(
            "Score svmlight or NDJSON files without learning.",
            "With --model: a model file, offline: accuracy and log loss (classifiers), RMSE "
            "(regression).",
            "Without it: the model NAME of a running service, each of its members (the one "
            "that serves and its challengers) and variants scored in the shadow (predict "
            "?member=&variant=, nothing learned), in batches: one row per member and variant "
            "with its examples and accuracy (classification) or RMSE (regression) on the "
            "files, beside the model's own progressive and recent figures and its comparison "
            "verdict.",
        ),
        epilog="examples:\n  lorentztron eval a9a.t --model a9a.safetensors\n"
        "  lorentztron eval a9a a9a.t --url http://127.0.0.1:8000 --json",
    )
    evaluate.add_argument("files", nargs="+", metavar="[NAME] FILE", help=argparse.SUPPRESS)
    evaluate.add_argument("--model", type=Path, help="a .safetensors model file")
    evaluate.add_argument(
        "--variant",
        choices=("live", "averaged"),
        help="score this variant only (default: live with --model, else every variant)",
    )
    evaluate.add_argument(
        "--predictions", type=Path, help="write one JSON line per example (--model)"
    )
    evaluate.add_argument("--json", action="store_true", help="print the metrics as JSON")
    evaluate.add_argument("--quiet", action="store_true", help="no progress line (--model)")
    evaluate.add_argument(
        "--batch-size",
        type=int,
        default=1000,
        help="rows per predict request (NAME; default %(default)s)",
    )
    _service_options(evaluate)

    challenger = commands.add_parser(
        "challenger",
        help="add, list or remove a served model's challengers",
        description="A challenger learns the model's feedback beside the member that serves, "
        "from the next example on, and is compared with it on the same examples "
        "(POST, GET and DELETE /v1/models/NAME/challengers).",
    )
    actions = challenger.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="add a challenger")
    add.add_argument("name", help="the model's name")
    add.add_argument("challenger", help="the challenger's name")
    add.add_argument("--kind", required=True, help="linear-pa, dos, pqr, mofm, perceptron, ...")
    add.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a parameter of the kind (VALUE read as JSON, else as text); repeat",
    )
    add.add_argument("--averaging-interval", type=int, help="time-average every N examples")
    add.add_argument("--calibration", choices=("platt", "none"))
    add.add_argument("--multiclass", choices=("ovo", "ovr", "ordinal"), help="default: the model's")
    listing = actions.add_parser("list", help="the challengers and their comparisons")
    listing.add_argument("name", help="the model's name")
    listing.add_argument("--json", action="store_true", help="print them as JSON")
    remove = actions.add_parser("remove", help="take a challenger out")
    remove.add_argument("name", help="the model's name")
    remove.add_argument("challenger", help="the challenger's name")
    for action in (add, listing, remove):
        _service_options(action)

    promote = commands.add_parser(
        "promote",
        help="serve a challenger",
        description="The challenger (and its variant) serves from now on; the member that "
        "served stays as a challenger: promote it back to undo (POST /v1/models/NAME/promote).",
    )
    promote.add_argument("name", help="the model's name")
    promote.add_argument("challenger", help="the challenger's name")
    promote.add_argument("--variant", choices=("live", "averaged"), help="default: live")
    _service_options(promote)

    pause = commands.add_parser(
        "pause",
        help="pause a served model's learning",
        description="Pause learning: feedback is still logged and acknowledged, predictions "
        "go on (POST /v1/models/NAME/learning).",
    )
    pause.add_argument("name", help="the model's name")
    resume = commands.add_parser(
        "resume",
        help="resume a served model's learning",
        description="Resume learning: the feedback logged while paused is learned in order "
        "first, or dropped with --discard (POST /v1/models/NAME/learning).",
    )
    resume.add_argument("name", help="the model's name")
    resume.add_argument(
        "--discard", action="store_true", help="drop the backlog instead of learning it"
    )
    for command in (pause, resume):
        _service_options(command)

    for name, what in (("export", "download"), ("import", "upload")):
        command = commands.add_parser(
            name,
            help=f"{what} a model file {'from' if name == 'export' else 'to'} a running service",
            description=f"{what.capitalize()} a safetensors model file "
            f"({'GET /v1/models/NAME/export' if name == 'export' else 'PUT /v1/models/NAME'}"
            ").",
        )
        if name == "export":
            command.add_argument("name", help="the model's name")
            command.add_argument("-o", "--output", type=Path, help="default: NAME.safetensors")
        else:
            command.add_argument("file", type=Path, help="a .safetensors model file")
            command.add_argument("--name", help="the new model's name (default: the file's)")
        _service_options(command)
    # each command's parser (the deepest: `challenger list`'s), to say what it takes
    for command in [*commands.choices.values(), *actions.choices.values()]:
        command.set_defaults(command_parser=command)
    return parser


def _paragraphs(*paragraphs: str) -> str:
    """Text for a raw help formatter: each paragraph wrapped."""
    import textwrap

    return "\n\n".join(textwrap.fill(paragraph, 88) for paragraph in paragraphs)


def _service_options(command: argparse.ArgumentParser) -> None:
    """``--url`` and ``--key`` of a command that talks to a running service. Either may be
    given without a value or with an empty one (``--key $LORENTZTRON_WRITE_KEYS`` when no
    keys are set): no key, the default URL."""
    command.add_argument(
        "--url",
        nargs="?",
        const=DEFAULT_URL,
        type=lambda text: text or DEFAULT_URL,
        default=os.environ.get("LORENTZTRON_URL") or DEFAULT_URL,
        help=f"the service (default: $LORENTZTRON_URL or {DEFAULT_URL})",
    )
    command.add_argument(
        "--key",
        nargs="?",
        const=None,
        type=lambda text: text or None,
        default=os.environ.get("LORENTZTRON_KEY") or None,
        help="a bearer key (default: $LORENTZTRON_KEY; empty or no value: none)",
    )


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # the command's usage, not lorentztron's (argparse reports them at the top)
        args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    run = {
        "serve": serve,
        "learn": learn,
        "eval": evaluate if args.command == "eval" and args.model else evaluate_members,
        "export": transfer,
        "import": transfer,
        "challenger": challenger,
        "promote": promote,
        "pause": learning,
        "resume": learning,
    }[args.command]
    try:
        run(args)
    except (ConfigurationError, OSError, ValueError) as error:
        print(f"lorentztron {args.command}: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def uvicorn_options(settings, host: str | None = None, port: int | None = None) -> dict:
    """The keyword arguments of ``uvicorn.run`` for an app factory, as ``serve`` runs the
    service (the load test's bare baseline app runs under the same)."""
    return {
        "factory": True,
        "host": host or settings.host,
        "port": port or settings.port,
        "log_config": configure_logging(settings.log_level),
        "access_log": False,
    }


def serve(args) -> None:
    if args.workers is not None:
        if args.workers < 1:
            raise ConfigurationError(f"--workers {args.workers}: at least 1")
        os.environ["LORENTZTRON_WORKERS"] = str(args.workers)
    settings = load_settings()
    if settings.workers > 1:
        from service.ops import workers

        workers.supervise(settings, args.host, args.port)
        return
    configure_process(settings)
    uvicorn.run("service.main:create_app", **uvicorn_options(settings, args.host, args.port))


if __name__ == "__main__":
    main()
