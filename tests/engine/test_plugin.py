"""helpers.engine.plugin: the vllm.general_plugins entry point applies its two fixes, and only them."""

from __future__ import annotations

from importlib.metadata import entry_points

from helpers.engine import plugin


def test_register_reports_the_fix() -> None:
    done = plugin.register()
    assert set(done) == {"vllm_issue_55005", "stream_records"}
    assert all(what in {"patched", "not needed here"} for what in done.values()), done
    again = plugin.register()  # idempotent: already fixed
    assert again == {"vllm_issue_55005": "not needed here", "stream_records": "not needed here"}


def test_entry_point_points_to_register() -> None:
    found = {ep.name: ep for ep in entry_points(group="vllm.general_plugins")}
    assert found["eagle3_workbook"].value == "helpers.engine.plugin:register"
    assert found["eagle3_workbook"].load() is plugin.register
