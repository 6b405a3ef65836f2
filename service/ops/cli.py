"""lorentztron: online-learning models served over HTTP, or learned offline from files.

examples:
  lorentztron serve --port 8000
  lorentztron learn data/a9a --kind dos --param rank=8 --n-features 123 -o a9a.safetensors
  lorentztron eval data/a9a.t --model a9a.safetensors
  lorentztron import a9a.safetensors --url http://127.0.0.1:8000 --key $WRITE_KEY
  lorentztron challenger add a9a c1 --kind dos --param rank=16 --key $WRITE_KEY
  lorentztron eval a9a data/a9a.t          # every member and variant of a served model
  lorentztron promote a9a c1 --key $WRITE_KEY"""

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
import math  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from pathlib import Path  # noqa: E402

import uvicorn  # noqa: E402

from service.config import get_settings  # noqa: E402


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

#: the CLI's client: a short retry of the answers that say "try again", and a refused
#: connection reported in well under a second (a person waits at the prompt; the client's
#: default of 4 retries from 0.25 s kept them waiting 3.7 s in silence); each retry is
#: announced on stderr (``_service``)
CLIENT_OPTIONS = {"retries": 2, "backoff": 0.1, "max_backoff": 1.0}


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


def _value(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


def learn(args) -> None:
    from service.exceptions import ServiceError
    from service.model.spec import CreateModel
    from service.ops import offline

    params = _params(args.param)
    width, labels = (None, None)
    if args.n_features is None and args.hashed is None or args.classes is None:
        width, labels = offline.scan(args.files)
    spec = {
        "name": args.name or _model_name(args.files[0]),
        "kind": args.kind,
        "params": params,
        "input": {"hashed": args.hashed}
        if args.hashed
        else {"n_features": args.n_features or width},
        "multiclass": args.multiclass,
    }
    if args.classes is None:
        regression = params.get("task") == "regression"
        if not regression:
            spec["classes"] = labels
    elif args.classes != "none":
        spec["classes"] = [_label(v) for v in args.classes.split(",")]
    if args.averaging_interval:
        spec["averaging"] = {"interval": args.averaging_interval}
    if args.calibration:
        spec["calibration"] = args.calibration
    try:
        live = offline.new_model(CreateModel.model_validate(spec))
        started = time.perf_counter()
        offline.learn(live, args.files, None if args.quiet else ProgressBar("learn"))
    except ServiceError as error:
        raise ValueError(f"{error.code}: {error.message}") from None
    except Exception as error:
        if type(error).__name__ == "ValidationError":
            raise ValueError(_validation(error)) from None
        raise
    output = args.output or Path(f"{live.name}.safetensors")
    size = offline.save(live, output)
    metrics = live.champion.metrics()
    learned = live.champion.counters.examples_learned
    print(
        f"learned {learned:,} examples in {time.perf_counter() - started:.2f} s: "
        f"{_metrics_line(metrics)}"
    )
    print(f"wrote {output} ({size:,} bytes; model {live.name!r}, version {live.version})")


def evaluate(args) -> None:
    from service.exceptions import ServiceError
    from service.ops import offline

    live = offline.load(args.model)
    variant = args.variant or "live"
    files = [Path(file) for file in args.files]
    predictions = open(args.predictions, "w") if args.predictions else None  # noqa: SIM115
    try:
        result = offline.evaluate(
            live,
            files,
            variant,
            None if args.quiet else ProgressBar("eval"),
            predictions,
        )
    except ServiceError as error:
        raise ValueError(f"{error.code}: {error.message}") from None
    finally:
        if predictions is not None:
            predictions.close()
    if args.json:
        print(json.dumps({"model": live.name, "variant": variant, **result}))
        return
    shown = {k: v for k, v in result.items() if k not in ("examples", "seconds")}
    print(
        f"{live.name} ({live.spec.kind}, {variant}) on {result['examples']:,} examples: "
        + "  ".join(f"{k} {_number(v)}" for k, v in shown.items())
    )


@contextmanager
def _service(args):
    """A client of ``--url`` with ``--key``; the service's refusals, and no answer at all,
    as one-line errors; each retry announced on stderr, one line (what failed, when it is
    tried again), so that nobody waits in silence."""
    from service.client import Client, LorentztronError, TransportError

    def announce(retrying) -> None:
        print(f"lorentztron {args.command}: {retrying}", file=sys.stderr, flush=True)

    try:
        with Client(args.url, key=args.key, on_retry=announce, **CLIENT_OPTIONS) as client:
            yield client
    except TransportError as error:
        raise ValueError(_unreachable(args.url, error.__cause__ or error)) from None
    except LorentztronError as error:
        raise ValueError(f"{error.code or error.status}: {error.message}") from None


def _unreachable(url: str, cause: BaseException) -> str:
    """One line for a service that did not answer: where, why, and what to check."""
    import httpx

    text = str(cause)
    refused = isinstance(cause, httpx.ConnectError) and "refused" in text.lower()
    reason = "connection refused" if refused else text or type(cause).__name__
    return f"cannot reach {url} ({reason}); is the server running? (set --url or LORENTZTRON_URL)"


def _labelled_rows(files: list[Path], batch_size: int, n_features: int | None = None):
    """(rows, labels, file, lines) of the files in order, at most ``batch_size`` rows at a
    time: svmlight rows as a sparse matrix (0-based; an index above ``n_features`` refused
    here, by its line), NDJSON rows as the instance objects of their lines; ``lines``: the
    line in ``file`` of each row."""
    from core.datasets import parse_svmlight
    from service.ops import offline

    for part in offline.parts(files):
        rows = part.rows()
        lines = [line for line, _ in rows]
        if part.media == offline.SVMLIGHT:
            with offline.located(part):
                X, y = parse_svmlight(part.body, n_features, source="file")
            labels = [int(v) if float(v).is_integer() else float(v) for v in y.tolist()]
        else:
            X, labels = [], []
            for line, text in rows:
                try:
                    example = json.loads(text)
                except ValueError as error:
                    raise ValueError(f"{part.path}:{line}: {error}") from None
                if "label" not in example or "prediction_id" in example:
                    raise ValueError(
                        f"{part.path}:{line}: an NDJSON line needs features and a label"
                    )
                labels.append(example.pop("label"))
                X.append(example)
        for start in range(0, len(labels), batch_size):
            stop = start + batch_size
            yield X[start:stop], labels[start:stop], part.path, lines[start:stop]


def evaluate_members(args) -> None:
    """``eval NAME FILE...``: every member and variant of a served model on the files."""
    if len(args.files) < 2:
        raise ValueError("give a model file (--model FILE) or the served model's NAME, and FILEs")
    if args.predictions is not None:
        raise ValueError("--predictions is for a model file (--model)")
    if args.batch_size < 1:
        raise ValueError("--batch-size must be at least 1")
    from service.client import LorentztronError

    name, files = args.files[0], [Path(file) for file in args.files[1:]]
    for file in files:
        if not file.is_file():
            raise ValueError(f"{file}: no such file")
    with _service(args) as client:
        info = client.model(name)
        members = {info["member"]: info["variants"]}
        if info["challengers"]:
            members.update({c["name"]: c["variants"] for c in client.challengers(name)})
        regression = info["task"] == "regression"
        metric = "rmse" if regression else "accuracy"
        rows = [
            {
                "member": member,
                "variant": variant,
                "serving": (member, variant) == (info["member"], info["variant"]),
                "examples": 0,
                metric: None,
                "progressive": shown["metrics"],
                "comparison": shown["comparison"],
            }
            for member, variants in members.items()
            for variant, shown in variants.items()
            if args.variant in (None, variant)
        ]
        totals = [0.0] * len(rows)  # right answers, or summed squared errors
        n_features = info["input"].get("n_features")
        for X, labels, file, lines in _labelled_rows(files, args.batch_size, n_features):
            for k, row in enumerate(rows):
                try:
                    answer = client.predict(name, X, variant=row["variant"], member=row["member"])
                except LorentztronError as error:  # a row refused: named by its line
                    found = re.match(r"instances\[(\d+)\]: ", error.message or "")
                    if found is None or int(found.group(1)) >= len(lines):
                        raise
                    line, rest = lines[int(found.group(1))], error.message[found.end() :]
                    raise ValueError(f"{error.code}: {file}:{line}: {rest}") from None
                for prediction, truth in zip(answer["predictions"], labels, strict=True):
                    label = prediction["label"]
                    totals[k] += (label - truth) ** 2 if regression else label == truth
                row["examples"] += len(labels)
    for row, total in zip(rows, totals, strict=True):
        if row["examples"]:
            mean = total / row["examples"]
            row[metric] = math.sqrt(mean) if regression else mean
    if args.json:
        print(json.dumps({"model": name, "task": info["task"], "metric": metric, "rows": rows}))
        return
    _print_members(name, info, metric, rows)


def _print_members(name: str, info: dict, metric: str, rows: list[dict]) -> None:
    examples = rows[0]["examples"] if rows else 0
    print(
        f"{name} ({info['task']}) on {examples:,} examples: {metric} on the files, then the "
        "model's own progressive and recent figures over the examples it has seen"
    )
    header = ("member", "variant", "serving", "examples", metric, "progressive", "recent", "seen",
              "verdict")  # fmt: skip
    table = [header]
    for row in rows:
        progressive, comparison = row["progressive"], row["comparison"]
        table.append(
            (
                row["member"],
                row["variant"],
                "yes" if row["serving"] else "",
                f"{row['examples']:,}",
                _number(row[metric]),
                _number(progressive.get(metric)),
                _number(progressive.get(f"recent_{metric}")),
                f"{progressive['examples']:,}",
                comparison["verdict"] if comparison else "-",
            )
        )
    _print_table(table)


def _print_table(table: list[tuple]) -> None:
    widths = [max(len(str(line[i])) for line in table) for i in range(len(table[0]))]
    for line in table:
        cells = (
            str(cell).ljust(width) if i < 3 else str(cell).rjust(width)
            for i, (cell, width) in enumerate(zip(line, widths, strict=True))
        )
        print("  ".join(cells).rstrip())


def _params(items: list[str]) -> dict:
    params = {}
    for item in items:
        key, equals, value = item.partition("=")
        if not equals:
            raise ValueError(f"--param {item!r}: give KEY=VALUE")
        params[key] = _value(value)
    return params


def challenger(args) -> None:
    with _service(args) as client:
        if args.action == "add":
            options = {"multiclass": args.multiclass} if args.multiclass else {}
            averaging = {"interval": args.averaging_interval} if args.averaging_interval else None
            info = client.add_challenger(
                args.name,
                args.challenger,
                kind=args.kind,
                params=_params(args.param),
                averaging=averaging,
                calibration=args.calibration,
                **options,
            )
            print(f"added challenger {info['name']!r} ({info['kind']}) to {args.name!r}")
        elif args.action == "remove":
            client.remove_challenger(args.name, args.challenger)
            print(f"removed challenger {args.challenger!r} from {args.name!r}")
        else:
            found = client.challengers(args.name)
            if args.json:
                print(json.dumps({"model": args.name, "challengers": found}))
                return
            if not found:
                print(f"{args.name!r} has no challengers")
                return
            table = [("challenger", "kind", "variant", "learned", "accuracy", "rmse",
                      "difference", "verdict")]  # fmt: skip
            for info in found:
                for variant, shown in info["variants"].items():
                    metrics, comparison = shown["metrics"], shown["comparison"] or {}
                    table.append(
                        (
                            info["name"],
                            info["kind"],
                            variant,
                            f"{info['examples_learned']:,}",
                            _number(metrics.get("accuracy")),
                            _number(metrics.get("rmse")),
                            _number(comparison.get("mean_difference")),
                            comparison.get("verdict", "-"),
                        )
                    )
            _print_table(table)


def promote(args) -> None:
    with _service(args) as client:
        info = client.promote(args.name, args.challenger, variant=args.variant)
    print(
        f"{args.name!r} serves {info['member']!r} ({info['kind']}, {info['variant']}); "
        f"challengers: {', '.join(info['challengers']) or 'none'}"
    )


def learning(args) -> None:
    with _service(args) as client:
        if args.command == "pause":
            info = client.pause(args.name)
        else:
            info = client.resume(args.name, discard=args.discard)
    state = "paused" if info["learning"]["paused"] else "learning"
    print(
        f"{args.name!r} {state}: {info['examples_learned']:,} examples learned, "
        f"backlog {info['learning']['backlog']:,}"
    )


def transfer(args) -> None:
    from service.durability.interchange import load_model

    with _service(args) as client:
        if args.command == "export":
            output = args.output or Path(f"{args.name}.safetensors")
            data = client.export(args.name)
            output.write_bytes(data)
            print(f"wrote {output} ({len(data):,} bytes)")
        else:
            data = args.file.read_bytes()
            name = args.name or load_model(data)[0]["name"]
            info = client.import_model(data, name)
            print(f"created {info['name']!r} at version {info['version']} in {args.url}")


def _model_name(path: Path) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9_-]", "-", path.name).strip("-") or "model"


def _label(text: str):
    value = _value(text)
    return value if isinstance(value, int | str) and not isinstance(value, bool) else text


def _validation(error) -> str:
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    return f"{where}: {first['msg']}" if where else first["msg"]


def _number(value) -> str:
    return "-" if value is None else f"{value:.4f}"


def _metrics_line(metrics: dict) -> str:
    parts = []
    for name in ("accuracy", "loss", "rmse"):
        if metrics.get(name) is not None:
            recent = metrics.get(f"recent_{name}")
            label = f"{metrics['loss_kind']} loss" if name == "loss" else name
            parts.append(f"{label} {_number(metrics[name])} (recent {_number(recent)})")
    return ", ".join(parts) or "no metrics"


class ProgressBar:
    """A progress line on stderr: a bar, examples, live metrics (on a terminal, redrawn in
    place at most ten times a second; otherwise one line per tenth of the work)."""

    def __init__(self, what: str, width: int = 24):
        self.what = what
        self.width = width
        self.stream = sys.stderr
        self.tty = self.stream.isatty()
        self.shown = -1.0
        self.step = -1

    def __call__(self, progress) -> None:
        share = progress.done / max(progress.total, 1)
        now = time.monotonic()
        step = int(share * 10)
        if self.tty and now - self.shown < 0.1 and share < 1:
            return
        if not self.tty and step == self.step:
            return
        self.shown, self.step = now, step
        filled = round(share * self.width)
        metrics = progress.metrics
        shown = (
            _metrics_line(metrics)
            if "loss_kind" in metrics
            else "  ".join(f"{k} {_number(v)}" for k, v in metrics.items() if k != "examples")
        )
        line = (
            f"{self.what} [{'#' * filled}{'.' * (self.width - filled)}] {100 * share:3.0f}%  "
            f"{progress.examples:,} examples  {shown}"
        )
        self.stream.write(("\r" + line + "\033[K") if self.tty else line + "\n")
        if self.tty and share >= 1:
            self.stream.write("\n")
        self.stream.flush()


if __name__ == "__main__":
    main()
