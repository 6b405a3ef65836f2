"""The kind catalogue: every model kind the service creates, its parameters with their
valid ranges (``service.model.params``), its size, and how it is built.

A create request is checked here against every parameter range and every limit (the floats
it holds in memory, sub-models of a multi-class reduction) by ``plan``, before anything is
allocated;
``build`` then constructs the estimator. Defaults are read from the core classes'
signatures, not re-typed. The same declarations describe ``params`` in OpenAPI.
"""

from __future__ import annotations

import importlib.util
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from core.averaging import Averaged
from core.base import Estimator
from core.calibration import Calibrated
from core.dos import DTYPES as DOS_DTYPES
from core.dos import DoSClassifier
from core.linear import LinearPA
from core.mofm import MultiOutputPN
from core.one_vs_one import OneVsOne
from core.one_vs_rest import OneVsRest
from core.ordinal import OrdinalMcRank
from core.pqr import PQR
from core.separation import (
    EllipsoidalClassifier,
    EllipsoidPerceptron,
    Perceptron,
    ShorPerceptron,
)
from service.exceptions import InvalidRequest
from service.model.params import (
    AnyOf,
    Boolean,
    Integer,
    IntegerList,
    Options,
    Param,
    Real,
    nullable,
)

#: floats counted for each sub-model's Python objects beyond its arrays (~2 KB measured)
SUBMODEL_OVERHEAD_FLOATS = 256
#: floats counted for each slot of a refit window (its row, target and arrival time)
WINDOW_SLOT_FLOATS = 3
#: the largest input dimension of the kinds that hold (n + 1) x (n + 1) matrices
MAX_QUADRATIC_FEATURES = 2000
#: the ellipsoidal classifier's SDP: at most this many (reduced) features
MAX_SDP_FEATURES = 1000

SEED = Integer(0, 2**32 - 1)
PA_MODE = Options(("pa", "pa1", "pa2"))
AGGRESSIVENESS = Real(0.0, 1e12, low_open=True)


def _default(cls: type, name: str) -> Any:
    return inspect.signature(cls).parameters[name].default


def _params(cls: type, declared: dict[str, tuple]) -> dict[str, Param]:
    """``{name: (constraint, description)}`` with each default read from ``cls``."""
    return {
        name: Param(constraint, _default(cls, name), description)
        for name, (constraint, description) in declared.items()
    }


def _reservoir(size: int, refit_every: int, minimum_refit_every: int) -> dict[str, Param]:
    """The service's own parameters of the kinds the worker refits on a window."""
    return {
        "reservoir_size": Param(
            Integer(1, 1_000_000), size, "examples kept in the refit window (most recent)"
        ),
        "reservoir_policy": Param(
            Options(("window",)),
            "window",
            "the refit sample: the most recent examples (the refit learns what arrived "
            "during it, which only a window knows)",
        ),
        "reservoir_refit_every": Param(
            Integer(minimum_refit_every, 10**9),
            refit_every,
            "examples between two refits by the worker"
            + (" (0: never)" if minimum_refit_every == 0 else ""),
        ),
    }


@dataclass(frozen=True)
class Kind:
    """One kind of model: its core class, parameters and learned floats."""

    name: str
    cls: type[Estimator]
    description: str
    params: dict[str, Param]
    #: learned floats of one model over ``n`` inputs with these (complete) params and
    #: ``m`` outputs (mofm: classes or levels - 1)
    floats: Callable[[int, dict, int], int]
    #: parameters of the service, not passed to the core class
    own: frozenset[str] = field(default_factory=frozenset)
    #: multi-output: one model over all classes; batch: fitted by the worker on a window
    family: str = "online"
    #: its scores are margins: probabilities come from a calibrator (``core.calibration``)
    margins: bool = False
    #: an update touches the parameters of the example's non-zeros only (False: all of its
    #: state, as the ellipsoid's matrix, or a refit by the worker)
    sparse_updates: bool = True
    #: copies that learned apart merge into one by aligned averaging (section 3.4 of the DoS
    #: paper; a linear model's weights by their mean): ``parallel`` learning accepts it
    mergeable: bool = False

    def complete(self, params: dict) -> dict:
        """The params with every default filled in."""
        return {**{k: p.default for k, p in self.params.items()}, **params}

    def core_params(self, params: dict) -> dict:
        return {k: v for k, v in params.items() if k not in self.own}


def _quadratic(n: int, params: dict, m: int) -> int:
    return (n + 1) * (n + 2)


def _ellipsoidal(n: int, params: dict, m: int) -> int:
    """The SDP's (d+1) x (d+1) solution, the Gram-Schmidt pivots (d x n) and the window
    made dense for each fit (its size x n)."""
    d = params["n_components"] or n
    pivots = d * n if params["n_components"] else 0
    return (d + 2) ** 2 + pivots + params["reservoir_size"] * n


KINDS: dict[str, Kind] = {
    kind.name: kind
    for kind in (
        Kind(
            "linear-pa",
            LinearPA,
            "passive-aggressive linear classifier (Crammer et al. 2006)",
            _params(
                LinearPA,
                {
                    "mode": (PA_MODE, "pa (hard margin), pa1 or pa2 (soft margin)"),
                    "C": (AGGRESSIVENESS, "aggressiveness of pa1 / pa2"),
                    "fit_intercept": (Boolean(), "learn a bias"),
                },
            ),
            lambda n, p, m: n + 1,
            margins=True,
            mergeable=True,
        ),
        Kind(
            "dos",
            DoSClassifier,
            "difference-of-squares classifier sign(|Uz|^2 - |Vz|^2), passive-aggressive "
            "updates of eqs (17)-(20)",
            _params(
                DoSClassifier,
                {
                    "rank": (Integer(1, 1024), "rows of U and of V"),
                    "mode": (PA_MODE, "pa (hard margin), pa1 or pa2 (soft margin)"),
                    "C": (AGGRESSIVENESS, "aggressiveness of pa1 / pa2"),
                    "init_scale": (
                        nullable(Real(0.0, 100.0)),
                        "scale of the random initial U and V (null: 1)",
                    ),
                    "seed": (SEED, "seed of the initial U and V"),
                    "dtype": (
                        Options(DOS_DTYPES),
                        "storage of U and V: float32 halves their memory and the time a "
                        "large sparse model waits for it (arithmetic stays float64)",
                    ),
                },
            ),
            lambda n, p, m: (n + 1) * 2 * p["rank"],
            margins=True,
            mergeable=True,
        ),
        Kind(
            "pqr",
            PQR,
            "projective quadratic regression trained by FTRL-Proximal (Algorithm 2) or OGD",
            _params(
                PQR,
                {
                    "k": (Integer(0, 1024), "features with their own quadratic terms"),
                    "task": (
                        Options(("binary", "regression")),
                        "binary (logistic) or regression (squared loss)",
                    ),
                    "optimizer": (Options(("ftrl", "ogd")), "FTRL-Proximal or OGD"),
                    "alpha": (Real(0.0, 1e6, low_open=True), "learning rate"),
                    "beta": (Real(0.0, 1e6, low_open=True), "FTRL's learning-rate smoothing"),
                    "l1": (Real(0.0, 1e6), "L1 penalty"),
                    "l2": (Real(0.0, 1e6), "L2 penalty"),
                    "separation": (
                        AnyOf((Options(("topk",)), IntegerList(0, (1 << 26) - 1, 1024))),
                        "topk (the most frequent k features after warmup) or the features",
                    ),
                    "warmup": (
                        nullable(Integer(0, 10**12)),
                        "examples counted before the top k are chosen (null: 1000)",
                    ),
                },
            ),
            lambda n, p, m: 2 * (n + 1 + p["k"] * (p["k"] + 1) // 2) + 2 * n,
        ),
        Kind(
            "mofm",
            MultiOutputPN,
            "multi-output polynomial network / factorization machine over all classes "
            "(online AdaSGD; refitted by conditional gradient, Algorithm 1)",
            {
                **_params(
                    MultiOutputPN,
                    {
                        "activation": (
                            Options(("square", "anova")),
                            "polynomial network or factorization machine",
                        ),
                        "loss": (
                            Options(("softmax", "squared", "smoothed_hinge", "logistic")),
                            "training loss (the ordinal reduction: logistic only)",
                        ),
                        "penalty": (Options(("l1", "l1/l2", "l1/linf")), "basis penalty"),
                        "n_basis": (Integer(1, 4096), "basis vectors"),
                        "tau": (Real(0.0, 1e12, low_open=True), "penalty budget"),
                        "corrective": (Options(("output", "full")), "corrective refits"),
                        "refit_iter": (Integer(1, 100_000), "corrective iterations"),
                        "refine_iter": (Integer(0, 100_000), "refinement iterations"),
                        "tol": (Real(0.0, 1.0, low_open=True), "convergence tolerance"),
                        "gram": (Options(("auto", "dense", "matvec")), "Gram computation"),
                        "optimizer": (Options(("adagrad", "sgd")), "online optimizer"),
                        "learning_rate": (Real(0.0, 1e3, low_open=True), "online step size"),
                        "seed": (SEED, "seed of the initial basis"),
                    },
                ),
                **_reservoir(10_000, 0, minimum_refit_every=0),
            },
            lambda n, p, m: 2 * p["n_basis"] * (n + 1 + m) + p["n_basis"],
            own=frozenset({"reservoir_size", "reservoir_policy", "reservoir_refit_every"}),
            family="multi-output",
        ),
        Kind(
            "perceptron",
            Perceptron,
            "the normalized perceptron (Algorithm 1 of the separation thesis)",
            _params(Perceptron, {"fit_intercept": (Boolean(), "learn a bias")}),
            lambda n, p, m: n + 1,
            margins=True,
            mergeable=True,
        ),
        Kind(
            "ellipsoid-perceptron",
            EllipsoidPerceptron,
            "the ellipsoid method as a perceptron (the separation thesis)",
            _params(
                EllipsoidPerceptron,
                {
                    "rho": (
                        Real(0.0, 1.0, low_open=True, high_open=True),
                        "margin below which to give up",
                    ),
                    "on_unseparable": (
                        Options(("reset", "freeze")),
                        "after an unseparable verdict",
                    ),
                    "safeguard": (Boolean(), "grow the step against rounding"),
                    "fit_intercept": (Boolean(), "learn a bias"),
                },
            ),
            _quadratic,
            margins=True,
            sparse_updates=False,
        ),
        Kind(
            "shor-perceptron",
            ShorPerceptron,
            "Shor's space-dilation perceptron (the separation thesis)",
            _params(
                ShorPerceptron,
                {
                    "dilation": (
                        AnyOf(
                            (
                                Options(("ellipsoid", "dunagan-vempala")),
                                Real(1.0, 1e3),
                            )
                        ),
                        "ellipsoid, dunagan-vempala or the dilation coefficient (1: no dilation)",
                    ),
                    "step": (nullable(Real(0.0, 1e6, low_open=True)), "initial step"),
                    "step_growth": (
                        nullable(Real(0.0, 10.0, low_open=True)),
                        "factor of the step per update",
                    ),
                    "fit_intercept": (Boolean(), "learn a bias"),
                },
            ),
            _quadratic,
            margins=True,
            sparse_updates=False,
        ),
        Kind(
            "ellipsoidal",
            EllipsoidalClassifier,
            "the maximal-separation-ratio ellipsoidal classifier: a binary batch model the "
            "worker fits (an SDP, needs cvxpy) on a window of recent feedback",
            {
                **_params(
                    EllipsoidalClassifier,
                    {
                        "n_components": (
                            nullable(Integer(1, MAX_SDP_FEATURES)),
                            "reduce the inputs to this many Gram-Schmidt components",
                        ),
                        "gsk_bias": (
                            nullable(Real(0.0, 1e12, low_open=True)),
                            "bias of the Gram-Schmidt kernel",
                        ),
                        "solver": (Options(("CLARABEL", "SCS")), "SDP solver"),
                        "max_ratio": (Real(0.0, 1e12, low_open=True), "largest ratio sought"),
                        "separable_tol": (
                            Real(0.0, 1.0, low_open=True),
                            "ratio below which the window counts as inseparable",
                        ),
                    },
                ),
                **_reservoir(500, 100, minimum_refit_every=1),
            },
            _ellipsoidal,
            own=frozenset({"reservoir_size", "reservoir_policy", "reservoir_refit_every"}),
            family="batch",
            sparse_updates=False,
        ),
    )
}


#: the kinds ``parallel`` learning accepts (``Kind.mergeable``)
MERGEABLE = tuple(name for name, kind in KINDS.items() if kind.mergeable)


@dataclass(frozen=True)
class Limits:
    """What one model may cost (the service's settings)."""

    max_floats: int
    max_submodels: int
    averaging_interval: int


@dataclass(frozen=True)
class Plan:
    """A create request checked against the catalogue and the limits: what ``build`` makes."""

    kind: Kind
    params: dict  # complete: every default filled in
    n_features: int
    classes: list
    multiclass: str
    #: binary, regression, reduction, multi-output, ordinal or batch
    family: str
    averaging: tuple[int, str] | None  # (interval, alignment) of a time-averaged model
    submodels: int
    #: learned floats (time average, sub-models' overhead and refit window included)
    floats: int
    #: binary models wrapped in ``core.calibration.Calibrated`` (Platt scaling)
    calibrated: bool = False
    #: bytes the model holds in memory (``held_bytes``)
    nbytes: int = 0


def invalid_params(message: str) -> InvalidRequest:
    return InvalidRequest("invalid_params", message, {"field": "params"})


def invalid(message: str, where: str) -> InvalidRequest:
    return InvalidRequest("invalid_input", message, {"field": where})


def check_params(kind: Kind, params: dict) -> dict:
    """The params with defaults filled in; InvalidRequest naming the first bad one."""
    unknown = sorted(set(params) - set(kind.params))
    if unknown:
        raise invalid_params(
            f"unknown parameter(s) {unknown} for kind {kind.name!r}; accepted: "
            f"{sorted(kind.params)}"
        )
    for name, value in params.items():
        try:
            kind.params[name].constraint.check(f"params.{name}", value)
        except ValueError as error:
            raise invalid_params(str(error)) from None
    return kind.complete(params)


def plan(spec, limits: Limits) -> Plan:
    """Check a create request (``service.model.spec.CreateModel``) against the kind's
    parameters, its classes and task, and every limit, before anything is built."""
    kind = KINDS[spec.kind]
    params = check_params(kind, spec.params)
    n = spec.input.size
    regression = spec.kind == "pqr" and params["task"] == "regression"
    if regression and spec.classes is not None:
        raise invalid("a regression model takes no classes", "classes")
    classes = [] if regression else list(spec.classes or [-1, 1])
    if len(set(map(repr, classes))) != len(classes):
        raise invalid("classes must be distinct", "classes")
    if spec.averaging is not None and (not kind.cls.averageable or kind.family != "online"):
        raise invalid(f"kind {kind.name!r} cannot be time-averaged", "averaging")
    if spec.multiclass == "ordinal" and kind.family != "multi-output":
        raise invalid(
            f"the ordinal reduction needs a multi-output kind (mofm), not {kind.name!r}",
            "multiclass",
        )
    family, submodels, outputs = _family(kind, spec, params, classes, regression)
    floats = _floats(kind, params, n, outputs, submodels, limits)
    nbytes = held_bytes(floats, params)
    if nbytes > 8 * limits.max_floats:
        raise InvalidRequest(
            "model_too_large",
            f"the model would hold {nbytes // 8} floats in memory (its {floats} learned floats "
            f"and the buffers its snapshots are captured into), more than the limit "
            f"{limits.max_floats}",
            {"field": "input"},
        )
    if kind.family == "batch":
        _check_batch(kind, params, n, classes)
    if spec.calibration == "platt" and not kind.margins:
        raise invalid(
            f"kind {kind.name!r} takes no calibration (its scores are not margins)",
            "calibration",
        )
    calibrated = kind.margins and spec.calibration != "none"
    averaging = None
    if kind.family == "online" and kind.cls.averageable:
        averaging = (
            (spec.averaging.interval, spec.averaging.alignment)
            if spec.averaging
            else (limits.averaging_interval, "paper")
        )
    return Plan(
        kind,
        params,
        n,
        classes,
        spec.multiclass,
        family,
        averaging,
        submodels,
        floats,
        calibrated,
        nbytes,
    )


def task_of(plan: Plan) -> str:
    """What a plan's model learns: classification, regression or ordinal."""
    return {"regression": "regression", "ordinal": "ordinal"}.get(plan.family, "classification")


def held_bytes(floats: int, params: dict) -> int:
    """What a model of ``floats`` learned floats holds in memory: its arrays (float32 when
    its params say so) and the buffers every snapshot is captured into (the same size,
    kept from one snapshot to the next), and its refit window's slots. The encoding of a
    snapshot or an export needs as much again while it runs: the memory budget's
    headroom, not the model's."""
    itemsize = 4 if params.get("dtype") == "float32" else 8
    window = WINDOW_SLOT_FLOATS * params.get("reservoir_size", 0)
    return 2 * (floats - window) * itemsize + 8 * window


def _family(kind: Kind, spec, params: dict, classes: list, regression: bool):
    """(family, sub-models, outputs of one model) of a request."""
    if kind.family == "batch":
        return "batch", 1, 1
    if kind.family == "multi-output":
        if spec.multiclass == "ordinal":
            if any(isinstance(c, str) for c in classes) or classes != sorted(classes):
                raise invalid_params("ordinal levels (classes) must be increasing numbers")
            if params["loss"] != "logistic" and "loss" in spec.params:
                raise invalid_params("the ordinal reduction learns binary logistic outputs")
            params["loss"] = "logistic"
            return "ordinal", 1, len(classes) - 1
        return "multi-output", 1, len(classes)
    if regression:
        return "regression", 1, 1
    if len(classes) == 2:
        return "binary", 1, 1
    pairs = len(classes) * (len(classes) - 1) // 2
    return "reduction", pairs if spec.multiclass == "ovo" else len(classes), 1


def _floats(kind: Kind, params: dict, n: int, outputs: int, submodels: int, limits: Limits):
    """Learned floats of the whole model (time average and sub-model overhead included),
    refused (InvalidRequest) beyond the limits."""
    if kind.floats is _quadratic and n > MAX_QUADRATIC_FEATURES:
        raise InvalidRequest(
            "model_too_large",
            f"kind {kind.name!r} holds (n+1) x (n+1) matrices: at most "
            f"{MAX_QUADRATIC_FEATURES} features",
            {"field": "input"},
        )
    if submodels > limits.max_submodels:
        raise InvalidRequest(
            "model_too_large",
            f"the multi-class reduction would hold {submodels} binary models, more than the "
            f"limit {limits.max_submodels} (use one-vs-rest, or fewer classes)",
            {"field": "classes"},
        )
    copies = 2 if kind.family == "online" and kind.cls.averageable else 1
    one = kind.floats(n, params, outputs) + SUBMODEL_OVERHEAD_FLOATS
    floats = one * submodels * copies
    if "reservoir_size" in params:  # its slots' bookkeeping; rows grow with their values
        floats += WINDOW_SLOT_FLOATS * params["reservoir_size"]
    return floats


def _check_batch(kind: Kind, params: dict, n: int, classes: list) -> None:
    if len(classes) != 2:
        raise invalid(f"kind {kind.name!r} is a binary classifier: give two classes", "classes")
    if (params["n_components"] or n) > MAX_SDP_FEATURES:
        raise InvalidRequest(
            "model_too_large",
            f"kind {kind.name!r} solves an SDP over (n+1)x(n+1) matrices: at most "
            f"{MAX_SDP_FEATURES} features (reduce them with n_components)",
            {"field": "input"},
        )
    if importlib.util.find_spec("cvxpy") is None:
        raise InvalidRequest(
            "kind_unavailable",
            f"kind {kind.name!r} needs cvxpy: install the 'separation' extra",
        )


def build(plan: Plan) -> Estimator:
    """The estimator of a checked plan (InvalidRequest if the core class refuses a
    combination the catalogue cannot see, e.g. separation features beyond the inputs)."""
    kind = plan.kind
    params = kind.core_params(plan.params)
    try:
        if plan.family == "ordinal":
            base = MultiOutputPN(
                n_features=plan.n_features,
                n_outputs=len(plan.classes) - 1,
                **params,
            )
            return OrdinalMcRank(base=base, levels=list(plan.classes))
        if plan.family == "multi-output":
            return MultiOutputPN(n_features=plan.n_features, classes=plan.classes, **params)
        model = kind.cls(n_features=plan.n_features, **params)
        if plan.calibrated:
            model = Calibrated(model=model, method="platt")
        if plan.family == "reduction":
            reduction = OneVsOne if plan.multiclass == "ovo" else OneVsRest
            model = reduction(base=model, classes=list(plan.classes))
        if plan.averaging is None:
            return model
        interval, alignment = plan.averaging
        return Averaged(model=model, interval=interval, alignment=alignment)
    except (TypeError, ValueError) as error:
        raise invalid_params(str(error)) from None


def params_schema(kind: Kind) -> dict:
    """The JSON Schema of a kind's ``params`` (OpenAPI)."""
    return {
        "type": "object",
        "title": f"params of {kind.name}",
        "description": kind.description,
        "properties": {name: p.schema() for name, p in kind.params.items()},
        "additionalProperties": False,
    }
