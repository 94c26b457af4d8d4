"""vLLM's names: each is spelled where vLLM defines it, PromQL is built from them, and no one else spells them."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import nbformat
import pytest

from helpers.common import vllm_names
from helpers.common.paths import NOTEBOOKS_DIR, REPO_ROOT

#: vLLM 0.26.0's source, where a session unpacked the GPU stack's wheel (checked when present).
VLLM_026 = Path("/tmp/vllm026/src/vllm")

#: Each name, quoted, in the vLLM file that defines it (paths relative to the `vllm` package).
QUOTED_IN: dict[str, str] = {
    vllm_names.METRICS.num_drafts: "v1/spec_decode/metrics.py",
    vllm_names.METRICS.num_draft_tokens: "v1/spec_decode/metrics.py",
    vllm_names.METRICS.num_accepted_tokens: "v1/spec_decode/metrics.py",
    vllm_names.METRICS.accepted_per_pos: "v1/spec_decode/metrics.py",
    vllm_names.METRICS.position: "v1/spec_decode/metrics.py",
    vllm_names.METRIC_PREFIX: "v1/metrics/reader.py",
    vllm_names.METRICS.counter_suffix: "v1/metrics/reader.py",
    vllm_names.STATS.num_drafts: "benchmarks/serve.py",
    vllm_names.STATS.draft_tokens: "benchmarks/serve.py",
    vllm_names.STATS.accepted_tokens: "benchmarks/serve.py",
    vllm_names.STATS.tau: "benchmarks/serve.py",
    vllm_names.STATS.acceptance_rate: "benchmarks/serve.py",
    vllm_names.STATS.per_position_rates: "benchmarks/serve.py",
    vllm_names.METRICS.prefix_cache_queries: "v1/metrics/loggers.py",
    vllm_names.METRICS.prefix_cache_hits: "v1/metrics/loggers.py",
    vllm_names.METRICS.num_preemptions: "v1/metrics/loggers.py",
    vllm_names.METRICS.num_running: "v1/metrics/loggers.py",
    vllm_names.METRICS.num_waiting: "v1/metrics/loggers.py",
    vllm_names.METRICS.kv_cache_usage: "v1/metrics/loggers.py",
    vllm_names.METRICS.cache_config_info: "v1/metrics/loggers.py",
    vllm_names.METRICS.num_gpu_blocks: "config/cache.py",
    vllm_names.METRICS.block_size: "config/cache.py",
}
#: Names the GPU stack's older vLLM lacks (per-request acceptance, the block-drop switch): (name,
#: file, how the file spells it), checked in the installed vLLM.
PER_REQUEST_IN: tuple[tuple[str, str, str], ...] = (
    (vllm_names.PER_REQUEST.arg, "engine/arg_utils.py", r"\b{}\s*:"),
    (vllm_names.PER_REQUEST.arg, "config/observability.py", r"\b{}\s*:"),
    (vllm_names.PER_REQUEST.summary, "config/observability.py", r'Literal\[[^\]]*"{}"'),
    (vllm_names.PER_REQUEST.output_attr, "outputs.py", r"\b{}\s*:"),
    (vllm_names.DISABLE_EAGLE_BLOCK_DROP, "config/speculative.py", r"\b{}\s*:"),
    (vllm_names.PER_REQUEST.detailed, "config/observability.py", r'Literal\[[^\]]*"{}"'),
    (vllm_names.PER_REQUEST.per_step_accepted, "v1/metrics/stats.py", r"\b{}\s*:"),
    (vllm_names.PER_REQUEST.per_step_drafted, "v1/metrics/stats.py", r"\b{}\s*:"),
)


def installed_vllm() -> Path | None:
    """The installed vllm package's folder, found without importing it (None when absent)."""
    spec = importlib.util.find_spec("vllm")
    return Path(spec.origin).parent if spec and spec.origin else None


def vllm_trees() -> list[Path]:
    """The vLLM source trees at hand: the installed one and 0.26.0 when unpacked."""
    return [t for t in (installed_vllm(), VLLM_026) if t is not None and t.is_dir()]


@pytest.mark.parametrize("tree", vllm_trees(), ids=str)
@pytest.mark.parametrize("name", list(QUOTED_IN), ids=str)
def test_name_is_quoted_where_vllm_defines_it(tree: Path, name: str) -> None:
    path = tree / QUOTED_IN[name]
    assert f'"{name}"' in path.read_text(), f'vLLM at {tree} no longer spells "{name}" in {path}'


@pytest.mark.parametrize(("name", "file", "pattern"), PER_REQUEST_IN, ids=lambda x: str(x)[:40])
def test_per_request_names_are_the_installed_vllms(name: str, file: str, pattern: str) -> None:
    tree = installed_vllm()
    if tree is None:
        pytest.skip("vLLM is not installed")
    text = (tree / file).read_text()
    assert re.search(pattern.format(re.escape(name)), text), f"{name} not found in {tree / file}"


def test_metric_names_share_the_prefixes() -> None:
    metrics = [
        vllm_names.METRICS.num_drafts,
        vllm_names.METRICS.num_draft_tokens,
        vllm_names.METRICS.num_accepted_tokens,
        vllm_names.METRICS.accepted_per_pos,
    ]
    assert all(m.startswith(vllm_names.SPEC_DECODE_PREFIX) for m in metrics)
    assert vllm_names.SPEC_DECODE_PREFIX.startswith(vllm_names.METRIC_PREFIX)
    assert (
        vllm_names.METRICS.exported(vllm_names.METRICS.num_drafts)
        == "vllm:spec_decode_num_drafts_total"
    )
    assert vllm_names.STATS.per_position_rate + "s" == vllm_names.STATS.per_position_rates


# ------------------------------------------------------------ no one else spells vLLM's names


def spellings(tree: ast.AST) -> list[str]:
    """String literals (not docstrings) that spell a spec-decode name, and `.spec_decode_*` access."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings and "spec_decode" in node.value:
                found.append(f"line {node.lineno}: {node.value!r}")
        elif isinstance(node, ast.Attribute) and node.attr.startswith("spec_decode_"):
            if node.attr != vllm_names.PER_REQUEST.output_attr:  # vLLM's attribute, read as one
                found.append(f"line {node.lineno}: .{node.attr}")
    return found


SOURCES = sorted(
    p
    for p in (REPO_ROOT / "src" / "helpers").rglob("*.py")
    if p != REPO_ROOT / "src" / "helpers" / "common" / "vllm_names.py"
)
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))


def test_the_scan_sees_literals_and_attributes() -> None:
    code = 'x = d["spec_decode_acceptance_length"]\ny = df.spec_decode_num_drafts\nz = f"spec_decode_{i}"'
    assert len(spellings(ast.parse(code))) == 3
    assert spellings(ast.parse('"""About spec_decode_acceptance_length."""\nx = 1')) == []


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(REPO_ROOT / "src")))
def test_no_module_spells_vllms_names(path: Path) -> None:
    found = spellings(ast.parse(path.read_text()))
    assert not found, (
        f"{path.name} spells vLLM names itself (use helpers.common.vllm_names): {found}"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_notebook_code_cell_spells_vllms_names(path: Path) -> None:
    nb = nbformat.read(str(path), as_version=4)
    found = [
        f"cell {i}, {hit}"
        for i, cell in enumerate(nb.cells, 1)
        if cell.cell_type == "code"
        for hit in spellings(ast.parse(cell.source))
    ]
    assert not found, f"{path.name} spells vLLM names (use vllm_names.STATS.tau etc.): {found}"
