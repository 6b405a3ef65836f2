"""benchmarks/sparse_dos.py: its quick mode writes its section and raw numbers, and the
counts behind the roofline (cache lines per example) follow the parameters' addresses."""

import json

import numpy as np

from benchmarks import sparse_dos
from core.features import as_batch


def test_lines_per_example_counts_the_lines_rows_span():
    batch = as_batch([(np.array([0, 1, 5]), np.ones(3)), (np.array([2]), np.ones(1))], 8)
    for dtype, aligned, misaligned in (("float32", 2, 3), ("float64", 4, 5)):
        W = np.zeros((9, 32), dtype=dtype)  # rank 16: rows of 128 or 256 bytes
        assert sparse_dos.lines_per_example(0, W, batch) == aligned * 4 / 2
        assert sparse_dos.lines_per_example(16, W, batch) == misaligned * 4 / 2
    assert sparse_dos.offset_copy(W, 16).ctypes.data % 128 == 16


def test_memory_kernels_touch_every_line_and_change_only_the_rows():
    batch = as_batch([(np.array([1, 3]), np.ones(2)), (np.array([3]), np.ones(1))], 8)
    for dtype in ("float32", "float64"):
        W = np.arange(9 * 32, dtype=dtype).reshape(9, 32)
        before = W.copy()
        per_line = 64 // W.itemsize
        read = sparse_dos._gather_rows(W, batch.indptr, batch.indices)
        assert read == before[[1, 3, 3]][:, ::per_line].sum()
        lines = 32 // per_line  # the second example reads row 3 after the first wrote it
        assert sparse_dos._touch_rows(W, batch.indptr, batch.indices, 1) == read + lines
        changed = W != before
        assert set(np.flatnonzero(changed.any(axis=1))) == {1, 3}
        assert np.all(W[3, ::per_line] == before[3, ::per_line] + 2.0)


def test_quick_mode_writes_its_section_and_numbers(tmp_path):
    out = tmp_path / "benchmarks.md"
    out.write_text("# Benchmarks\n\n<!-- other:begin -->\nkept\n<!-- other:end -->\n")
    assert sparse_dos.main(["--quick", "--repeats", "1", "--out", str(out)]) == 0
    text = out.read_text()
    assert "kept" in text and sparse_dos.BEGIN in text and "roofline" in text
    result = json.loads((tmp_path / "sparse_dos.json").read_text())
    for dtype in sparse_dos.DTYPES:
        summary = result["summary"][dtype]
        assert summary["learn_many_us"] > 0 and summary["roofline_us"] > 0
        assert len(result["table"][dtype]["learn_many (whole call)"]["cpu_us"]) == 1
    assert result["meta"]["facts"]["float32"]["alignment"] == 0
    assert len(result["meta"]["load_averages"]) == 2
