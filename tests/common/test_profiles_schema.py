"""Profiles at the JSON boundary: every field the workbook reads, replaced by a value of the
wrong type, is one line naming the file and the key; a damaged profile blocks no other."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from helpers.common import profiles
from tests.support import WRONG_VALUES, accepted


def put(raw: dict, path: str, value: Any) -> dict:
    """Set a dotted key path (`needs.hub`) in a profile, making the objects on the way."""
    *parents, last = path.split(".")
    node = raw
    for step in parents:
        node = node.setdefault(step, {})
    node[last] = value
    return raw


CASES = [
    pytest.param(path, value, id=f"{path}={name}")
    for path, kind in profiles._SCHEMA.items()
    for name, value in WRONG_VALUES.items()
    if not accepted(kind, value)
]


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shipped profiles, copied into a folder that helpers.common.profiles reads instead."""
    copy = tmp_path / "profiles"
    shutil.copytree(profiles._PROFILES_DIR, copy)
    monkeypatch.setattr(profiles, "_PROFILES_DIR", copy)
    monkeypatch.delenv(profiles._PROFILE_ENV_VAR, raising=False)
    return copy


def tiny_raw() -> dict:
    """The shipped tiny profile's JSON."""
    return json.loads((profiles._PROFILES_DIR / "tiny.json").read_text())


def write(folder: Path, name: str, content: Any) -> Path:
    """data/profiles/<name>.json holding `content` (JSON, or text as it is)."""
    path = folder / f"{name}.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def others_still_work(folder: Path, broken: str) -> None:
    """Every other profile loads, and the listings skip the broken one without raising."""
    names = profiles._available_profiles()
    assert broken in names, "a damaged profile is still listed, so its name can be loaded"
    for name in names:
        if name != broken:
            assert profiles.load_profile(name).name == name
    assert broken not in profiles.profiles_for_gpus(8)
    assert "tiny" in profiles.profiles_for_gpus(0)
    assert broken not in {p.name for p in profiles.loadable_profiles()}


def test_the_cases_cover_every_field_and_type() -> None:
    assert {p.values[0] for p in CASES} == set(profiles._SCHEMA)
    assert {p.id.rsplit("=", 1)[1] for p in CASES} == set(WRONG_VALUES)


def test_the_shipped_profiles_have_no_problem() -> None:
    for name in profiles._available_profiles():
        assert profiles._profile_problems(name) == [], name


@pytest.mark.parametrize(("path", "value"), CASES)
def test_a_field_of_the_wrong_type_is_one_line_naming_file_and_key(
    folder: Path, path: str, value: Any
) -> None:
    file = write(folder, "broken", put({**tiny_raw(), "name": "broken"}, path, value))
    problems = profiles._profile_problems("broken")  # never raises
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{file}: {path} is ") and ", expected " in problems[0]
    with pytest.raises(ValueError) as err:
        profiles.load_profile("broken")
    assert str(err.value) == problems[0]
    others_still_work(folder, "broken")


@pytest.mark.parametrize("key", profiles._REQUIRED)
def test_a_missing_required_field_is_named(folder: Path, key: str) -> None:
    raw = {k: v for k, v in {**tiny_raw(), "name": "broken"}.items() if k != key}
    file = write(folder, "broken", raw)
    assert profiles._profile_problems("broken") == [
        f"{file}: missing required field(s) ['{key}']: add them (see data/profiles/tiny.json)"
    ]


def test_every_bad_field_is_its_own_line(folder: Path) -> None:
    raw = {**tiny_raw(), "name": "broken", "num_speculative_tokens": "3", "extra": 1}
    raw["needs"] = {**raw["needs"], "hub": "false"}
    write(folder, "broken", raw)
    problems = profiles._profile_problems("broken")
    assert [re.sub(r"^.*?broken\.json: ", "", line).split(" ")[0] for line in problems] == [
        "unknown",
        "num_speculative_tokens",
        "needs.hub",
    ]


# --------------------------------------------------------------------------- the probe's cases


@pytest.mark.parametrize("text", ['{"name": "broken",', "", "[1, 2"])
def test_a_profile_that_is_not_json_is_named_and_blocks_no_other(folder: Path, text: str) -> None:
    file = write(folder, "broken", text)
    (line,) = profiles._profile_problems("broken")
    assert line.startswith(f"{file} is not valid JSON")
    with pytest.raises(ValueError, match=re.escape(str(file))):
        profiles.load_profile("broken")
    others_still_work(folder, "broken")


def test_a_profile_that_is_a_list_is_one_line(folder: Path) -> None:
    file = write(folder, "broken", [tiny_raw()])
    assert profiles._profile_problems("broken") == [
        f"{file} holds a JSON list, not an object of profile fields"
    ]
    others_still_work(folder, "broken")


def test_an_engine_that_is_a_list_is_one_line(folder: Path) -> None:
    file = write(folder, "broken", {**tiny_raw(), "name": "broken", "engine": [1024]})
    assert profiles._profile_problems("broken") == [
        f"{file}: engine is [1024] (a list), expected a JSON object"
    ]


def test_hub_false_as_a_string_is_no_hub_profile(folder: Path) -> None:
    raw = tiny_raw()
    file = write(folder, "tiny", {**raw, "needs": {**raw["needs"], "hub": "false"}})
    with pytest.raises(ValueError) as err:
        profiles.load_profile("tiny")
    assert str(err.value) == f'{file}: needs.hub is "false" (a string), expected true or false'


@pytest.mark.parametrize("k", [-2, 0, "3", True, 2.0, None, 129, 1_000_000])
def test_num_speculative_tokens_must_be_a_k_vllm_takes(folder: Path, k: Any) -> None:
    write(folder, "tiny", {**tiny_raw(), "num_speculative_tokens": k})
    with pytest.raises(
        ValueError,
        match=r"tiny\.json: num_speculative_tokens is .*, expected an integer from 1 to 128$",
    ):
        profiles.load_profile("tiny")


def test_an_unknown_profile_is_one_line_too() -> None:
    with pytest.raises(ValueError, match=r"^unknown profile 'nope'"):
        profiles.load_profile("nope")
    assert profiles._profile_problems("nope")[0].startswith("unknown profile 'nope'")


# --------------------------------------------------------------------------- round three


def with_field(text: str) -> str:
    """A profile `broken` whose JSON text ends with one more field, written as it is."""
    return json.dumps({**tiny_raw(), "name": "broken"})[:-1] + f", {text}}}"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (with_field('"verifier_layers": ' + "9" * 5000), "a number of more than 4300 digits"),
        ('{"name": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested deeper than"),
        (
            json.dumps(
                {**tiny_raw(), "name": "broken", "needs": {"gpu_memory_gib": int("9" * 401)}}
            ),
            "needs.gpu_memory_gib is 999",
        ),
        ("\ufeff" + json.dumps({**tiny_raw(), "name": "broken"}), "byte-order mark (BOM)"),
    ],
    ids=["5000-digit-int", "100000-deep", "401-digit-number", "bom"],
)
def test_a_profile_past_pythons_limits_names_its_file_and_blocks_no_other(
    folder: Path, text: str, says: str
) -> None:
    """These raised ValueError without the file, RecursionError and OverflowError, and the last
    two made the stack table and profiles_for_gpus() raise for every profile."""
    file = folder / "broken.json"
    file.write_text(text, encoding="utf-8")
    (line,) = profiles._profile_problems("broken")
    assert line.startswith(str(file)) and says in line, line
    others_still_work(folder, "broken")


def test_one_unforeseen_failure_leaves_the_listings_whole(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """loadable_profiles caught ValueError only: anything else from one profile emptied the
    figures' stack table for all."""
    write(folder, "broken", {**tiny_raw(), "name": "broken"})
    real = profiles._read_profile

    def read(path: Path) -> profiles.Profile:
        if path.stem == "broken":
            raise RuntimeError("Symlink loop from 'broken.json'")
        return real(path)

    monkeypatch.setattr(profiles, "_read_profile", read)
    others_still_work(folder, "broken")
    (line,) = profiles._profile_problems("broken")
    assert "broken.json" in line and "RuntimeError" in line, line


def test_a_profile_that_is_not_json_says_what_to_do_if_you_added_it(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its only fix was `git checkout -- data/profiles/mine.json`, which fails for a file git
    does not have."""
    from helpers.common import paths

    monkeypatch.setattr(paths, "DATA_DIR", folder.parent)  # the copy is data/ now
    write(folder, "mine", '{"name": ')
    with pytest.raises(ValueError) as err:
        profiles.load_profile("mine")
    assert str(err.value).endswith("if the repo ships it, else fix it or remove it"), err.value
