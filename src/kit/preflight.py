"""Preflight: can this machine run a profile? One line per problem, exit code 2 on failure.

    python -m kit.preflight [--profile NAME]      (make test / make run call it first)

Hub profiles: the Hugging Face hub answers (with HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE set: no
network at all, the models must be in the local cache), nvidia-smi lists enough GPUs with enough
memory, and the pairing validator passes on the two config.json files (plus the drafter's
safetensors header when the hub serves it; no weights are downloaded). The hub comes first: when
it fails, nothing else can be checked, and the one line says so within seconds.

Shape profiles (random weights of a real size): the GPUs first, count and memory, and when they
fall short that one line is the whole report; then the config files, Qwen3's tokenizer and the
pairing (configs only: a shape has no weights to read).

Tiny profile: the shipped pair exists in data/ (else one line pointing to `make tiny-models`) and
passes the pairing validator.

Every profile, first: the repo and the virtual environment live in a path without a space
(torch's C++ compiler splits its g++ line and the libgomp LD_PRELOAD there; kit.doctor's
path_problem), then what data/ ships is intact (`_damaged_files`): every file's sha256 as
data/MANIFEST.sha256 records it (a changed byte, a missing or an added file, a symbolic link),
every safetensors file exactly as long as its header says, every JSON file parses (prompt files:
lists of strings, model configs: objects) and every profile loads, each in its own try. A damaged
file is one line naming it and the fix (`git checkout -- FILE`, or `make tiny-models` for what
that rebuilds; for a file you added, which git cannot restore: fix or remove it), and nothing
else runs. A profile blocks only itself: another profile's damage is a warning, and so is a
profile you added that loads (`make manifest FILE=data/profiles/NAME.json` records it). Then
build/: writable, with 2 GiB free (`_MIN_BUILD_FREE_GIB`).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from helpers.common.configs import read_config, read_json
from helpers.common.envinfo import GpuInfo, hub_reachable, offline_var, query_gpus
from helpers.common.paths import (
    BUILD_DIR,
    DATA_DIR,
    REPO_ROOT,
    is_local_ref,
    local_dir,
    restore_hint,
)
from helpers.common.profiles import (
    Profile,
    load_profile,
    profile_file_problems,
    profile_name,
    profiles_for_gpus,
)
from helpers.common.prompts import PROMPTS_DIR, read_prompt_file
from helpers.engine import compat
from helpers.engine.pairing import HeaderError, safetensors_header, validate_pair
from kit.doctor import path_problem
from kit.manifest import check_manifest, shipped

__all__ = [
    "main",
]

EXIT_OK = 0
EXIT_FAIL = 2
HUB_TIMEOUT = 5.0
#: Free space build/ needs for a run: the doctor's floor once .venv exists (build/ outputs and
#: logs), so the two agree. A tiny run writes far less (build/ holds 22 MB after `make venv`); the
#: rest is headroom for server logs, notebook 05's checkpoints and the caches torch and vLLM write.
_MIN_BUILD_FREE_GIB = 2.0


def _seen(quirk: str) -> str:
    """Where a vLLM quirk was seen and what it does: 'with vLLM <version> <what>'."""
    q = compat.QUIRKS[quirk]
    return f"with {' and '.join(q.seen_in)} {q.what}"


_FLASHINFER_WARNING = (
    f"flashinfer is not installed: {_seen('flashinfer')}; if the engine fails that way, "
    "`pip install flashinfer-python` in .venv"
)


@dataclass
class _PreflightResult:
    """What the preflight found: failures stop the run, warnings do not."""

    profile: str
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    passed: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """True when nothing failed."""
        return not self.failures

    @property
    def exit_code(self) -> int:
        """0 when ok, else 2."""
        return EXIT_OK if self.ok else EXIT_FAIL

    def lines(self) -> list[str]:
        """The report: failures (or one OK line), then warnings; one line each."""
        tag = f"preflight {self.profile}"
        if self.failures:
            out = [f"{tag}: {line}" for line in self.failures]
        else:
            out = [f"{tag}: OK ({'; '.join(self.passed)}) in {self.seconds:.1f} s"]
        return out + [f"{tag}: warning: {line}" for line in self.warnings]


# --------------------------------------------------------------------------- GPUs


def _flashinfer_installed() -> bool:
    """True when the flashinfer module is importable (found, not imported)."""
    return importlib.util.find_spec("flashinfer") is not None


def _plural(n: int, word: str) -> str:
    """'1 GPU', '4 GPUs'."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _check_gpus(profile: Profile, gpus: list[GpuInfo] | str) -> tuple[list[str], list[str]]:
    """(failures, warnings) for the profile's GPU needs: count, memory per GPU, compute
    capability."""
    need, need_gib = profile.gpus_needed, profile.gpu_memory_gib
    if need <= 0:
        return [], []
    want = f"{profile.name} needs {_plural(need, 'CUDA GPU')} with >= {need_gib:g} GiB each"
    if isinstance(gpus, str):
        return [f"GPU: {want}; this machine has none: {gpus}. Use PROFILE=tiny on it"], []
    if len(gpus) < need:
        seen = ", ".join(f"{g.name} {g.total_gib:.0f} GiB" for g in gpus) or "nvidia-smi lists none"
        fits = ", ".join(profiles_for_gpus(len(gpus)))
        return [
            f"GPU: {want}; this machine has {len(gpus)} ({seen}): use a machine with {need}, "
            f"or a profile for {len(gpus)}: {fits}"
        ], []
    used = gpus[:need]
    small = [g for g in used if g.total_gib < need_gib]
    failures = []
    if small:
        have = ", ".join(f"GPU {g.index} ({g.name}) has {g.total_gib:.1f} GiB" for g in small)
        failures.append(
            f"GPU: {want}; {have}: the weights and KV cache do not fit (see the profile's notes)"
        )
    warnings = []
    min_cc = profile.needs.get("min_compute_capability")
    if min_cc:
        want_cc = tuple(int(part) for part in str(min_cc).split("."))
        old = [g for g in used if g.capability < want_cc]
        if old:
            names = ", ".join(
                f"GPU {g.index} ({g.name}, {g.capability[0]}.{g.capability[1]})" for g in old
            )
            warnings.append(
                f"{profile.name} wants compute capability >= {min_cc} (native FP8); {names}: "
                f"expect slower fallback kernels, or a load error"
            )
    if not _flashinfer_installed():
        warnings.append(_FLASHINFER_WARNING)
    return failures, warnings


# --------------------------------------------------------------------------- hub


def _cached(repo: str, filename: str, cache_dir: str | Path | None = None) -> str | None:
    """Local path of a hub file in the HF cache, or None (never touches the network)."""
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo, filename, cache_dir=cache_dir)
    return found if isinstance(found, str) else None


def cached_model_complete(repo: str, cache_dir: str | Path | None = None) -> bool:
    """True when config.json and every safetensors file of a hub model are in the local HF cache."""
    if _cached(repo, "config.json", cache_dir) is None:
        return False
    index = _cached(repo, "model.safetensors.index.json", cache_dir)
    if index is not None:
        shards = set(json.loads(Path(index).read_text(encoding="utf-8"))["weight_map"].values())
        return all(_cached(repo, shard, cache_dir) is not None for shard in shards)
    return _cached(repo, "model.safetensors", cache_dir) is not None


def _check_hub(profile: Profile, timeout: float = HUB_TIMEOUT) -> tuple[str | None, str | None]:
    """(failure, pass note): offline needs both models cached; online needs the hub to answer."""
    refs = [ref for ref in (profile.verifier, profile.drafter) if not is_local_ref(ref)]
    var = offline_var()
    if var is not None:
        missing = [ref for ref in refs if not cached_model_complete(ref)]
        if missing:
            return (
                f"Hugging Face hub is off ({var} is set) and {' and '.join(missing)} "
                f"{'is' if len(missing) == 1 else 'are'} not in the local cache: unset {var} on a "
                "machine that reaches huggingface.co (log in with `hf auth login` or HF_TOKEN), or "
                f"download the models there first"
            ), None
        return None, f"hub off ({var}), models in the local cache"
    if not hub_reachable(timeout=timeout):
        cached = bool(refs) and all(cached_model_complete(ref) for ref in refs)
        hint = (
            "both models are in the local cache: set HF_HUB_OFFLINE=1 to use it"
            if cached
            else "check the network, proxy or HF_ENDPOINT, or download the models elsewhere into "
            "the HF cache and set HF_HUB_OFFLINE=1"
        )
        return (
            f"Hugging Face hub (huggingface.co) is unreachable (probe timeout {timeout:g} s): "
            f"{hint}",
            None,
        )
    return None, "hub reachable"


# --------------------------------------------------------------------------- models


def _check_local_files(profile: Profile) -> str | None:
    """One line when a local model folder lacks config.json or safetensors (a shape profile's needs
    only config.json: vLLM gives it random weights), else None."""
    missing = []
    for ref in (profile.verifier, profile.drafter):
        folder = local_dir(ref) if is_local_ref(ref) else None
        if folder is None:
            continue
        has_weights = not profile.has_weights or (
            (folder / "model.safetensors").is_file()
            or (folder / "model.safetensors.index.json").is_file()
        )
        if not ((folder / "config.json").is_file() and has_weights):
            missing.append(ref)
    if not missing:
        return None
    return (
        f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing or incomplete "
        f"(config.json + model.safetensors): run `make tiny-models` to build the tiny pair"
    )


def _key(path: Path) -> Path:
    """One key per file however it is named (relative or absolute, its folders through links); a
    symbolic link itself keyed by its own absolute path, never by what it points to (a loop
    raises RuntimeError in resolve)."""
    if path.is_symlink():
        return _key(path.parent) / path.name
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # RuntimeError: "Symlink loop from ..." (Python < 3.13)
        return Path(os.path.abspath(path))


def _shown_path(path: Path) -> str:
    """A path as the user types it: relative to the repo root when inside it."""
    try:
        return _key(path).relative_to(REPO_ROOT.resolve()).as_posix()
    except ValueError:
        return str(path)


def _check_safetensors(path: Path) -> str | None:
    """One line when a safetensors file is not exactly what its header says (truncated, padded,
    garbage), else None."""
    try:
        safetensors_header(path)
    except (HeaderError, OSError) as err:
        return str(err).replace(str(path), _shown_path(path))
    return None


def _check_json(path: Path, prompts_dir: Path = PROMPTS_DIR) -> str | None:
    """One line when a shipped JSON file does not parse (or a prompt file in `prompts_dir` is not
    a list of prompts, a model config not an object), else None."""
    try:
        if _key(path.parent) == _key(prompts_dir):
            read_prompt_file(path)
            return None
        content = read_json(path)
    except (OSError, ValueError) as err:
        return str(err).replace(str(path), _shown_path(path))
    if path.name == "config.json" and not isinstance(content, dict):
        return (
            f"{_shown_path(path)} holds a JSON {type(content).__name__}, not a model config "
            f"object: {restore_hint(path)}"
        )
    return None


def _profile_weights(profile: Profile) -> list[Path]:
    """The safetensors files of the profile's local model folders."""
    found = []
    for ref in (profile.verifier, profile.drafter):
        folder = local_dir(ref) if is_local_ref(ref) else None
        if folder is not None and folder.is_dir():
            found += sorted(folder.glob("*.safetensors"))
    return found


def _added_fix(path: Path, line: str, data_dir: Path) -> str:
    """A damaged file's line with a fix that works: one you added (not in the manifest) has
    nothing for `git checkout` to restore, so it is fixed or removed (a file outside data/ keeps
    its line)."""
    if not path.is_relative_to(_key(data_dir)) or shipped(path, _key(data_dir)):
        return line
    hint = restore_hint(path)
    fix = "fix or remove it (you added it: it is not in data/MANIFEST.sha256, git has no copy)"
    if path.parent.name == "profiles":
        fix += "; every field a profile takes is in data/profiles/tiny.json"
    return line.replace(hint, fix) if hint in line else f"{line}; {fix}"


def _profile_problems(profiles_dir: Path, named: set[Path]) -> dict[Path, str]:
    """One line per profile file that does not load (each on its own, so one bad profile hides
    no other), for the files not already in `named`; links are the manifest's to name."""
    problems = {}
    for path in sorted(profiles_dir.glob("*.json")):
        if path.is_symlink() or _key(path) in named:
            continue
        lines = profile_file_problems(path)
        if not lines:
            continue
        text = lines[0].replace(str(path), _shown_path(path))
        text = text if _shown_path(path) in text else f"{_shown_path(path)}: {text}"
        more = f" (and {len(lines) - 1} more)" if len(lines) > 1 else ""
        fix = "" if "git checkout" in text else f"; {restore_hint(path)}"
        problems[_key(path)] = f"{text}{more}{fix}"
    return problems


def _damaged_files(profile: Profile | None = None, data_dir: Path | None = None) -> dict[Path, str]:
    """One line per damaged file (by resolved path) in data/ and in the profile's local model
    folders: the structural checks (safetensors against its header, JSON parsed, profiles loaded),
    then the sha256 manifest for what they did not name (and every symbolic link, never
    followed); one line per file, however many fail."""
    data_dir = DATA_DIR if data_dir is None else data_dir
    weights: dict[Path, Path] = {}
    for path in sorted(data_dir.rglob("*.safetensors")) + (
        _profile_weights(profile) if profile else []
    ):
        if not path.is_symlink():
            weights.setdefault(_key(path), path)  # a relative and an absolute path: one file
    found = {key: _check_safetensors(path) for key, path in weights.items()}
    prompts_dir = data_dir / PROMPTS_DIR.name
    for path in sorted(data_dir.rglob("*.json")):
        if not path.is_symlink():
            found.setdefault(_key(path), _check_json(path, prompts_dir))
    problems = {key: line for key, line in found.items() if line}
    problems.update(_profile_problems(data_dir / "profiles", set(problems)))
    problems = {key: _added_fix(key, line, data_dir) for key, line in problems.items()}
    for path, line in check_manifest(data_dir).items():
        problems.setdefault(_key(path), line)  # a structural line says more
    return dict(sorted(problems.items()))


def _profile_of(path: Path, data_dir: Path) -> str | None:
    """The profile a damaged file's line is about (a plain .json file in data/profiles/), or
    None when it is about a file every run reads."""
    if path.parent != _key(data_dir / "profiles") or path.suffix != ".json" or path.is_symlink():
        return None
    return path.stem


def _sorted_damage(
    damaged: dict[Path, str], name: str, data_dir: Path
) -> tuple[list[str], list[str]]:
    """(failures, warnings) of the damaged files for profile `name`: a profile you added that
    loads is a warning (unrecorded is all that is wrong with it), another profile's line is a
    warning (it blocks that profile only); `name`'s own line and every other file's fail."""
    failures, warnings = [], []
    for path, line in damaged.items():
        owner = _profile_of(path, data_dir)
        if owner is None:
            failures.append(line)
        elif not shipped(path, _key(data_dir)) and not profile_file_problems(path):
            shown = _shown_path(path)
            warnings.append(
                f"{shown} is a profile you added (not in data/MANIFEST.sha256): it loads and is "
                f"checked when chosen; record it with `make manifest FILE={shown}` so that a "
                f"changed byte is caught"
            )
        elif owner != name:
            warnings.append(f"{line} (it blocks PROFILE={owner} only)")
        else:
            failures.append(line)
    return failures, warnings


def _check_build_dir(
    build_dir: Path = BUILD_DIR, min_free_gib: float = _MIN_BUILD_FREE_GIB
) -> tuple[list[str], str | None]:
    """(failures, pass note): build/ exists or can be made, takes a file, has min_free_gib free."""
    shown = _shown_path(build_dir)
    try:
        build_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=build_dir):
            pass
    except OSError as err:
        why = err.strerror or type(err).__name__
        return [
            f"{shown}/ is not writable ({why}): a run writes its notebooks, HTML and logs there; "
            "fix its permissions, or run from a writable copy of the repo"
        ], None
    free = shutil.disk_usage(build_dir).free / 1024**3
    if free < min_free_gib:
        return [
            f"{shown}/ has {free:.1f} GiB free, a run needs >= {min_free_gib:g} GiB: free some "
            "space on that disk (`make clean` empties build/)"
        ], None
    return [], f"{shown}/ writable, {free:.0f} GiB free"


def _check_tokenizer(profile: Profile) -> str | None:
    """One line when the profile names a tokenizer folder (a shape profile: Qwen3's, which
    `make venv` builds and verifies) that is not there or not verified, else None."""
    try:
        profile.tokenizer_path()
    except FileNotFoundError as err:
        return str(err)
    return None


def _check_pairing(profile: Profile) -> tuple[list[str], list[str]]:
    """(failures, warnings) helpers.engine.pairing.validate_pair (with the profile's k and
    tokenizer) plus the profile's recorded verifier shape."""

    verifier = profile.verifier_path() if profile.is_local else profile.verifier
    drafter = profile.drafter_path() if profile.is_local else profile.drafter
    report = validate_pair(
        verifier,
        drafter,
        "eagle3",
        profile.engine.get("max_model_len"),
        verifier_name=profile.verifier,
        k=profile.num_speculative_tokens,
        tokenizer=profile.tokenizer_path() if profile.tokenizer is not None else None,
    )
    failures = [f"pairing: {p.code}: {p.message}" for p in report.errors]
    warnings = [
        f"pairing: {p.code}: {p.message}"
        for p in report.warnings
        if profile.has_weights or p.code != "weights_unreadable"  # a shape has no weights
    ]
    if {"roles_swapped", "verifier_is_a_drafter"} & set(report.codes()):
        return failures, warnings  # that verifier is no verifier: nothing to compare
    try:
        config = read_config(verifier)
    except (OSError, ValueError):
        return failures, warnings  # the report names what is wrong with it
    if not isinstance(config, dict):
        return failures, warnings
    for attr, key, actual in (
        ("verifier_architecture", "architectures[0]", (config.get("architectures") or [None])[0]),
        ("verifier_layers", "num_hidden_layers", config.get("num_hidden_layers")),
        ("verifier_hidden_size", "hidden_size", config.get("hidden_size")),
    ):
        recorded = getattr(profile, attr)
        if recorded is not None and actual is not None and recorded != actual:
            failures.append(
                f"profile: {attr} is {recorded} but {profile.verifier}'s config.json has "
                f"{key} {actual}: fix data/profiles/{profile.name}.json"
            )
    return failures, warnings


# --------------------------------------------------------------------------- the whole preflight


def _guarded(result: _PreflightResult, what: str, func, *args):
    """Run a check; an unexpected exception becomes one failure line instead of a traceback."""
    try:
        return func(*args)
    except Exception as err:
        result.failures.append(
            f"{what} check crashed: {type(err).__name__}: "
            f"{str(err).splitlines()[0] if str(err) else ''}"
        )
        return None


def _chosen(profile: Profile | str | None) -> tuple[str, Profile | None]:
    """(name, Profile or None when its file does not load); an unknown name raises ValueError."""
    if isinstance(profile, Profile):
        return profile.name, profile
    name = profile_name(profile)
    if not (DATA_DIR / "profiles" / f"{name}.json").is_file():
        return name, load_profile(name)  # unknown: its one-line ValueError names the choices
    try:
        return name, load_profile(name)
    except Exception:  # `_damaged_files` names what is wrong with it
        return name, None


def run_preflight(
    profile: Profile | str | None = None,
    gpus: list[GpuInfo] | str | None = None,
    hub_timeout: float = HUB_TIMEOUT,
) -> _PreflightResult:
    """Check a profile on this machine (gpus: inject for tests; None asks nvidia-smi)."""
    t0 = time.perf_counter()
    name, chosen = _chosen(profile)
    result = _PreflightResult(name)
    spaced = path_problem(REPO_ROOT, Path(sys.prefix))
    if spaced:  # nothing that compiles would run here: one line
        result.failures.append(spaced)
        result.seconds = time.perf_counter() - t0
        return result
    damaged = _guarded(result, "shipped files", _damaged_files, chosen)
    if damaged is None:
        result.seconds = time.perf_counter() - t0
        return result
    blocking, warned = _sorted_damage(damaged, name, DATA_DIR)
    result.failures += blocking
    result.warnings += warned
    if chosen is None and not blocking:
        result.failures.append(f"profile {name} does not load: check data/profiles/{name}.json")
    if chosen is None or blocking:  # only other profiles damaged, or yours unrecorded: go on
        result.seconds = time.perf_counter() - t0
        return result
    result.passed.append("data intact" if not warned else f"data intact for {name}")
    build = _guarded(result, "build/", _check_build_dir, BUILD_DIR, _MIN_BUILD_FREE_GIB)
    if chosen.is_local:
        _run_local(chosen, result, gpus)
    else:
        _run_hub(chosen, result, gpus, hub_timeout)
    if build is not None:
        result.failures += build[0]
        result.passed += [build[1]] if build[1] else []
    result.seconds = time.perf_counter() - t0
    return result


def _run_local(
    profile: Profile, result: _PreflightResult, gpus: list[GpuInfo] | str | None
) -> None:
    """Local profiles: a shape profile's GPUs first (stop there if they fall short: one line), files
    present, pairing OK; the tiny on a GPU: the notice."""
    gpus = query_gpus() if gpus is None else gpus
    gpu_failures, gpu_warnings = _check_gpus(profile, gpus)
    if gpu_failures:  # random weights of a real size need its GPUs: nothing else matters here
        result.failures += gpu_failures
        return
    missing = _check_local_files(profile)
    if missing:
        result.failures.append(missing)
        return
    result.passed.append("models present")
    if profile.tokenizer is not None:
        problem = _check_tokenizer(profile)
        if problem:
            result.failures.append(problem)
            return
        result.passed.append("Qwen3 tokenizer verified")
    checked = _guarded(result, "pairing", _check_pairing, profile)
    if checked is not None:
        result.failures += checked[0]
        result.warnings += checked[1]
        if not checked[0]:
            result.passed.append("pairing valid")
    on_gpu = isinstance(gpus, list) and bool(gpus)
    result.passed.append(
        f"{_plural(profile.gpus_needed, 'GPU')} with >= {profile.gpu_memory_gib:g} GiB"
        if profile.gpus_needed
        else ("GPU" if on_gpu else "CPU")
    )
    if profile.gpus_needed:
        result.warnings += gpu_warnings
    elif on_gpu and not _flashinfer_installed():
        result.warnings.append(_FLASHINFER_WARNING)


def _run_hub(
    profile: Profile, result: _PreflightResult, gpus: list[GpuInfo] | str | None, timeout: float
) -> None:
    """Hub profiles: hub first (stop there if it fails), then GPUs and pairing (all failures
    reported)."""
    checked = _guarded(result, "hub", _check_hub, profile, timeout)
    if checked is None:
        return
    failure, note = checked
    if failure:
        result.failures.append(failure)
        return
    result.passed.append(note)
    gpus = query_gpus() if gpus is None else gpus
    gpu_failures, gpu_warnings = _check_gpus(profile, gpus)
    result.failures += gpu_failures
    result.warnings += gpu_warnings
    if not gpu_failures:
        result.passed.append(
            f"{_plural(profile.gpus_needed, 'GPU')} with >= {profile.gpu_memory_gib:g} GiB"
        )
    paired = _guarded(result, "pairing", _check_pairing, profile)
    if paired is not None:
        result.failures += paired[0]
        result.warnings += paired[1]
        if not paired[0]:
            result.passed.append("pairing valid")


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: print the report (OK line to stdout, failures and warnings to stderr); 0 ok, 2
    failed."""
    parser = argparse.ArgumentParser(
        prog="python -m kit.preflight",
        description=" ".join(__doc__.split("\n\n")[0].split()),
    )
    parser.add_argument(
        "--profile", default=None, help="profile name (default: $WORKBOOK_PROFILE, else tiny)"
    )
    parser.add_argument(
        "--hub-timeout", type=float, default=HUB_TIMEOUT, help="seconds to wait for the hub"
    )
    args = parser.parse_args(argv)
    try:
        result = run_preflight(profile_name(args.profile), hub_timeout=args.hub_timeout)
    except ValueError as err:  # unknown profile, malformed profile file
        print(f"preflight: {err}", file=sys.stderr)
        return EXIT_FAIL
    for line in result.lines():
        stream = sys.stdout if line.startswith(f"preflight {result.profile}: OK") else sys.stderr
        print(line, file=stream, flush=True)
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
