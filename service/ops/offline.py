"""Learning and evaluating from files, without a server (``lorentztron learn`` / ``eval``):
the service's own catalogue, bodies and live model, so that a model learned offline is the
one the service would have learned from the same feedback, and its file
(``service.durability.interchange``) loads into a running service (``PUT /v1/models/{name}``).

Files are svmlight (``label index:value ...``, 1-based indices, numeric labels) or NDJSON
(one example object per line, as the feedback endpoint takes them), read in parts of
``PART_LINES`` lines, each validated and learned as one bulk feedback request would be.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.datasets import parse_svmlight
from service.durability.interchange import load_model, write_model
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


def parts(paths: list[Path]) -> Iterator[tuple[str, bytes, int]]:
    """(media type, body of at most ``PART_LINES`` lines, bytes read so far) of the files."""
    done = 0
    for path in paths:
        media = media_of(path)
        with open(path, "rb") as handle:
            while True:
                lines = [line for _, line in zip(range(PART_LINES), handle, strict=False)]
                if not lines:
                    break
                body = b"".join(lines)
                done += len(body)
                if body.strip():
                    yield media, body, done


def scan(paths: list[Path]) -> tuple[int, list]:
    """The largest feature index (svmlight, 1-based) or dense length (NDJSON ``x``), and the
    distinct labels of the files, sorted: what ``learn`` uses when not told."""
    width, labels = 0, set()
    for media, body, _ in parts(paths):
        if media == SVMLIGHT:
            X, y = parse_svmlight(body, source="file")
            width = max(width, X.shape[1])
            labels.update(int(v) if float(v).is_integer() else float(v) for v in np.unique(y))
            continue
        for line in body.splitlines():
            if line.strip():
                example = json.loads(line)
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
    for media, body, done in parts(paths):
        prepared = prepare_feedback(live, media, body, cache, max_batch=PART_LINES)
        live.learn(prepared.batch, prepared.targets)
        if report is not None:
            report(
                Progress(
                    done,
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
    for media, body, done in parts(paths):
        prepared = prepare_feedback(live, media, body, cache, max_batch=PART_LINES)
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
            report(Progress(done, total, n, _metrics(n, correct, squared, log_loss, live), 0.0))
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
