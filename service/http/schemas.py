"""Request and response models of the HTTP API (the OpenAPI text comes from here)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

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

#: a JSON number (an integer or a float, never a string or a boolean), finite
FiniteFloat = Annotated[float, Field(strict=True, allow_inf_nan=False)]
#: a feedback label: matched against the model's classes by the library's rule
#: (``core.labels``: a number equal to a numeric class is that class, booleans and strings
#: match only their own kind)
Label = StrictBool | StrictInt | StrictStr | FiniteFloat
FeatureValue = FiniteFloat | StrictBool | StrictStr
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _no_nulls(model: BaseModel, fields) -> None:
    """Absent means "not this form"; an explicit null is refused, as the schema says."""
    for name in fields:
        if name in model.model_fields_set and getattr(model, name) is None:
            raise ValueError(f"{name} must not be null (leave it out)")


def _exactly_one_form(*forms: tuple[str, ...]):
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
        extra="forbid", json_schema_extra=_exactly_one_form(("n_features",), ("hashed",))
    )

    # strict: a boolean is not a dimension (pydantic's lax mode reads true as 1)
    n_features: StrictInt | None = Field(None, ge=1, le=1 << 26)
    hashed: StrictInt | None = Field(None, ge=1, le=1 << 26)

    @model_validator(mode="after")
    def _one_of(self):
        _no_nulls(self, ("n_features", "hashed"))
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


class CreateModel(Strict):
    """A new named model."""

    name: str = Field(..., pattern=NAME_PATTERN, examples=["spam"])
    kind: Literal[
        "linear-pa",
        "dos",
        "pqr",
        "mofm",
        "perceptron",
        "ellipsoid-perceptron",
        "shor-perceptron",
        "ellipsoidal",
    ] = Field(
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


INSTANCE_FORMS = (("x",), ("indices", "values"), ("features",))


class Instance(Strict):
    """One example: dense ``x``, sparse ``indices`` + ``values``, or named ``features``."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_exactly_one_form(*INSTANCE_FORMS))

    x: list[FiniteFloat] | None = Field(None, description="dense values, one per input")
    indices: list[StrictInt] | None = Field(None, description="0-based indices of the values")
    values: list[FiniteFloat] | None = Field(None, description="the values at ``indices``")
    features: dict[str, FeatureValue] | None = Field(
        None, description="named features, hashed into the inputs (strings one-hot)"
    )

    @model_validator(mode="after")
    def _one_form(self):
        _no_nulls(self, ("x", "indices", "values", "features"))
        forms = [
            self.x is not None,
            self.indices is not None or self.values is not None,
            self.features is not None,
        ]
        if sum(forms) != 1:
            raise ValueError("give exactly one of x, indices + values, or features")
        if (self.indices is None) != (self.values is None):
            raise ValueError("indices and values go together")
        return self


class PredictRequest(Strict):
    instances: list[Instance] = Field(..., min_length=1, examples=[[{"x": [0.0, 1.5, 2.0]}]])


class Prediction(BaseModel):
    label: Any = Field(..., description="Predicted class (regression: the predicted value).")
    score: float | list[float] = Field(
        ...,
        description="Decision value (binary: |Uz|^2-|Vz|^2 "
        "or w.z; multi-class: one value per class).",
    )
    probability: float | list[float] | None = Field(
        None,
        description="Binary models: P(second class), from the model's calibration (Platt "
        "scaling fitted online) or PQR's logistic model. Multi-class: one probability per "
        "class (reductions of calibrated binary models: one-vs-rest normalised, one-vs-one by "
        "pairwise coupling; mofm: its softmax or logistic outputs; ordinal: per level). Null "
        "for models without probabilities (calibration none, regression, the ellipsoidal "
        "batch kind, mofm's other losses).",
    )
    prediction_id: str = Field(..., description="Send it back with the true label as feedback.")


class PredictResponse(BaseModel):
    model: str
    version: int
    variant: Literal["live", "averaged"]
    predictions: list[Prediction]


class Example(Instance):
    """A labelled example: an instance (or the ``prediction_id`` of an earlier prediction,
    whose features the service kept) and its true ``label``."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra=_exactly_one_form(*INSTANCE_FORMS, ("prediction_id",)),
    )

    prediction_id: str | None = Field(None, description="the id of an earlier prediction")
    label: Label

    @model_validator(mode="after")
    def _one_form(self):
        _no_nulls(self, ("prediction_id",))
        if self.prediction_id is not None:
            if any(v is not None for v in (self.x, self.indices, self.values, self.features)):
                raise ValueError("give either prediction_id or the features, not both")
            return self
        return Instance._one_form(self)


class FeedbackRequest(Strict):
    examples: list[Example] = Field(
        ...,
        min_length=1,
        examples=[[{"x": [0.0, 1.5, 2.0], "label": 1}, {"prediction_id": "9f1c...", "label": -1}]],
    )


class FeedbackResult(BaseModel):
    predicted: Any = Field(..., description="Label predicted before the update.")
    loss: float = Field(
        ...,
        description="Hinge loss before the update (multi-class: summed "
        "over the binary models that learned).",
    )
    aggressive: bool = Field(..., description="Whether the model changed.")


class FeedbackResponse(BaseModel):
    model: str
    version: int
    learned: int
    aggressive: int
    results: list[FeedbackResult] | None = Field(None, description="Per example (JSON bodies).")
    logged: int | None = Field(
        None,
        description="`api` role only: examples appended to the durable log for the learner "
        "(nothing is learned by this process, so `learned` is 0 and `results` null).",
    )


class ProgressiveMetrics(BaseModel):
    """Progressive validation: each example is scored before it is learned."""

    examples: int
    loss_kind: Literal[
        "hinge", "log", "squared", "softmax", "smoothed_hinge", "logistic", "zero_one"
    ]
    accuracy: float | None
    loss: float | None
    rmse: float | None
    recent_examples: int
    recent_accuracy: float | None
    recent_loss: float | None
    recent_rmse: float | None


class ModelInfo(BaseModel):
    name: str
    kind: str
    params: dict[str, Any]
    input: dict[str, int]
    task: Literal["classification", "regression", "ordinal"]
    classes: list[Any]
    multiclass: str | None
    averaging: dict[str, int | str] | None
    calibration: Literal["platt", "none"] | None = Field(
        None, description="How the model's probabilities are made (margin kinds only)."
    )
    version: int
    created_at: float
    examples_learned: int
    aggressive_updates: int
    predictions: int
    last_snapshot_version: int | None
    metrics: ProgressiveMetrics
    status: dict[str, Any] | None = Field(
        None,
        description="Kind-specific state: the ellipsoid perceptron's margin estimate and "
        "'unseparable' flag; mofm's reservoir and refits.",
    )


class ModelList(BaseModel):
    models: list[ModelInfo]


class SnapshotInfo(BaseModel):
    model: str
    version: int
    created_at: float
    size_bytes: int


class SnapshotList(BaseModel):
    snapshots: list[SnapshotInfo]


class ErrorDetail(BaseModel):
    code: str = Field(..., description="stable, machine-readable (the README lists them)")
    message: str = Field(..., description="for people")
    details: Any = Field(None, description="where the error is (a field, a row), or null")


class ErrorResponse(BaseModel):
    """Every error answer."""

    error: ErrorDetail


class InferenceErrorResponse(BaseModel):
    """Every error answer under ``/v2`` (the Open Inference Protocol's form)."""

    error: str = Field(..., description="for people")
    code: str = Field(..., description="stable, machine-readable (the README lists them)")


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
