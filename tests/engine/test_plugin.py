"""helpers.engine.plugin: the vllm.general_plugins entry point applies the #55005 fix, and only it."""

from __future__ import annotations

from importlib.metadata import entry_points

from helpers.engine import plugin


def test_register_reports_the_fix() -> None:
    done = plugin.register()
    assert set(done) == {"vllm_issue_55005"}
    assert done["vllm_issue_55005"] in {"patched", "not needed here"}
    assert plugin.register()["vllm_issue_55005"] == "not needed here"  # idempotent: already fixed


def test_entry_point_points_to_register() -> None:
    found = {ep.name: ep for ep in entry_points(group="vllm.general_plugins")}
    assert found["eagle3_workbook"].value == "helpers.engine.plugin:register"
    assert found["eagle3_workbook"].load() is plugin.register
