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

import json
import struct

import numpy as np

FORMAT = "lorentztron.model/1"
MEDIA_TYPE = "application/vnd.safetensors"

_DTYPES = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U64": "<u8",
    "U32": "<u4",
    "U16": "<u2",
    "U8": "u1",
    "BOOL": "?",
}
_CODES = {np.dtype(v).newbyteorder("<").str: k for k, v in _DTYPES.items()}
_CODES[np.dtype("?").str] = "BOOL"


class InterchangeError(ValueError):
    """The bytes are not a model file this service can read."""


def write_tensors(tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> bytes:
    """A safetensors file of ``tensors`` (little endian, C order) with string metadata."""
    header: dict = {"__metadata__": dict(metadata)}
    chunks, offset = [], 0
    for name in sorted(tensors):
        array = np.ascontiguousarray(tensors[name])
        array = array.astype(array.dtype.newbyteorder("<"), copy=False)
        code = _CODES.get(array.dtype.str)
        if code is None:
            raise InterchangeError(f"{name}: dtype {array.dtype} has no safetensors code")
        data = array.tobytes()
        header[name] = {
            "dtype": code,
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        chunks.append(data)
        offset += len(data)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)  # the tensors start 8-byte aligned
    return b"".join((struct.pack("<Q", len(head)), head, *chunks))


def read_tensors(data: bytes | memoryview) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """(tensors, metadata) of a safetensors file; InterchangeError if it is not one."""
    data = memoryview(data)
    if len(data) < 8:
        raise InterchangeError("not a safetensors file (shorter than its header length)")
    (length,) = struct.unpack_from("<Q", data, 0)
    if 8 + length > len(data):
        raise InterchangeError("not a safetensors file (truncated header)")
    try:
        header = json.loads(bytes(data[8 : 8 + length]))
    except ValueError as error:
        raise InterchangeError(f"not a safetensors file (header: {error})") from None
    if not isinstance(header, dict):
        raise InterchangeError("not a safetensors file (the header is not an object)")
    payload = data[8 + length :]
    metadata = header.pop("__metadata__", None) or {}
    tensors = {}
    for name, entry in header.items():
        try:
            dtype = np.dtype(_DTYPES[entry["dtype"]])
            begin, end = entry["data_offsets"]
            shape = [int(n) for n in entry["shape"]]
        except (KeyError, TypeError, ValueError):
            raise InterchangeError(f"tensor {name!r}: bad entry {entry!r}") from None
        count = int(np.prod(shape, dtype=np.int64))
        if not 0 <= begin <= end <= len(payload) or end - begin != count * dtype.itemsize:
            raise InterchangeError(f"tensor {name!r}: its offsets do not match its shape")
        array = np.frombuffer(payload[begin:end], dtype=dtype).reshape(shape)
        tensors[name] = array.astype(dtype.newbyteorder("="), copy=True)
    return tensors, metadata


def dump_model(name: str, version: int, spec: dict, state: dict) -> bytes:
    """A model's file from its snapshot state (``LiveModel`` capture or ``store.decode``)."""
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
    return write_tensors(tensors, {"format": FORMAT, "model": json.dumps(model)})


def load_model(data: bytes | memoryview) -> tuple[dict, dict]:
    """(model: name, version, spec; snapshot state) of a model's file."""
    tensors, metadata = read_tensors(data)
    if metadata.get("format") != FORMAT:
        raise InterchangeError(
            f"not a lorentztron model file (metadata format {metadata.get('format')!r})"
        )
    try:
        model = json.loads(metadata["model"])
        state = {
            "kind": model["kind"],
            "params": model["params"],
            "scalars": model["scalars"],
            "arrays": {k: v for k, v in tensors.items() if not k.startswith("service.")},
            "service": {
                "arrays": {k: v for k, v in tensors.items() if k.startswith("service.")},
                "scalars": model["service_scalars"],
            },
        }
        info = {"name": model["name"], "version": int(model["version"]), "spec": model["spec"]}
    except (KeyError, TypeError, ValueError) as error:
        raise InterchangeError(f"a lorentztron model file without its {error}") from None
    return info, state
