"""Prefetch: download a hub profile's verifier and drafter into the Hugging Face cache, then
validate the pair there.

    make prefetch PROFILE=qwen3-30b-a3b      (once, online, e.g. the day before; about 61 GB for
    30B)

Only what vLLM loads is fetched (ALLOW_PATTERNS: configs, tokenizer, safetensors), with
huggingface_hub's progress bar; a dry run first sums the bytes still missing and checks the cache's
disk. Then the pairing validator runs on the cached folders (configs, safetensors headers, a local
d2t), so a GPU room can work with HF_HUB_OFFLINE=1. With HF_HUB_OFFLINE set and both models cached,
only the validation runs. Offline with something missing, or the hub unreachable: one line, exit 2.
The tiny profile ships in data/: nothing to fetch.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from helpers.common.envinfo import hub_reachable, offline_var
from helpers.common.profiles import Profile, load_profile, profile_name
from helpers.engine.pairing import PairingReport, validate_pair
from kit.preflight import EXIT_FAIL, EXIT_OK, HUB_TIMEOUT, cached_model_complete

__all__ = [
    "main",
]

#: The files vLLM and transformers read: config.json, generation_config.json, tokenizer files,
#: the safetensors and their index, a chat template (no *.bin / *.pth duplicates, no originals/).
_ALLOW_PATTERNS: tuple[str, ...] = ("*.json", "*.safetensors", "*.txt", "*.model", "*.jinja")
#: Free space to keep beyond the download (the cache's own files, build/ outputs).
_DISK_MARGIN_GIB = 2.0
_GIB = 1024**3


def _cache_root(cache_dir: str | Path | None = None) -> Path:
    """The Hugging Face hub cache in use: cache_dir, else $HF_HUB_CACHE / $HF_HOME/hub."""
    from huggingface_hub import constants

    return Path(cache_dir or constants.HF_HUB_CACHE)


def _bytes_to_fetch(repo: str, cache_dir: str | Path | None = None) -> int:
    """Bytes of ALLOW_PATTERNS files of a hub model not yet in the cache (a dry run: no
    download)."""
    from huggingface_hub import snapshot_download

    infos = snapshot_download(
        repo, cache_dir=cache_dir, allow_patterns=list(_ALLOW_PATTERNS), dry_run=True
    )
    return sum(info.file_size or 0 for info in infos if info.will_download)


def _disk_problem(
    need_bytes: int,
    where: Path,
    free_bytes: int | None = None,
    margin_gib: float = _DISK_MARGIN_GIB,
) -> str | None:
    """One line when the cache's disk cannot hold need_bytes plus the margin, else None."""
    probe = where
    while not probe.exists() and probe != probe.parent:  # the cache may not exist yet
        probe = probe.parent
    free = shutil.disk_usage(probe).free if free_bytes is None else free_bytes
    if free >= need_bytes + margin_gib * _GIB:
        return None
    return (
        f"the download needs {need_bytes / _GIB:.1f} GiB (+{margin_gib:g} GiB spare) but only "
        f"{free / _GIB:.1f} GiB is free at {where}: free space there, or point HF_HOME at a bigger "
        "disk"
    )


def _download(repo: str, cache_dir: str | Path | None = None) -> Path:
    """Download a hub model's ALLOW_PATTERNS files into the cache (progress bar on stderr); its
    snapshot folder."""
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(repo, cache_dir=cache_dir, allow_patterns=list(_ALLOW_PATTERNS)))


def _cached_snapshot(repo: str, cache_dir: str | Path | None = None) -> Path:
    """The cached snapshot folder of a hub model, without any network access."""
    from huggingface_hub import snapshot_download

    return Path(
        snapshot_download(
            repo, cache_dir=cache_dir, allow_patterns=list(_ALLOW_PATTERNS), local_files_only=True
        )
    )


def _validate_cached(profile: Profile, verifier: Path, drafter: Path) -> PairingReport:
    """The pairing validator on the cached folders (local files, so a reduced vocab's d2t is read
    too)."""
    return validate_pair(
        verifier,
        drafter,
        "eagle3",
        profile.engine.get("max_model_len"),
        verifier_name=profile.verifier,
    )


def _say(tag: str, line: str) -> None:
    """Print one report line."""
    print(f"{tag}: {line}", flush=True)


def _fetch(
    profile: Profile, tag: str, cache_dir: str | Path | None, hub_timeout: float
) -> dict[str, Path] | None:
    """The snapshot folder of each model, downloading what is missing; None after one failure
    line."""
    refs = [profile.verifier, profile.drafter]
    rerun = f"run `make prefetch PROFILE={profile.name}` again"
    var = offline_var()
    if var is not None:
        missing = [ref for ref in refs if not cached_model_complete(ref, cache_dir)]
        if missing:
            _say(
                tag,
                f"{var} is set, so nothing can be downloaded, and {' and '.join(missing)} "
                f"{'is' if len(missing) == 1 else 'are'} not in the cache: unset {var} on a "
                f"machine that reaches huggingface.co and {rerun}",
            )
            return None
        _say(tag, f"{var} is set and both models are in the cache: validating only")
        return {ref: _cached_snapshot(ref, cache_dir) for ref in refs}
    if not hub_reachable(timeout=hub_timeout):
        _say(
            tag,
            f"the Hugging Face hub (huggingface.co) is unreachable (probe timeout {hub_timeout:g} "
            "s), "
            "so nothing can be downloaded: connect this machine (network, proxy, HF_ENDPOINT) and "
            f"{rerun}",
        )
        return None
    sizes = {ref: _bytes_to_fetch(ref, cache_dir) for ref in refs}
    where = _cache_root(cache_dir)
    problem = _disk_problem(sum(sizes.values()), where)
    if problem:
        _say(tag, problem)
        return None
    paths = {}
    for ref in refs:
        _say(tag, f"{ref}: {sizes[ref] / _GIB:.2f} GiB to download into {where}")
        paths[ref] = _download(ref, cache_dir)
    return paths


def _run_prefetch(
    name: str | None = None, cache_dir: str | Path | None = None, hub_timeout: float = HUB_TIMEOUT
) -> int:
    """Fetch (or find) a profile's pair in the HF cache and validate it; 0 ok, 2 with one failure
    line."""
    profile = load_profile(name)
    tag = f"prefetch {profile.name}"
    if profile.is_local:
        _say(tag, f"nothing to prefetch: {profile.name} ships in data/ and needs no download")
        if profile.tokenizer is not None:
            try:
                _say(
                    tag,
                    f"its tokenizer, built and verified by `make venv`: {profile.tokenizer_path()}",
                )
            except FileNotFoundError as err:
                _say(tag, str(err))
                return EXIT_FAIL
        return EXIT_OK
    try:
        paths = _fetch(profile, tag, cache_dir, hub_timeout)
    except Exception as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        _say(
            tag,
            f"download failed ({type(err).__name__}: {first}): check access (`hf auth login` or "
            f"HF_TOKEN) and disk space, then run `make prefetch PROFILE={profile.name}` again",
        )
        return EXIT_FAIL
    if paths is None:
        return EXIT_FAIL
    report = _validate_cached(profile, paths[profile.verifier], paths[profile.drafter])
    for problem in report.problems:
        _say(tag, f"pairing {problem.severity}: {problem.code}: {problem.message}")
    if not report.ok:
        return EXIT_FAIL
    _say(
        tag,
        f"OK: {profile.verifier} and {profile.drafter} are in {_cache_root(cache_dir)} and pair "
        f"correctly; offline from now on: `HF_HUB_OFFLINE=1 make run PROFILE={profile.name}`",
    )
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: prefetch one profile; 0 ok, 2 failed (one line)."""
    parser = argparse.ArgumentParser(
        prog="python -m kit.prefetch",
        description=" ".join(__doc__.split("\n\n")[0].split()),
    )
    parser.add_argument(
        "--profile", default=None, help="profile name (default: $WORKBOOK_PROFILE, else tiny)"
    )
    parser.add_argument("--cache-dir", default=None, help="HF hub cache (default: HF_HUB_CACHE)")
    parser.add_argument(
        "--hub-timeout", type=float, default=HUB_TIMEOUT, help="seconds to wait for the hub"
    )
    args = parser.parse_args(argv)
    try:
        return _run_prefetch(profile_name(args.profile), args.cache_dir, args.hub_timeout)
    except ValueError as err:  # unknown profile, malformed profile file
        print(f"prefetch: {err}", file=sys.stderr)
        return EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
