"""The synthetic workload: sparse rows labelled by a fixed random teacher, encoded once
into request bodies so that encoding costs nothing while measuring."""

from __future__ import annotations

import json
import math
import random

from deploy.loadtest.loadgen.config import LoadConfig

JSON_TYPE = b"application/json"
SVMLIGHT_TYPE = b"text/x-svmlight"
NDJSON_TYPE = b"application/x-ndjson"


def _teacher_sign(index: int) -> float:
    """A fixed pseudo-random +-1 weight per feature (Knuth's multiplicative hash)."""
    return 1.0 if (index * 2654435761 >> 13) & 1 else -1.0


class Workload:
    """Pre-encoded request bodies, built once so that encoding costs nothing while measuring.

    ``rows`` are (indices, values, label) with ``nnz`` distinct sorted 0-based indices, values
    of unit-norm scale, and the label of the teacher ``sign(sum_j s_j v_j)`` flipped with
    probability ``label_noise``.
    """

    def __init__(self, config: LoadConfig):
        self.config = config
        rng = random.Random(config.seed)
        self.rows = [self._row(rng) for _ in range(config.pool)]
        self.predict_bodies = [
            json.dumps({"instances": [{"indices": i, "values": v}]}).encode()
            for i, v, _ in self.rows
        ]
        self.feedback_bodies = [
            json.dumps({"examples": [{"indices": i, "values": v, "label": y}]}).encode()
            for i, v, y in self.rows
        ]
        self.labels = [y for _, _, y in self.rows]
        self.bulk_bodies: list[bytes] = []
        #: svmlight (numeric labels) or NDJSON (text classes)
        self.bulk_type = SVMLIGHT_TYPE
        if isinstance(config.classes, list) and any(isinstance(c, str) for c in config.classes):
            self.bulk_type = NDJSON_TYPE
        if config.mode == "bulk":
            for _ in range(config.bulk_bodies):
                lines = []
                for _ in range(config.batch):
                    indices, values, label = self._row(rng)
                    if self.bulk_type == NDJSON_TYPE:
                        example = {"indices": indices, "values": values, "label": label}
                        lines.append(json.dumps(example) + "\n")
                        continue
                    features = " ".join(
                        f"{j + 1}:{v!r}" for j, v in zip(indices, values, strict=True)
                    )
                    lines.append(f"{label} {features}\n")
                self.bulk_bodies.append("".join(lines).encode())

    def _row(self, rng: random.Random) -> tuple[list[int], list[float], int]:
        config = self.config
        indices = sorted(rng.sample(range(config.n_features), config.nnz))
        scale = 1.0 / math.sqrt(config.nnz)
        values = [round(rng.gauss(0.0, 1.0) * scale, 4) or scale for _ in indices]
        label = self._label(indices, values, rng)
        return indices, values, label

    def _label(self, indices, values, rng: random.Random):
        """The teacher's label of a row: +-1, one of ``classes`` (one teacher per class,
        the best score wins), or a real value (regression); noisy by ``label_noise``."""
        classes = self.config.classes
        pairs = list(zip(indices, values, strict=True))
        if classes == "regression":
            score = sum(_teacher_sign(j) * v for j, v in pairs)
            return round(score + rng.gauss(0.0, self.config.label_noise), 6)
        labels = classes or [-1, 1]
        if len(labels) == 2:
            best = int(sum(_teacher_sign(j) * v for j, v in pairs) > 0)
        else:
            scores = [
                sum(_teacher_sign(j * len(labels) + c) * v for j, v in pairs)
                for c in range(len(labels))
            ]
            best = scores.index(max(scores))
        if rng.random() < self.config.label_noise:  # any other class
            other = rng.randrange(len(labels) - 1)
            best = other + (other >= best)
        return labels[best]

    def model_spec(self, name: str) -> dict:
        config = self.config
        spec = {
            "name": name,
            "kind": config.kind,
            "params": {"rank": config.rank} if config.kind == "dos" else {},
            "input": {"hashed": config.n_features},
        }
        if config.averaging_interval:
            spec["averaging"] = {"interval": config.averaging_interval}
        return spec
