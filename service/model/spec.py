"""A model's spec: its create request (``POST /v1/models``), the definition of what a
model is that the kind catalogue checks (``service.model.kinds.plan``), snapshots and model
files keep (``spec_to_json``) and restores read back (``spec_from_json``). The HTTP schemas
(``service.http.schemas``) take it as the create request's body.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def no_nulls(model: BaseModel, fields) -> None:
    """Absent means "not this form"; an explicit null is refused, as the schema says."""
    for name in fields:
        if name in model.model_fields_set and getattr(model, name) is None:
            raise ValueError(f"{name} must not be null (leave it out)")


def exactly_one_form(*forms: tuple[str, ...]):
    """JSON Schema: the object holds the fields of exactly one of ``forms`` (and none of
    the others'), as the model validator requires."""
    fields = sorted({name for form in forms for name in form})

    def extra(schema: dict) -> None:
        for name in fields:  # present means not null: an absent field is the only "none"
            prop = schema["properties"][name]
            branches = [b for b in prop.pop("anyOf", []) if b.get("type") != "null"]
            prop.update(branches[0] if branches else {})
            prop.pop("default", None)
        schema["oneOf"] = [
            {
                "required": list(form),
                "not": {"anyOf": [{"required": [f]} for f in fields if f not in form]},
            }
            for form in forms
        ]

    return extra


class InputSpec(Strict):
    """The input space: ``n_features`` for dense/sparse rows, or ``hashed`` buckets for named
    features (both accept every instance form; ``hashed`` documents the intent)."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra=exactly_one_form(("n_features",), ("hashed",))
    )

    # strict: a boolean is not a dimension (pydantic's lax mode reads true as 1)
    n_features: StrictInt | None = Field(None, ge=1, le=1 << 26)
    hashed: StrictInt | None = Field(None, ge=1, le=1 << 26)

    @model_validator(mode="after")
    def _one_of(self):
        no_nulls(self, ("n_features", "hashed"))
        if (self.n_features is None) == (self.hashed is None):
            raise ValueError("give exactly one of n_features and hashed")
        return self

    @property
    def size(self) -> int:
        return self.n_features if self.n_features is not None else self.hashed


class AveragingSpec(Strict):
    """Time averaging (section 3.4 of the DoS paper): fold the live model into the aligned
    running average every ``interval`` learned examples."""

    interval: StrictInt = Field(..., ge=1, le=1 << 40)
    alignment: Literal["paper", "spectral"] = Field(
        "paper",
        description="DoS alignment before averaging: the paper's min-norm boost + "
        "Procrustes, or the spectral canonical form + Procrustes (exact under every symmetry).",
    )


KindName = Literal[
    "linear-pa",
    "dos",
    "pqr",
    "mofm",
    "perceptron",
    "ellipsoid-perceptron",
    "shor-perceptron",
    "ellipsoidal",
]


class PromotionSpec(Strict):
    """When a challenger is promoted without an operator (``service.model.group``)."""

    auto: StrictBool = Field(
        False,
        description="Promote a challenger (member and variant) once its comparison with what "
        "serves says it is better at `confidence`, after `min_examples` paired examples.",
    )
    confidence: float = Field(
        0.99,
        gt=0.5,
        lt=1.0,
        description="Confidence of the comparisons' anytime-valid intervals (and verdicts).",
    )
    min_examples: StrictInt = Field(1000, ge=1, le=1 << 40)


class DriftSpec(Strict):
    """A drift detector on the serving variant's errors, counting degradations only."""

    detector: Literal["adwin", "page_hinkley"] = Field(
        ..., description="ADWIN (Bifet & Gavalda 2007) or Page-Hinkley, as River has them."
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="The detector's parameters: ADWIN delta, clock, max_buckets, "
        "min_window_length, grace_period; Page-Hinkley min_instances, delta, threshold, alpha.",
    )
    on_drift: Literal["none", "challenger"] = Field(
        "none",
        description="challenger: a detection starts a fresh copy of the champion, the member "
        "`drift`, learning from the next example on (replacing an earlier one).",
    )

    @model_validator(mode="before")
    @classmethod
    def _inline_params(cls, data):
        """The detector's parameters may also be given beside ``detector`` (``{"detector":
        "adwin", "delta": 0.01}``): they join ``params``."""
        if not isinstance(data, dict):
            return data
        inline = {k: v for k, v in data.items() if k not in ("detector", "params", "on_drift")}
        params = data.get("params", {})
        if not inline or not isinstance(params, dict):
            return data
        kept = {k: v for k, v in data.items() if k not in inline}
        return {**kept, "params": {**params, **inline}}


class ParallelSpec(Strict):
    """Data-parallel learning of one model (``service.scale.parallel``): ``learners`` shares
    of its log, each learned by the learner that leases it, merged by aligned averaging
    every ``interval`` examples (section 3.4 of the DoS paper, eq 28)."""

    learners: StrictInt = Field(..., ge=1, le=64, description="k: shares of the log.")
    interval: StrictInt = Field(
        ...,
        ge=1,
        le=1 << 30,
        description="Examples (over all shares) between two merges: the published model "
        "moves on once per interval.",
    )


class CreateModel(Strict):
    """A new named model."""

    name: str = Field(..., pattern=NAME_PATTERN, examples=["spam"])
    kind: KindName = Field(
        ...,
        examples=["dos"],
        description="linear-pa / dos: passive-aggressive linear and difference-of-squares "
        "classifiers; pqr: projective quadratic regression (FTRL); mofm: multi-output "
        "polynomial network / factorization machine (one model for all classes; refitted by "
        "conditional gradient on a reservoir of recent examples); perceptron, "
        "ellipsoid-perceptron, shor-perceptron: the separation thesis's online learners; "
        "ellipsoidal: its maximal-separation-ratio ellipsoidal classifier, a batch model the "
        "worker fits on a window of recent feedback (needs cvxpy).",
    )
    params: dict[str, Any] = Field(
        default_factory=dict, examples=[{"rank": 8, "mode": "pa1", "C": 0.1}]
    )
    input: InputSpec = Field(..., examples=[{"n_features": 784}, {"hashed": 262144}])
    classes: list[StrictBool | StrictInt | StrictStr] | None = Field(
        None,
        min_length=2,
        max_length=1000,
        examples=[["ham", "spam"], [False, True]],
        description="Labels: integers, strings, or the booleans [false, true] (not mixed with "
        "numbers or strings). Two classes: the first is the negative one. More: multi-class by "
        "one-vs-one (default) or one-vs-rest (mofm: one multi-output model). Default [-1, 1]; "
        'none for PQR regression (params {"task": "regression"}). With multiclass "ordinal" '
        "(mofm only): the relevance levels, increasing numbers. A feedback label is the class "
        "it equals: a number equal to a numeric class is that class (1.0 is the class 1), "
        "booleans match only boolean classes and strings only string classes.",
    )
    multiclass: Literal["ovo", "ovr", "ordinal"] = Field(
        "ovo",
        description="Reduction for more than two classes: one-vs-one, one-vs-rest, or "
        "ordinal McRank (mofm only: P(y <= level) per level, the expected relevance predicted).",
    )
    averaging: AveragingSpec | None = None
    calibration: Literal["platt", "none"] | None = Field(
        None,
        description="Probabilities for the kinds whose scores are margins (linear-pa, dos and "
        "the perceptrons, binary or multi-class): `platt` (the default for them) fits Platt "
        "scaling online on the progressive scores, `none` gives no probability. Binary PQR "
        "and mofm give probabilities of their own; other kinds take no calibration.",
    )

    promotion: PromotionSpec | None = Field(
        None, description="When a challenger is promoted without an operator (default: never)."
    )
    serve: Literal["fixed", "best"] | None = Field(
        None,
        description="fixed (default): predict without `variant` serves the champion's live "
        "variant (or the one a promotion named); best: its better variant, live or averaged, "
        "by the comparison's test.",
    )
    drift: DriftSpec | None = None
    parallel: ParallelSpec | None = Field(
        None,
        description="Roles mode only (Redis, learners): learn the model on `learners` "
        "learners at once, each a share of its feedback (example i of a round to share i mod "
        "k), merged by aligned averaging every `interval` examples. Kinds linear-pa, dos and "
        "perceptron (and challengers of those kinds).",
    )

    @field_validator("classes")
    @classmethod
    def _booleans_alone(cls, classes):
        """Boolean classes are a binary task's [false, true]: never beside numbers or strings
        (Python holds true equal to 1, and a label of one kind never matches another)."""
        if classes is not None and len({isinstance(c, bool) for c in classes}) > 1:
            raise ValueError("boolean classes cannot be mixed with numbers or strings")
        return classes

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "name": "digits",
                    "kind": "dos",
                    "params": {"rank": 8},
                    "input": {"n_features": 784},
                    "classes": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
                    "averaging": {"interval": 50000},
                }
            ]
        },
    )


def spec_to_json(spec: CreateModel) -> dict:
    """A create request as snapshots keep it (absent fields left out)."""
    return _without_nulls(spec.model_dump(mode="json"))


def spec_from_json(data: dict) -> CreateModel:
    """A create request from a snapshot (older snapshots wrote absent fields as null, and
    predate calibration: their models have none)."""
    data = _without_nulls(data)
    return CreateModel.model_validate({"calibration": "none", **data})


def _without_nulls(value):
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


#: the fields of a create request that are the model's policies, not a member's
POLICY_FIELDS = ("promotion", "serve", "drift", "parallel")


def member_spec(spec: CreateModel) -> CreateModel:
    """A create request as one member's spec: without the model's policies."""
    return spec.model_copy(update=dict.fromkeys(POLICY_FIELDS))


class ChallengerSpec(Strict):
    """A challenger: another kind or other parameters, learning the model's feedback beside
    its champion (the input, classes and task are the model's)."""

    name: str = Field(..., pattern=NAME_PATTERN, examples=["c1"])
    kind: KindName = Field(..., examples=["dos"])
    params: dict[str, Any] = Field(default_factory=dict, examples=[{"rank": 16}])
    averaging: AveragingSpec | None = None
    calibration: Literal["platt", "none"] | None = None
    multiclass: Literal["ovo", "ovr", "ordinal"] | None = Field(
        None, description="Default: the model's."
    )

    def of(self, model: CreateModel) -> CreateModel:
        """The challenger's spec: the model's input, classes and task with its own kind and
        parameters (ValidationError if they do not go together)."""
        data = {
            **spec_to_json(member_spec(model)),
            "kind": self.kind,
            "params": self.params,
            "averaging": None if self.averaging is None else self.averaging.model_dump(),
            "calibration": self.calibration,
        }
        if self.multiclass is not None:
            data["multiclass"] = self.multiclass
        return CreateModel.model_validate(_without_nulls(data))


class PolicyPatch(Strict):
    """New policies of a model (``PATCH /v1/models/{name}``): the fields given replace the
    model's; ``drift: null`` removes its detector."""

    promotion: PromotionSpec | None = None
    serve: Literal["fixed", "best"] | None = None
    drift: DriftSpec | None = None

    @model_validator(mode="after")
    def _something(self):
        if not self.model_fields_set:
            raise ValueError("give at least one of promotion, serve, drift")
        return self


class Promote(Strict):
    """A promotion: the challenger (and its variant) that serves from now on."""

    challenger: str = Field(..., pattern=NAME_PATTERN, examples=["c1"])
    variant: Literal["live", "averaged"] | None = Field(None, description="Default: live.")


class Learning(Strict):
    """Pause learning (feedback is still logged and acknowledged) or resume it: the backlog
    is learned in order, or dropped with ``discard``."""

    paused: StrictBool
    discard: StrictBool = Field(
        False, description="With paused false: drop the backlog instead of learning it."
    )
