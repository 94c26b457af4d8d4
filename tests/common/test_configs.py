"""helpers.common.configs: the one config.json reader (local folders, hub ids offline)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.common import configs
from helpers.common.configs import field_problems, read_config, read_json


def test_reads_a_local_folder_and_a_repo_relative_path(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 128}))
    assert read_config(tmp_path) == {"hidden_size": 128}
    assert read_config("data/tiny-qwen3-moe")["model_type"] == "qwen3_moe"


def test_missing_config_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="has no config.json"):
        read_config(tmp_path)


def test_hub_id_offline_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(
        FileNotFoundError, match="not in the local HF cache and HF_HUB_OFFLINE"
    ) as err:
        read_config("Qwen/No-Such-Model-For-Tests")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "text", ['{"hidden_size": 12', "", "\udcff".encode(errors="surrogateescape")]
)
def test_a_config_that_is_not_json_names_the_file(tmp_path: Path, text) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ValueError, match="is not valid JSON") as err:
        read_config(tmp_path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_read_json_says_how_to_restore_a_shipped_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from helpers.common import paths

    monkeypatch.setattr(paths, "DATA_DIR", tmp_path)
    (tmp_path / "profiles").mkdir()
    broken = tmp_path / "profiles" / "x.json"
    broken.write_text("[1, 2")
    with pytest.raises(ValueError, match=r"git checkout -- data/profiles/x\.json`$"):
        read_json(broken)


# --------------------------------------------------------------------------- hub ids without a hub


def no_network_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make every hub call fail the test; returns the list the probe appends to when asked."""
    import huggingface_hub

    probed: list[str] = []

    def download(*args, **kwargs):
        raise AssertionError("hf_hub_download was called: it retries for ~20 s without a network")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    monkeypatch.setattr(configs, "hub_reachable", lambda timeout: probed.append("probe") or False)
    return probed


def test_offline_reads_the_cached_config_without_any_traffic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probed = no_network_calls(monkeypatch)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cached = tmp_path / "config.json"
    cached.write_text(json.dumps({"hidden_size": 64}))
    monkeypatch.setattr(configs, "_cached_hub_config", lambda ref: cached)
    assert read_config("Qwen/Cached-Model") == {"hidden_size": 64}
    assert probed == [], "offline set: not even the probe goes out"


def test_no_network_answers_at_once_from_the_cache_or_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    probed = no_network_calls(monkeypatch)
    monkeypatch.setattr(configs, "_cached_hub_config", lambda ref: None)
    with pytest.raises(FileNotFoundError) as err:
        read_config("Qwen/Uncached-Model")
    assert str(err.value) == (
        "config.json of hub model 'Qwen/Uncached-Model' is not in the local HF cache and the hub "
        "does not answer (no network?): download it once online, or pass a local folder"
    )
    cached = tmp_path / "config.json"
    cached.write_text(json.dumps({"vocab_size": 8}))
    monkeypatch.setattr(configs, "_cached_hub_config", lambda ref: cached)
    assert read_config("Qwen/Cached-Model") == {"vocab_size": 8}
    assert probed == ["probe", "probe"]


# --------------------------------------------------------------------------- field_problems

SCHEMA = {
    "size": "positive int",
    "count": "int >= 0",
    "rate": "fraction",
    "flag": "bool",
    "ids": "list of ints or null",
    "names": "list of strings",
    "cc": "version",
    "layer": "object",
    "layer.heads": "positive int",
    "methods": "list",
    "methods[0]": "object",
    "methods[0].k": "positive int",
    "sources": "object of strings",
}
GOOD = {
    "size": 8,
    "count": 0,
    "rate": 1,
    "flag": False,
    "ids": None,
    "names": [],
    "cc": "8.9",
    "layer": {"heads": 2},
    "methods": [{"k": 3}],
    "sources": {"a": "b"},
}


def test_good_values_and_absent_keys_pass() -> None:
    assert field_problems(GOOD, SCHEMA, "x.json") == []
    assert field_problems({}, SCHEMA, "x.json") == [], "presence is the reader's business"
    assert field_problems({"methods": []}, SCHEMA, "x.json") == []


@pytest.mark.parametrize(
    ("key", "value", "line"),
    [
        ("size", "2048", 'size is "2048" (a string), expected a positive integer'),
        ("size", True, "size is true (a boolean), expected a positive integer"),
        ("size", 8.0, "size is 8.0 (a number), expected a positive integer"),
        ("size", 0, "size is 0 (an integer), expected a positive integer"),
        ("size", None, "size is null, expected a positive integer"),
        ("count", -1, "count is -1 (an integer), expected an integer >= 0"),
        ("rate", 1.5, "rate is 1.5 (a number), expected a number in (0, 1]"),
        ("rate", float("nan"), "rate is NaN (a number), expected a number in (0, 1]"),
        ("flag", "false", 'flag is "false" (a string), expected true or false'),
        ("flag", 0, "flag is 0 (an integer), expected true or false"),
        (
            "ids",
            [2.0, 4],
            "ids is [2.0, 4] (a list), expected a list of integers or null: item 0 is 2.0 (a number)",
        ),
        ("ids", 5, "ids is 5 (an integer), expected a list of integers or null"),
        (
            "names",
            ["a", 3],
            'names is ["a", 3] (a list), expected a list of strings: item 1 is 3 (an integer)',
        ),
        ("cc", 8.9, 'cc is 8.9 (a number), expected a version string such as "8.9"'),
        ("cc", "abc", 'cc is "abc" (a string), expected a version string such as "8.9"'),
        ("layer", [1], "layer is [1] (a list), expected a JSON object"),
        (
            "sources",
            {"a": 1},
            "sources is {\"a\": 1} (an object), expected an object of strings: 'a' is 1 (an integer)",
        ),
    ],
)
def test_a_wrong_value_is_one_line_naming_file_key_found_and_expected(
    key: str, value, line: str
) -> None:
    assert field_problems({**GOOD, key: value}, SCHEMA, "x.json") == [f"x.json: {line}"]


def test_nested_keys_are_named_by_their_path() -> None:
    config = {**GOOD, "layer": {"heads": "4"}, "methods": [{"k": -3}]}
    assert field_problems(config, SCHEMA, "x.json") == [
        'x.json: layer.heads is "4" (a string), expected a positive integer',
        "x.json: methods[0].k is -3 (an integer), expected a positive integer",
    ]


def test_a_parent_of_the_wrong_kind_is_one_line_not_one_per_child() -> None:
    config = {**GOOD, "layer": "x", "methods": {"k": 3}}
    assert field_problems(config, SCHEMA, "x.json") == [
        'x.json: layer is "x" (a string), expected a JSON object',
        'x.json: methods is {"k": 3} (an object), expected a list',
    ]
    assert field_problems({"methods": ["7"]}, SCHEMA, "x.json") == [
        'x.json: methods[0] is "7" (a string), expected a JSON object'
    ]


def test_a_long_value_is_cut_to_one_short_line() -> None:
    (line,) = field_problems({"size": "9" * 500}, SCHEMA, "x.json")
    assert len(line) < 120 and "..." in line and "\n" not in line


# --------------------------------------------------------------------------- round three's files


def test_a_utf8_bom_is_named_as_a_bom(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"hidden_size": 8}).encode())
    with pytest.raises(ValueError) as err:
        read_json(path)
    line = str(err.value)
    assert line.startswith(f"{path} starts with a UTF-8 byte-order mark (BOM)"), line
    assert "without a BOM" in line and "\n" not in line


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"layers": ' + "9" * 5000 + "}", "a number of more than 4300 digits"),
        ('{"name": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested deeper than"),
    ],
    ids=["5000-digit-int", "100000-deep"],
)
def test_json_beyond_pythons_limits_is_a_line_naming_the_file(
    tmp_path: Path, text: str, says: str
) -> None:
    """These raised a ValueError without the file, and a RecursionError."""
    path = tmp_path / "x.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError) as err:
        read_json(path)
    line = str(err.value)
    assert line.startswith(f"{path} is not valid JSON here") and says in line, line
    assert "\n" not in line


@pytest.mark.parametrize("kind", ["number >= 0", "positive int", "int >= 0", "fraction"])
def test_a_401_digit_integer_is_a_line_not_an_overflow(kind: str) -> None:
    """`number >= 0` raised OverflowError (int too large to convert to float)."""
    (line,) = field_problems({"size": int("9" * 401)}, {"size": kind}, "x.json")
    assert line.startswith("x.json: size is 999") and "(an integer of 401 digits)" in line, line
    assert "\n" not in line and len(line) < 200


def test_a_range_kind_names_its_bounds() -> None:
    schema = {"k": "int in [1, 128]"}
    assert field_problems({"k": 128}, schema, "x.json") == []
    assert field_problems({"k": 1_000_000}, schema, "x.json") == [
        "x.json: k is 1000000 (an integer), expected an integer from 1 to 128"
    ]
    assert field_problems({"k": 0}, schema, "x.json")
    assert field_problems({"k": True}, schema, "x.json")


@pytest.mark.parametrize(
    ("kind", "good", "bad"),
    [
        ("positive number", [1e-6, 10000, 1e300], ["tiny", 0, -1e-6, float("inf"), True]),
        ("token ids", [0, 151645, [2, 3]], ["2", -1, [2, "x"], 2.0, [], True]),
    ],
)
def test_the_model_config_kinds(kind: str, good: list, bad: list) -> None:
    for value in good:
        assert field_problems({"x": value}, {"x": kind}, "c.json") == [], value
    for value in bad:
        (line,) = field_problems({"x": value}, {"x": kind}, "c.json")
        assert line.startswith("c.json: x is "), line
