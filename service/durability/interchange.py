"""Models as safetensors files: the interchange format between the service, the command line
and anything else (Hugging Face's ``safetensors`` readers in Python, Rust, C++ or JS).

A file is the safetensors layout (written and read here, no dependency): an 8-byte little
endian header length, a JSON header (each tensor's ``dtype``, ``shape`` and ``data_offsets``,
plus string ``__metadata__``), then the raw little-endian tensor bytes. A model's file holds

- one tensor per array of its snapshot state, under the state's names: the estimator's
  arrays (``U_``, ``live.U_``, ``average.U_``, ...) and the service's (``service.*``:
  progressive metrics, refit window);
- ``__metadata__``: ``format`` (``lorentztron.model/1``) and ``model``, the JSON of the
  rest: name, version, create request (``spec``), the estimator's ``kind``, ``params`` and
  ``scalars``, and the service's scalars.

A model trained with the library loads into the service when its structure is the one the
service builds for ``spec`` (time-averaged and calibrated by default, as ``POST /v1/models``
makes it): ``dump_model(name, 0, spec, estimator.get_state())``; the import checks it.

``GET /v1/models/{name}/export`` writes one, ``PUT /v1/models/{name}`` reads one into a
new model, and ``lorentztron learn`` / ``eval`` / ``export`` / ``import`` use them offline.
"""

from __future__ import annotations

import io
import json
import struct

import numpy as np

from service.durability import schema
from service.durability.capture import SERVICE
from service.durability.constraints import SchemaError, parse_json

FORMAT = "lorentztron.model/1"
MEDIA_TYPE = "application/vnd.safetensors"

_CODES = {np.dtype(v).str: k for k, v in schema.TENSOR_DTYPES.items()}
#: a tensor not laid out in C order is written this many bytes of rows at a time
WRITE_BLOCK_BYTES = 256 * 1024


class InterchangeError(ValueError):
    """The bytes are not a model file this service can read."""


def write_tensors(tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> bytes:
    """A safetensors file of ``tensors`` (little endian, C order) with string metadata."""
    file = io.BytesIO()
    write_tensors_to(file, tensors, metadata)
    return file.getvalue()


def write_tensors_to(file, tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> int:
    """Write a safetensors file of ``tensors`` to a binary ``file``, tensor by tensor (no
    copy of the whole file in memory); its size in bytes."""
    header: dict = {"__metadata__": dict(metadata)}
    offset = 0
    for name in sorted(tensors):
        array = tensors[name]
        code = _CODES.get(array.dtype.newbyteorder("<").str)
        if code is None:
            raise InterchangeError(f"{name}: dtype {array.dtype} has no safetensors code")
        nbytes = array.size * array.dtype.itemsize
        header[name] = {
            "dtype": code,
            "shape": list(array.shape),
            "data_offsets": [offset, offset + nbytes],
        }
        offset += nbytes
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)  # the tensors start 8-byte aligned
    file.write(struct.pack("<Q", len(head)))
    file.write(head)
    for name in sorted(tensors):
        _write_c_order(file, tensors[name])
    return 8 + len(head) + offset


def _write_c_order(file, array: np.ndarray) -> None:
    """Write an array's bytes in C order, little endian: a view of a transposed layout (DoS's
    ``U_``) is copied a block of rows at a time (``WRITE_BLOCK_BYTES``), never whole."""
    array = array.astype(array.dtype.newbyteorder("<"), copy=False)
    if array.size == 0:
        return
    if array.flags.c_contiguous or array.ndim < 2:
        file.write(memoryview(np.ascontiguousarray(array).reshape(-1)).cast("B"))
        return
    rows = max(1, WRITE_BLOCK_BYTES // (array[0].size * array.dtype.itemsize))
    for start in range(0, array.shape[0], rows):
        block = np.ascontiguousarray(array[start : start + rows])
        file.write(memoryview(block.reshape(-1)).cast("B"))


def read_tensors(data: bytes | memoryview) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """(tensors, metadata) of a safetensors file, its header checked against
    ``service.durability.schema`` first; InterchangeError if it is not one."""
    data = memoryview(data)
    if len(data) < 8:
        raise InterchangeError("not a safetensors file (shorter than its header length)")
    (length,) = struct.unpack_from("<Q", data, 0)
    if length > schema.MAX_HEADER_BYTES:
        raise InterchangeError(f"not a safetensors file (a header of {length} bytes)")
    if 8 + length > len(data):
        raise InterchangeError("not a safetensors file (truncated header)")
    payload = data[8 + length :]
    try:
        header = parse_json(bytes(data[8 : 8 + length]), "the header")
        metadata, entries = schema.check_tensors(header, len(payload))
    except SchemaError as error:
        raise InterchangeError(f"not a safetensors file: {error}") from None
    tensors = {}
    for name, (dtype, shape, begin, end) in entries.items():
        array = np.frombuffer(payload[begin:end], dtype=dtype).reshape(shape)
        tensors[name] = array.astype(array.dtype.newbyteorder("="), copy=True)
    return tensors, metadata


def dump_model(name: str, version: int, spec: dict, state: dict) -> bytes:
    """A model's file from its snapshot state (``LiveModel`` capture or ``store.decode``)."""
    file = io.BytesIO()
    write_model(file, name, version, spec, state)
    return file.getvalue()


def write_model(file, name: str, version: int, spec: dict, state: dict) -> int:
    """Write a model's file to a binary ``file`` (``dump_model``); its size in bytes."""
    service = state.get("service", {"arrays": {}, "scalars": {}})
    tensors = {**state["arrays"], **service["arrays"]}
    if len(tensors) != len(state["arrays"]) + len(service["arrays"]):
        raise InterchangeError("an estimator array is named like a service array")
    model = {
        "name": name,
        "version": version,
        "spec": spec,
        "kind": state["kind"],
        "params": state["params"],
        "scalars": state["scalars"],
        "service_scalars": service["scalars"],
    }
    return write_tensors_to(file, tensors, {"format": FORMAT, "model": json.dumps(model)})


def load_model(data: bytes | memoryview) -> tuple[dict, dict]:
    """(model: name, version, spec; snapshot state) of a model's file, checked against
    ``service.durability.schema`` (the container, the metadata and the service's part of
    the state) before it is returned; InterchangeError otherwise."""
    tensors, metadata = read_tensors(data)
    if metadata.get("format") != FORMAT:
        raise InterchangeError(
            f"not a lorentztron model file (metadata format {metadata.get('format')!r})"
        )
    try:
        model = parse_json(metadata.get("model", ""), "the model's metadata")
        checked = schema.MODEL_FILE.check("model", model)
        state = {
            "kind": model["kind"],
            "params": model["params"],
            "scalars": model["scalars"],
            "arrays": {k: v for k, v in tensors.items() if not k.startswith(SERVICE)},
            "service": {
                "arrays": {k: v for k, v in tensors.items() if k.startswith(SERVICE)},
                "scalars": model["service_scalars"],
            },
        }
        schema.check_state(state, checked["spec"])
    except SchemaError as error:
        raise InterchangeError(f"not a lorentztron model file: {error}") from None
    info = {"name": model["name"], "version": model["version"], "spec": model["spec"]}
    return info, state
