"""helpers.engine.plugin: the vllm.general_plugins entry point applies the backport and the #55005 fix."""

from __future__ import annotations

from importlib.metadata import entry_points

from helpers.engine import plugin


def test_register_reports_both_fixes() -> None:
    done = plugin.register()
    assert (
        "no patch needed" in done["eagle3"]
    )  # vLLM 0.31 has PR #26485: nothing imported, nothing changed
    assert done["vllm_issue_55005"] in {"patched", "not needed here"}
    assert plugin.register()["vllm_issue_55005"] == "not needed here"  # idempotent: already fixed


def test_entry_point_points_to_register() -> None:
    found = {ep.name: ep for ep in entry_points(group="vllm.general_plugins")}
    assert found["eagle3_workbook"].value == "helpers.engine.plugin:register"
    assert found["eagle3_workbook"].load() is plugin.register
