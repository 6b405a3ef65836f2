"""service/ops/metrics.py: what the alert rules read that is not a measurement."""

from __future__ import annotations

from service.config import Settings
from service.main import create_app
from service.ops.metrics import Metrics


def test_the_configured_snapshot_interval_is_exported(tmp_path):
    """``LorentztronSnapshotStale`` compares a snapshot's age with 3 of the process's own
    intervals: the app exports the interval it was configured with; a bare Metrics, the
    setting's default."""
    settings = Settings(snapshot_dir=tmp_path / "snapshots", snapshot_interval=7.5)
    registry = create_app(settings).state.metrics.registry
    assert registry.get_sample_value("lorentztron_snapshot_interval_seconds") == 7.5
    default = Settings.model_fields["snapshot_interval"].default
    assert Metrics().registry.get_sample_value("lorentztron_snapshot_interval_seconds") == default
