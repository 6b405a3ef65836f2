"""The durability section in docs/ is what the renderer makes of the raw numbers beside it."""

import json

from benchmarks.service_durability.report import BEGIN, DOCS, END, render


def test_the_docs_section_is_rendered_from_its_json():
    result = json.loads((DOCS / "durability_benchmarks.json").read_text())
    section = (DOCS / "benchmarks.md").read_text().split(BEGIN)[1].split(END)[0]
    assert section.strip("\n") == render(result).strip("\n")
    assert "Written by `python -m benchmarks.service_durability`" in section
