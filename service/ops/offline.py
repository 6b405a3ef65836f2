"""Learning and evaluating from files, without a server (``lorentztron learn`` / ``eval``):
the service's own catalogue, bodies and live model, so that a model learned offline is the
one the service would have learned from the same feedback, and its file
(``service.durability.interchange``) loads into a running service (``PUT /v1/models/{name}``).

Files are svmlight (``label index:value ...``, 1-based indices, numeric labels) or NDJSON
(one example object per line, as the feedback endpoint takes them), read in parts of
``PART_LINES`` lines, each validated and learned as one bulk feedback request would be. An
error in a part names the file and the line in the file (``located``), not the line in the
part that the parser saw.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from core.datasets import parse_svmlight
from service.durability.interchange import load_model, write_model
from service.exceptions import ServiceError
from service.http.bodies import prepare_feedback
from service.model.cache import PredictionCache
from service.model.kinds import Limits, plan
from service.model.live import LiveModel
from service.model.spec import CreateModel, spec_to_json

PART_LINES = 2000
SVMLIGHT, NDJSON = "text/x-svmlight", "application/x-ndjson"
#: no limits offline beyond the machine's
_LIMITS = Limits(1 << 62, 1 << 62, 50_000)


def media_of(path: Path) -> str:
    """svmlight or NDJSON: by extension (``.ndjson``, ``.jsonl``), else by the first byte."""
    if path.suffix in (".ndjson", ".jsonl"):
        return NDJSON
    with open(path, "rb") as handle:
        head = handle.read(4096).lstrip()
    return NDJSON if head.startswith(b"{") else SVMLIGHT


class Part(NamedTuple):
    """At most ``PART_LINES`` lines of a file: its media type and text, the bytes read so
    far (of all the files), the file, and the number in the file of its first line."""

    media: str
    body: bytes
    done: int
    path: Path
    line: int

    def rows(self) -> list[tuple[int, bytes]]:
        """(line in the file, text) of each of the part's rows (blank and comment-only
        lines hold none)."""
        return [
            (number, text)
            for number, text in enumerate(self.body.split(b"\n"), start=self.line)
            if text.split(b"#", 1)[0].strip()
        ]

    def row_lines(self) -> list[int]:
        """The line in the file of each of the part's rows."""
        return [number for number, _ in self.rows()]


def parts(paths: list[Path]) -> Iterator[Part]:
    """The files' parts (``Part``), in order; a part of blank lines only is left out."""
    done = 0
    for path in paths:
        media = media_of(path)
        first = 1
        with open(path, "rb") as handle:
            while True:
                lines = [line for _, line in zip(range(PART_LINES), handle, strict=False)]
                if not lines:
                    break
                body = b"".join(lines)
                done += len(body)
                if body.strip():
                    yield Part(media, body, done, path, first)
                first += len(lines)


#: how a parse of one part names a place in it: "file:12: ", "body: row 3: ", "line 4: ",
#: or the part as a whole: "file: "
_PLACE = re.compile(r"^(?:(?:file|body)(?::(\d+)|: row (\d+))?|line (\d+))[:.] ?")


@contextmanager
def located(part: Part):
    """Errors of a part's parse that name a line or row of the part (``file:12``, ``body:
    row 3``, ``line 4``) name the file and its line in the file instead
    (``a9a.t:2012: ...``), and those about the part as a whole its lines (``a9a.t (lines
    2001 to 4000): ...``): the same exception class, code and details."""
    try:
        yield
    except (ValueError, ServiceError) as error:
        service = isinstance(error, ServiceError)
        message = error.message if service else str(error)
        found = _PLACE.match(message)
        if found is None:
            raise
        line, row, example = found.groups()
        details = getattr(error, "details", None)
        numbered = isinstance(details, dict) and "line" in details
        if line is not None or (example is not None and numbered):
            number = part.line + int(line or example) - 1
        elif row is not None or example is not None:  # a row, or an NDJSON example's number
            number = part.row_lines()[int(row) if row is not None else int(example) - 1]
        else:  # the part as a whole
            number = None
        if number is None:
            last = part.line + part.body.rstrip(b"\n").count(b"\n")
            where = f"{part.path} (lines {part.line} to {last})"
        else:
            where = f"{part.path}:{number}"
        message = f"{where}: {message[found.end() :]}"
        if not service:
            raise ValueError(message) from None
        if numbered and number is not None:
            details = {**details, "line": number}
        raise type(error)(error.code, message, details) from None


def scan(paths: list[Path]) -> tuple[int, list]:
    """The largest feature index (svmlight, 1-based) or dense length (NDJSON ``x``), and the
    distinct labels of the files, sorted: what ``learn`` uses when not told."""
    width, labels = 0, set()
    for part in parts(paths):
        if part.media == SVMLIGHT:
            with located(part):
                X, y = parse_svmlight(part.body, source="file")
            width = max(width, X.shape[1])
            labels.update(int(v) if float(v).is_integer() else float(v) for v in np.unique(y))
            continue
        for number, line in enumerate(part.body.split(b"\n"), start=part.line):
            if line.strip():
                try:
                    example = json.loads(line)
                except ValueError as error:
                    raise ValueError(f"{part.path}:{number}: {error}") from None
                labels.add(example.get("label"))
                if "x" in example:
                    width = max(width, len(example["x"]))
                if "indices" in example and example["indices"]:
                    width = max(width, max(example["indices"]) + 1)
    return width, sorted(labels, key=lambda v: (isinstance(v, str), v))


def new_model(spec: CreateModel) -> LiveModel:
    """A live model of a create request (checked as the service checks it), with no log."""
    checked = plan(spec, _LIMITS)
    if checked.kind.margins:
        spec = spec.model_copy(update={"calibration": "platt" if checked.calibrated else "none"})
    return LiveModel(spec.name, spec, checked, metrics_window=1000)


@dataclass
class Progress:
    """What a long run reports as it goes: bytes read of the total, examples, metrics."""

    done: int
    total: int
    examples: int
    metrics: dict
    seconds: float


def learn(
    live: LiveModel, paths: list[Path], report: Callable[[Progress], None] | None = None
) -> LiveModel:
    """Learn the files' examples in order, each scored first (progressive validation)."""
    total = sum(path.stat().st_size for path in paths)
    started = time.perf_counter()
    cache = PredictionCache(1.0, 1)
    for part in parts(paths):
        with located(part):
            prepared = prepare_feedback(live, part.media, part.body, cache, max_batch=PART_LINES)
        live.learn(prepared.batch, prepared.targets)
        if report is not None:
            report(
                Progress(
                    part.done,
                    total,
                    live.champion.counters.examples_learned,
                    live.champion.metrics(),
                    _since(started),
                )
            )
    return live


def evaluate(
    live: LiveModel,
    paths: list[Path],
    variant: str = "live",
    report: Callable[[Progress], None] | None = None,
    predictions=None,
) -> dict:
    """Score the files' examples without learning: accuracy (classification), log loss
    (models with probabilities), RMSE (regression and ordinal); ``predictions``: a text
    file that gets one JSON line per example (label, score, probability)."""
    total = sum(path.stat().st_size for path in paths)
    started = time.perf_counter()
    cache = PredictionCache(1.0, 1)
    n = correct = 0
    squared = log_loss = 0.0
    numeric = live.family.regression
    for part in parts(paths):
        with located(part):
            prepared = prepare_feedback(live, part.media, part.body, cache, max_batch=PART_LINES)
        labels, scores, probabilities = live.predict_batch(prepared.batch, variant)
        for label, score, probability, target in zip(
            labels, scores, probabilities, prepared.targets, strict=True
        ):
            truth = float(target) if numeric else live.classes[int(target)]
            n += 1
            if numeric:
                squared += (float(label) - truth) ** 2
            else:
                correct += label == truth
                log_loss += _log_loss(probability, int(target), len(live.classes))
            if predictions is not None:
                line = {"label": label, "score": score, "probability": probability}
                predictions.write(json.dumps(line) + "\n")
        if report is not None:
            report(
                Progress(part.done, total, n, _metrics(n, correct, squared, log_loss, live), 0.0)
            )
    result = _metrics(n, correct, squared, log_loss, live)
    result["seconds"] = _since(started)
    return result


def _log_loss(probability, target: int, n_classes: int) -> float:
    if probability is None:
        return math.nan
    p = probability if isinstance(probability, list) else [1.0 - probability, probability]
    return -math.log(min(1.0, max(p[target] if target < len(p) else 0.0, 1e-15)))


def _metrics(n: int, correct: int, squared: float, log_loss: float, live: LiveModel) -> dict:
    if live.family.regression:
        return {"examples": n, "rmse": math.sqrt(squared / n) if n else None}
    loss = log_loss / n if n and math.isfinite(log_loss) else None
    return {"examples": n, "accuracy": correct / n if n else None, "log_loss": loss}


def _since(started: float) -> float:
    return time.perf_counter() - started


def save(live: LiveModel, path: Path) -> int:
    """Write the model's file (``service.durability.interchange``); its size in bytes."""
    captured = live.snapshot_state()
    with open(path, "wb") as file:
        return write_model(
            file, live.name, captured.version, spec_to_json(live.spec), captured.state
        )


def load(path: Path) -> LiveModel:
    """A live model from its file."""
    info, state = load_model(path.read_bytes())
    live = new_model(CreateModel.model_validate(info["spec"]))
    live.adopt(state, info["version"])
    return live
