"""The servers of the durability measurements log warnings only and take no snapshot while
they are measured, unless a measurement says otherwise."""

from benchmarks.service_durability.processes import service


def test_service_defaults_and_the_measurements_own_settings():
    env = service({"LORENTZTRON_ROLE": "api", "LORENTZTRON_LOG_LEVEL": "info"}).env
    assert env["LORENTZTRON_SNAPSHOT_INTERVAL"] == "3600"
    assert env["LORENTZTRON_ROLE"] == "api" and env["LORENTZTRON_LOG_LEVEL"] == "info"
    assert service({}).env["LORENTZTRON_LOG_LEVEL"] == "warning"
