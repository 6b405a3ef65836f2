"""The measurement's subprocesses start on entry and stop on exit."""

import socket
import sys

from benchmarks.service_durability.processes import Process, free_port


def test_free_port_binds_and_a_process_stops_on_exit():
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
    with Process([sys.executable, "-c", "import time; time.sleep(60)"]) as process:
        assert process.process.poll() is None
    assert process.process.poll() is not None
