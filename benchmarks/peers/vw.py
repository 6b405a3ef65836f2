"""Vowpal Wabbit: its models read text lines ``label |namespace feature:value ...``."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from benchmarks.learners import OnePass, Timed
from benchmarks.streams import Stream

__all__ = ["VWTimed", "VowpalWabbit", "text_lines"]


def text_lines(
    stream: Stream, labelled: bool = True, namespace: str = "f", feature: str = "{}:{:.6g}"
) -> list[str]:
    """One line per row over its non-zeros, each written ``feature.format(index, value)``
    (built once per stream and form)."""

    def build(stream: Stream) -> list[str]:
        out = []
        for i in range(stream.n_rows):
            indices, values = stream.sparse_row(i)
            features = " ".join(feature.format(j, v) for j, v in zip(indices, values, strict=True))
            head = f"{int(stream.labels[i])} " if labelled else ""
            out.append(f"{head}|{namespace} {features}")
        return out

    return stream.view(f"vw lines {labelled} {namespace} {feature}", build)


class VWTimed(Timed):
    """A VW workspace timed per call: ``learn`` / ``predict`` on pre-formatted lines."""

    family = "vw"
    requires = "vowpalwabbit"

    def __init__(self, name: str, arguments: str, rank: int | None = None):
        super().__init__(name, rank)
        self.arguments = arguments

    def probe(self) -> None:
        self.close(self._workspace(18))

    def _workspace(self, bits: int):
        import vowpalwabbit

        return vowpalwabbit.Workspace(f"--quiet -b {bits} {self.arguments}")

    def prepare(self, stream: Stream) -> None:
        super().prepare(stream)
        self.lines = text_lines(stream, labelled=True)
        self.unlabelled = text_lines(stream, labelled=False)

    def new(self):
        return self._workspace(max(18, int(np.ceil(np.log2(self.stream.n_features)))))

    def learn_one(self, model, n: int) -> None:
        learn = model.learn
        for line in self.lines[:n]:
            learn(line)

    def predict_one(self, model, n: int) -> None:
        predict = model.predict
        for line in self.unlabelled[:n]:
            predict(line)

    def close(self, model) -> None:
        model.finish()


class VowpalWabbit(OnePass):
    """VW with the logistic loss, trained by its own parser over a text file of the stream
    (in ``workdir``): ``"ftrl"`` (FTRL-Proximal), ``"quadratic"`` (the same with all pairs of
    features, ``-q aa``) or ``"lrq"`` (a rank-r factorisation of the pairs, ``--lrq``)."""

    NAMES = {"ftrl": "VW --ftrl", "quadratic": "VW --ftrl -q aa", "lrq": "VW --lrq"}
    #: one line per row, namespace ``a``, features ``f<index>`` with every digit of the value
    FORMAT = {"namespace": "a", "feature": "f{}:{:.17g}"}

    def __init__(self, kind: str, params: dict, workdir: Path, bits: int = 18):
        self.kind, self.params, self.workdir, self.bits = kind, params, workdir, bits
        self.name = self.NAMES[kind]
        if kind == "lrq":
            self.name += f" (rank {params['rank']})"
        self.workspace = None

    def arguments(self) -> str:
        p = self.params
        common = f"--loss_function logistic --link logistic -b {self.bits} --quiet"
        if self.kind == "lrq":
            return (
                f"--lrq aa{p['rank']} --learning_rate {p['learning_rate']} --l2 {p['l2']} {common}"
            )
        quadratic = " -q aa" if self.kind == "quadratic" else ""
        return (
            f"--ftrl --ftrl_alpha {p['ftrl_alpha']} --ftrl_beta {p['ftrl_beta']} "
            f"--l1 {p['l1']}{quadratic} {common}"
        )

    def file(self, stream: Stream) -> Path:
        """The stream's labelled lines in a file of ``workdir`` (written once per stream)."""

        def build(stream: Stream) -> Path:
            path = self.workdir / f"{stream.name}.vw"
            path.write_text("\n".join(text_lines(stream, True, **self.FORMAT)) + "\n")
            return path

        return stream.view(f"vw file {self.workdir}", build)

    def fit(self, stream: Stream) -> float:
        """VW learns the whole file while its Workspace is built; the time to build an empty
        Workspace (option parsing, weight table) is subtracted."""
        import vowpalwabbit

        self.close()
        path = self.file(stream)
        start = time.perf_counter()
        vowpalwabbit.Workspace(self.arguments()).finish()
        setup = time.perf_counter() - start
        start = time.perf_counter()
        self.workspace = vowpalwabbit.Workspace(f"{self.arguments()} -d {path}")
        self.workspace.run_parser()  # a no-op when the constructor has consumed the file
        return max(time.perf_counter() - start - setup, 1e-9)

    def proba(self, stream: Stream) -> np.ndarray:
        lines = text_lines(stream, False, **self.FORMAT)
        return np.array([self.workspace.predict(line) for line in lines])

    def size(self) -> int:
        ws = self.workspace
        return sum(1 for i in range(ws.num_weights()) if ws.get_weight(i) != 0)

    def close(self) -> None:
        if self.workspace is not None:
            self.workspace.finish()
            self.workspace = None
