"""The learners under test: ours (``LinearPA``, ``DoSClassifier`` of ranks 1, 4, 16, PA-I with
C = 1) and the peers of the same kind, in the order of the tables."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks.learners import Timed
from benchmarks.peers.river import RiverTimed, fm_classifier, pa_classifier
from benchmarks.peers.sklearn import SklearnTimed, passive_aggressive, sgd_pa1
from benchmarks.peers.vw import VWTimed
from benchmarks.streams import Stream
from core.dos import DoSClassifier
from core.linear import LinearPA

RANKS = (1, 4, 16)
PEER_GROUPS = ("river", "sklearn", "vw")
#: C of PA-I for every learner (River's C, scikit-learn's C / eta0)
AGGRESSIVENESS = 1.0


class Ours(Timed):
    """A core model: ``learn_one`` / ``predict_one`` on our rows, ``learn_many`` on the CSR."""

    batch_label = "learn_many (CSR)"
    whole_stream = True

    def __init__(self, name: str, factory: Callable[[int], Any], rank: int | None = None):
        super().__init__(name, rank)
        self.factory = factory

    def prepare(self, stream: Stream) -> None:
        super().prepare(stream)
        self.xs = stream.rows()
        self.ys = stream.int_labels()

    def new(self):
        return self.factory(self.stream.n_features)

    def batch(self, model) -> None:
        model.learn_many(self.stream.csr, self.stream.labels)


def linear_pa(n_features: int) -> LinearPA:
    return LinearPA(n_features=n_features, mode="pa1", C=AGGRESSIVENESS)


def dos(rank: int) -> Callable[[int], DoSClassifier]:
    """A factory of PA-I DoS models of ``rank``, by number of features."""

    def factory(n_features: int) -> DoSClassifier:
        return DoSClassifier(n_features=n_features, rank=rank, mode="pa1", C=AGGRESSIVENESS, seed=0)

    return factory


def build_learners(peers: set[str]) -> list[Timed]:
    """Ours, then the peers of the groups in ``peers`` (river, sklearn, vw)."""
    learners: list[Timed] = [Ours("LinearPA", linear_pa)]
    learners += [Ours(f"DoS rank {k}", dos(k), rank=k) for k in RANKS]
    if "river" in peers:
        learners.append(RiverTimed("River PAClassifier", pa_classifier(AGGRESSIVENESS)))
        learners += [RiverTimed(f"River FM rank {k}", fm_classifier(k), rank=k) for k in RANKS]
    if "sklearn" in peers:
        learners.append(SklearnTimed("sklearn SGD hinge pa1", sgd_pa1(AGGRESSIVENESS)))
        learners.append(
            SklearnTimed("sklearn PassiveAggressive", passive_aggressive(AGGRESSIVENESS))
        )
    if "vw" in peers:
        learners.append(VWTimed("VW hinge", "--loss_function hinge"))
        learners += [
            VWTimed(f"VW lrq rank {k}", f"--loss_function logistic --lrq ff{k}", rank=k)
            for k in RANKS
        ]
    return learners
