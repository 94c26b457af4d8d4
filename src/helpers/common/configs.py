"""config.json of a model, local folder or hub id: the one reader every module uses (and the JSON
reader that names a damaged file and how to restore it), plus the field checker that types what
the readers read.

A schema is a plain dict, dotted key path -> kind (`"transformer_layer_config.hidden_size":
"positive int"`, `"proposal_methods[0]": "object"`, `"k": "int in [1, 128]"`); a kind ending in
" or null" also takes JSON null, which then counts as absent. An integer kind takes only what a
64-bit integer holds, a number kind only what a float holds: a 401-digit integer is a wrong
value. `field_problems` gives one line per present key of the wrong kind, naming the file, the
key, what it holds and what it should; a key under a parent of the wrong kind is left to the
parent's own line. The schemas live next to their readers (helpers.engine.pairing for model
configs, helpers.common.profiles for profiles).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from helpers.common.envinfo import hub_reachable, offline_var
from helpers.common.paths import local_dir, restore_hint

__all__ = [
    "read_json",
    "read_config",
    "field_problems",
]

#: Seconds a hub id's config read waits for the hub to answer before it uses the local cache only.
_HUB_PROBE_TIMEOUT = 3.0
_OR_NULL = " or null"
#: A compute capability or version string: "8.9", "9.0".
_VERSION = re.compile(r"^\d+\.\d+$")
#: One step of a key path: a name, or a list index in brackets.
_PATH_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
#: A kind with bounds: "int in [1, 128]".
_RANGE = re.compile(r"^int in \[(-?\d+), (-?\d+)\]$")
#: Integers a 64-bit signed integer holds (what torch, vLLM's C++ and numpy's int64 take).
_INT64 = 2**63
#: Digits Python reads in one integer (sys.get_int_max_str_digits(): 4300 unless changed).
_MAX_DIGITS = 4300


def _is_int(value: Any) -> bool:
    """True for a JSON integer that a 64-bit integer holds (not a bool, not a float, not a string
    of digits)."""
    return isinstance(value, int) and not isinstance(value, bool) and -_INT64 <= value < _INT64


def _is_number(value: Any) -> bool:
    """True for a finite JSON number (int or float, not a bool) that a float holds."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer of more than 308 digits
        return False


def _is_token_id(value: Any) -> bool:
    """True for a token id: an integer >= 0."""
    return _is_int(value) and value >= 0


#: Kind name -> (what it must hold, in words; the test).
_KINDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "positive int": ("a positive integer", lambda v: _is_int(v) and v > 0),
    "int >= 0": ("an integer >= 0", lambda v: _is_int(v) and v >= 0),
    "number >= 0": ("a number >= 0", lambda v: _is_number(v) and v >= 0),
    "fraction": ("a number in (0, 1]", lambda v: _is_number(v) and 0 < v <= 1),
    "positive number": ("a number > 0", lambda v: _is_number(v) and v > 0),
    "token ids": (
        "a token id (an integer >= 0) or a non-empty list of them",
        lambda v: (
            _is_token_id(v) or (isinstance(v, list) and bool(v) and all(map(_is_token_id, v)))
        ),
    ),
    "string": ("a string", lambda v: isinstance(v, str)),
    "non-empty string": ("a non-empty string", lambda v: isinstance(v, str) and bool(v.strip())),
    "version": (
        'a version string such as "8.9"',
        lambda v: isinstance(v, str) and bool(_VERSION.match(v)),
    ),
    "bool": ("true or false", lambda v: isinstance(v, bool)),
    "object": ("a JSON object", lambda v: isinstance(v, dict)),
    "list": ("a list", lambda v: isinstance(v, list)),
    "list of strings": (
        "a list of strings",
        lambda v: isinstance(v, list) and all(isinstance(i, str) for i in v),
    ),
    "list of ints": ("a list of integers", lambda v: isinstance(v, list) and all(map(_is_int, v))),
    "object of strings": (
        "an object of strings",
        lambda v: isinstance(v, dict) and all(isinstance(i, str) for i in v.values()),
    ),
}


def _kind(name: str) -> tuple[str, Callable[[Any], bool]]:
    """(what a kind must hold, in words; its test), for a name of _KINDS or a range kind."""
    bounds = _RANGE.match(name)
    if bounds is None:
        return _KINDS[name]
    low, high = int(bounds.group(1)), int(bounds.group(2))
    return f"an integer from {low} to {high}", lambda v: _is_int(v) and low <= v <= high


def _json_type(value: Any) -> str:
    """What a JSON value is, in words: 'a string', 'a list', 'a boolean', 'null', 'an integer of
    401 digits' (past a 64-bit integer)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int) and not -_INT64 <= value < _INT64:
        return f"an integer of {len(str(abs(value)))} digits"
    if isinstance(value, (int, float)):
        return "an integer" if isinstance(value, int) else "a number"
    names = {str: "a string", list: "a list", dict: "an object"}
    return next((n for t, n in names.items() if isinstance(value, t)), type(value).__name__)


def _shown(value: Any) -> str:
    """A value as JSON, cut to one short line, with its type: `"2048" (a string)`."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = f"{type(value).__name__} nested too deep to show"
    text = text if len(text) <= 60 else f"{text[:57]}..."
    return text if value is None else f"{text} ({_json_type(value)})"


def _first_bad_item(value: Any, kind: str) -> str:
    """For a list or object of the wrong items, which item is wrong; else ''."""
    test = {"list of strings": lambda i: isinstance(i, str), "list of ints": _is_int}.get(kind)
    if test is not None and isinstance(value, list):
        index = next((n for n, item in enumerate(value) if not test(item)), None)
        return "" if index is None else f": item {index} is {_shown(value[index])}"
    if kind == "object of strings" and isinstance(value, dict):
        key = next((k for k, item in value.items() if not isinstance(item, str)), None)
        return "" if key is None else f": {key!r} is {_shown(value[key])}"
    return ""


def _lookup(config: Any, path: str) -> Iterator[Any]:
    """The value at a dotted key path (one item), or nothing when it or a parent of the right
    kind is absent."""
    node = config
    for name, index in _PATH_STEP.findall(path):
        if name and isinstance(node, dict) and name in node:
            node = node[name]
        elif index and isinstance(node, list) and int(index) < len(node):
            node = node[int(index)]
        else:
            return
    yield node


def field_problems(config: Any, schema: dict[str, str], source: str) -> list[str]:
    """One line per key of `schema` that `config` holds with the wrong kind of value:
    `source: key is "2048" (a string), expected a positive integer`."""
    problems = []
    for path, kind in schema.items():
        null_ok = kind.endswith(_OR_NULL)
        base = kind.removesuffix(_OR_NULL)
        expected, test = _kind(base)
        for value in _lookup(config, path):
            if (value is None and null_ok) or (value is not None and test(value)):
                continue
            problems.append(
                f"{source}: {path} is {_shown(value)}, expected {expected}"
                f"{_OR_NULL if null_ok else ''}{_first_bad_item(value, base)}"
            )
    return problems


def read_json(path: Path) -> Any:
    """A JSON file's content; one ValueError naming the file and how to restore it when it is
    not JSON (cut short, binary garbage, a byte-order mark, a number or a nesting past Python's
    limits)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(
            f"{path} is not valid JSON ({type(err).__name__}): {restore_hint(path)}"
        ) from None
    if text.startswith("\ufeff"):
        raise ValueError(
            f"{path} starts with a UTF-8 byte-order mark (BOM), which JSON does not allow: save it "
            f"as UTF-8 without a BOM, or {restore_hint(path)}"
        )
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(
            f"{path} is not valid JSON ({type(err).__name__} at line {err.lineno} column "
            f"{err.colno}): {restore_hint(path)}"
        ) from None
    except RecursionError:
        why = "it is nested deeper than Python's JSON reader goes (lists or objects in each other)"
    except ValueError:  # int(): "Exceeds the limit (4300 digits) for integer string conversion"
        why = f"it holds a number of more than {_MAX_DIGITS} digits"
    raise ValueError(f"{path} is not valid JSON here: {why}: {restore_hint(path)}")


def _cached_hub_config(ref: str) -> Path | None:
    """config.json of a hub model in the local HF cache, or None (never touches the network)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(ref, "config.json")
    except Exception:  # an id the cache cannot even name
        return None
    return Path(found) if isinstance(found, str) else None


def _hub_config(ref: str) -> Path:
    """config.json of a hub model: downloaded (or refreshed) when the hub answers, else the local
    cache's copy at once; FileNotFoundError in one line when neither works."""
    var = offline_var()
    if var is not None or not hub_reachable(timeout=_HUB_PROBE_TIMEOUT):
        cached = _cached_hub_config(ref)
        if cached is not None:
            return cached
        why = f"{var} is set" if var else "the hub does not answer (no network?)"
        raise FileNotFoundError(
            f"config.json of hub model {ref!r} is not in the local HF cache and {why}: download "
            f"it once online, or pass a local folder"
        )
    try:
        from huggingface_hub import hf_hub_download

        return Path(hf_hub_download(str(ref), "config.json"))
    except Exception as err:
        raise FileNotFoundError(
            f"cannot fetch config.json of hub model {ref!r} ({type(err).__name__}): offline or "
            f"no access? Download it once online, or pass a local folder"
        ) from None


def read_config(ref: str | Path) -> dict[str, Any]:
    """config.json of a local model folder, or of a hub id (the local HF cache when offline or
    the hub does not answer, so no retries); one-line errors."""
    folder = local_dir(ref)
    if folder is not None:
        path = folder / "config.json"
        if not path.is_file():
            raise FileNotFoundError(f"{folder} has no config.json: check the path")
        return read_json(path)
    return read_json(_hub_config(str(ref)))
