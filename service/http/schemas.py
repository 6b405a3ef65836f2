"""Request and response models of the HTTP API (the OpenAPI text comes from here). The
create request is a model's spec (``service.model.spec.CreateModel``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    model_validator,
)

from service.model.spec import PromotionSpec, Strict, exactly_one_form, no_nulls

#: a JSON number (an integer or a float, never a string or a boolean), finite
FiniteFloat = Annotated[float, Field(strict=True, allow_inf_nan=False)]
#: a feedback label: matched against the model's classes by the library's rule
#: (``core.labels``: a number equal to a numeric class is that class, booleans and strings
#: match only their own kind)
Label = StrictBool | StrictInt | StrictStr | FiniteFloat
FeatureValue = FiniteFloat | StrictBool | StrictStr


INSTANCE_FORMS = (("x",), ("indices", "values"), ("features",))


class Instance(Strict):
    """One example: dense ``x``, sparse ``indices`` + ``values``, or named ``features``."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=exactly_one_form(*INSTANCE_FORMS))

    x: list[FiniteFloat] | None = Field(None, description="dense values, one per input")
    indices: list[StrictInt] | None = Field(None, description="0-based indices of the values")
    values: list[FiniteFloat] | None = Field(None, description="the values at ``indices``")
    features: dict[str, FeatureValue] | None = Field(
        None, description="named features, hashed into the inputs (strings one-hot)"
    )

    @model_validator(mode="after")
    def _one_form(self):
        no_nulls(self, ("x", "indices", "values", "features"))
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
    member: str = Field(..., description="the member that scored (the champion by default)")
    variant: Literal["live", "averaged"]
    predictions: list[Prediction]


class Example(Instance):
    """A labelled example: an instance (or the ``prediction_id`` of an earlier prediction,
    whose features the service kept) and its true ``label``."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra=exactly_one_form(*INSTANCE_FORMS, ("prediction_id",)),
    )

    prediction_id: str | None = Field(None, description="the id of an earlier prediction")
    label: Label

    @model_validator(mode="after")
    def _one_form(self):
        no_nulls(self, ("prediction_id",))
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


class Comparison(BaseModel):
    """A member's variant against what serves, on the same examples (progressive errors,
    paired): the mean difference of the errors (negative: fewer errors than what serves)
    with its anytime-valid confidence interval (a confidence sequence: safe to look at after
    every example), and the verdict at that confidence."""

    against: dict[str, str] = Field(..., description="the serving member and variant")
    error: Literal["zero_one", "squared"] = Field(
        ..., description="what is compared: the 0/1 error (classification), else the squared"
    )
    examples: int = Field(..., description="paired examples since what serves last changed")
    mean_difference: float | None
    interval: list[float] | None = Field(
        None, description="[low, high] of the mean difference (null until it is defined)"
    )
    confidence: float
    verdict: Literal["better", "worse", "undecided"]


class VariantInfo(BaseModel):
    metrics: ProgressiveMetrics
    comparison: Comparison | None = Field(
        None, description="Against what serves (null: this variant serves)."
    )


class DriftInfo(BaseModel):
    detector: Literal["adwin", "page_hinkley"]
    detections: int = Field(..., description="degradations detected (the error rising)")
    last_detected_at_example: int | None
    on_drift: Literal["none", "challenger"]


class LearningInfo(BaseModel):
    paused: bool
    backlog: int = Field(..., description="feedback logged while paused, not learned yet")


class ChallengerInfo(BaseModel):
    """A challenger: a member that learns the model's feedback beside its champion."""

    name: str
    kind: str
    params: dict[str, Any]
    averaging: dict[str, int | str] | None
    calibration: Literal["platt", "none"] | None
    examples_learned: int
    metrics: ProgressiveMetrics = Field(..., description="its live variant's")
    comparison: Comparison | None = Field(None, description="its live variant's")
    variants: dict[str, VariantInfo]


class ChallengerList(BaseModel):
    challengers: list[ChallengerInfo]


class ShareInfo(BaseModel):
    share: int = Field(..., description="i: the round's examples i, i + k, i + 2k, ...")
    learner: str | None = Field(..., description="the learner holding its lease (null: none now)")
    position: str | None = Field(
        ..., description="the last log record its learner read (null: none yet)"
    )


class ParallelInfo(BaseModel):
    learners: int
    interval: int
    shares: list[ShareInfo]


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
    member: str = Field(..., description="the member that serves (the model's first: original)")
    variant: Literal["live", "averaged"] = Field(
        ..., description="the variant predict serves when the request names none"
    )
    variants: dict[str, VariantInfo] = Field(
        ..., description="the serving member's variants side by side (progressive metrics)"
    )
    challengers: list[str]
    promotion: PromotionSpec
    serve: Literal["fixed", "best"]
    promotions: int
    drift: DriftInfo | None
    learning: LearningInfo
    parallel: ParallelInfo | None = Field(
        None, description="Data-parallel learning (created with `parallel`): its shares."
    )


class ModelList(BaseModel):
    models: list[ModelInfo] = Field(description="A page of the models, by name.")
    next: str | None = Field(
        None,
        description="The cursor of the next page (`?after=` this name), null on the last page.",
    )


class SnapshotInfo(BaseModel):
    model: str
    version: int
    created_at: float
    size_bytes: int


class SnapshotList(BaseModel):
    snapshots: list[SnapshotInfo]


class ErrorDetail(BaseModel):
    code: str = Field(..., description="stable, machine-readable (docs/api.md lists them)")
    message: str = Field(..., description="for people")
    details: Any = Field(None, description="where the error is (a field, a row), or null")


class ErrorResponse(BaseModel):
    """Every error answer."""

    error: ErrorDetail


class InferenceErrorResponse(BaseModel):
    """Every error answer under ``/v2`` (the Open Inference Protocol's form)."""

    error: str = Field(..., description="for people")
    code: str = Field(..., description="stable, machine-readable (docs/api.md lists them)")
