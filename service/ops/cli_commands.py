"""The commands of ``lorentztron`` (``service.ops.cli``, which parses the command line and
runs them) that work on files or on a running service:

- ``learn`` and ``eval --model``: a model learned from svmlight or NDJSON files, or a model
  file scored on them, offline, with the service's own bodies and live model
  (``service.ops.offline``), a progress line on stderr (``ProgressBar``);
- ``eval NAME``: every member and variant of a served model scored on files in the shadow
  (``evaluate_members``), ``challenger``, ``promote``, ``pause`` / ``resume`` (``learning``),
  ``export`` / ``import`` (``transfer``): through the client (``service.client``), each
  retry announced on stderr.

A command's failure is a one-line ``ValueError`` (or ``OSError``), which ``cli.main`` prints
and exits with status 2.
"""

from __future__ import annotations

import json
import math
import re
import sys
import time
from contextlib import contextmanager
from pathlib import Path

#: the CLI's client: a short retry of the answers that say "try again", and a refused
#: connection reported in well under a second (a person waits at the prompt; the client's
#: default of 4 retries from 0.25 s kept them waiting 3.7 s in silence); each retry is
#: announced on stderr (``_service``)
CLIENT_OPTIONS = {"retries": 2, "backoff": 0.1, "max_backoff": 1.0}


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
