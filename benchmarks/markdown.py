"""Shared markdown output of the benchmark scripts: each script owns one section of a file
such as ``docs/benchmarks.md``, between its ``<!-- name:begin -->`` / ``<!-- name:end -->``
markers, and rewrites only that section."""

from __future__ import annotations

from pathlib import Path

HEADER = (
    "# Benchmarks\n\nResults of the scripts in `benchmarks/`. Each script rewrites only "
    "its own section, between its begin / end markers.\n"
)


def replace_section(path: Path, begin: str, end: str, body: str, header: str = HEADER) -> None:
    """Put ``body`` between the markers of ``path`` and keep the rest of the file; a missing
    file is created with ``header``, a missing section is appended."""
    text = path.read_text() if path.exists() else header
    block = f"{begin}\n{body.strip(chr(10))}\n{end}"
    if begin in text and end in text:
        before, rest = text.split(begin, 1)
        text = before + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
