"""What the host gives this process: the memory it may use (its cgroup's limit in a
container, else the machine's physical memory)."""

from __future__ import annotations

import os
from pathlib import Path

#: cgroup v2, then v1: the memory limit of the process's group ("max": none)
_CGROUP_LIMITS = (
    Path("/sys/fs/cgroup/memory.max"),
    Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
)


def memory_limit() -> int:
    """The bytes of memory this process may use."""
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in _CGROUP_LIMITS:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text.isdigit():  # (v1 writes a huge number for "no limit")
            return min(int(text), physical)
    return physical
