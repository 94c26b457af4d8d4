"""Check an EAGLE-3 drafter against its verifier from config.json and safetensors headers only.

A mismatched pair otherwise fails deep inside vLLM (a shape error while loading `fc`, or a
silent acceptance collapse); here every problem gets one named line that says what to do.
No tensor is loaded: weight shapes come from the safetensors JSON header.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from helpers.common.configs import read_config
from helpers.common.paths import local_dir
from helpers.eagle3.taps import (
    aux_layers_for,
    default_aux_layers,
    drafter_aux_layer_ids,
    num_hidden_layers,
)

__all__ = [
    "ERROR",
    "WARNING",
    "VLLM_DEFAULT_NUM_AUX",
    "Problem",
    "PairingReport",
    "PairingError",
    "safetensors_header",
    "weight_index",
    "drafter_weights",
    "local_tensor",
    "is_eagle3_checkpoint",
    "layer_config",
    "Weights",
    "check_method",
    "check_hidden_sizes",
    "check_fc",
    "check_vocab",
    "check_d2t_values",
    "check_aux_layer_ids",
    "check_max_model_len",
    "check_verifier_name",
    "validate_pair",
    "check_pair",
    "edited_copy",
]

ERROR = "error"
WARNING = "warning"
#: fc inputs vLLM's Eagle3LlamaForCausalLM builds when the config names no count.
VLLM_DEFAULT_NUM_AUX = 3


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a pairing: a stable code, a one-line message, error or warning."""

    code: str
    message: str
    severity: str = ERROR

    def __str__(self) -> str:
        """`[error] code: message`."""
        return f"[{self.severity}] {self.code}: {self.message}"


@dataclass
class PairingReport:
    """What validate_pair found for one verifier/drafter pair."""

    verifier: str
    drafter: str
    aux_layers: tuple[int, ...] | None = None
    problems: list[Problem] = field(default_factory=list)

    @property
    def errors(self) -> list[Problem]:
        """Problems that would stop or break the run."""
        return [p for p in self.problems if p.severity == ERROR]

    @property
    def warnings(self) -> list[Problem]:
        """Problems worth a look that do not stop the run."""
        return [p for p in self.problems if p.severity == WARNING]

    @property
    def ok(self) -> bool:
        """True when there is no error (warnings allowed)."""
        return not self.errors

    def codes(self) -> list[str]:
        """The problem codes, in check order."""
        return [p.code for p in self.problems]

    def summary(self) -> str:
        """One line per problem, or a one-line all-clear."""
        if not self.problems:
            return f"pairing OK: {self.drafter} drafts for {self.verifier}, taps {self.aux_layers}"
        return "\n".join(str(p) for p in self.problems)


class PairingError(ValueError):
    """A verifier/drafter pair that cannot work; the message lists each error on one line."""


# --------------------------------------------------------------------------- reading


def safetensors_header(path: Path) -> dict[str, dict[str, Any]]:
    """Tensor name -> {dtype, shape} from a .safetensors file's JSON header (no tensor read)."""
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
    header.pop("__metadata__", None)
    return header


def weight_index(folder: Path) -> dict[str, dict[str, Any]]:
    """Header entries of every tensor in a model folder (single file or sharded index)."""
    single = folder / "model.safetensors"
    if single.is_file():
        return safetensors_header(single)
    index = folder / "model.safetensors.index.json"
    if not index.is_file():
        raise FileNotFoundError(f"{folder} has no model.safetensors(.index.json)")
    shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    entries: dict[str, dict[str, Any]] = {}
    for shard in shards:
        entries.update(safetensors_header(folder / shard))
    return entries


def _hub_weight_index(ref: str) -> dict[str, dict[str, Any]]:
    """Header entries of a hub model, via HTTP range reads of its safetensors headers only."""
    from huggingface_hub import get_safetensors_metadata

    meta = get_safetensors_metadata(ref)
    entries: dict[str, dict[str, Any]] = {}
    for file_meta in meta.files_metadata.values():
        for name, info in file_meta.tensors.items():
            entries[name] = {"dtype": info.dtype, "shape": list(info.shape)}
    return entries


def drafter_weights(ref: str | Path) -> dict[str, dict[str, Any]]:
    """The drafter's tensor headers, local or (headers only) from the hub."""
    folder = local_dir(ref)
    return weight_index(folder) if folder is not None else _hub_weight_index(str(ref))


def local_tensor(ref: str | Path, name: str) -> Any:
    """One tensor's values (numpy) from a local model folder; None for hub models or if absent."""
    from safetensors import safe_open

    folder = local_dir(ref)
    if folder is None:
        return None
    path = folder / "model.safetensors"
    if not path.is_file():
        index = folder / "model.safetensors.index.json"
        shard = json.loads(index.read_text())["weight_map"].get(name) if index.is_file() else None
        if shard is None:
            return None
        path = folder / shard
    with safe_open(str(path), "np") as f:
        return f.get_tensor(name) if name in f.keys() else None


# --------------------------------------------------------------------------- config helpers


def is_eagle3_checkpoint(drafter: dict[str, Any]) -> bool:
    """True for an EAGLE-3 drafter (speculators eagle3, or an Eagle3 architecture)."""
    archs = drafter.get("architectures") or []
    by_arch = any("eagle3" in arch.lower() for arch in archs)
    return drafter.get("speculators_model_type") == "eagle3" or by_arch


def layer_config(drafter: dict[str, Any]) -> dict[str, Any]:
    """The drafter's decoder-layer config (speculators transformer_layer_config, else the top)."""
    return drafter.get("transformer_layer_config") or drafter


def _intended_aux_layers(verifier: dict[str, Any], drafter: dict[str, Any]) -> tuple[int, ...]:
    """The taps the drafter asks for (its override, else vLLM's default), unvalidated."""
    override = drafter_aux_layer_ids(drafter)
    return override if override is not None else default_aux_layers(num_hidden_layers(verifier))


def _shape(weights: dict[str, dict[str, Any]], name: str) -> tuple[int, ...] | None:
    """A tensor's shape from the header, or None if absent."""
    entry = weights.get(name)
    return tuple(entry["shape"]) if entry is not None else None


def _basename(ref: str) -> str:
    """Last path component of a path or hub id: 'data/tiny-qwen3-moe/' -> 'tiny-qwen3-moe'."""
    return PurePosixPath(str(ref).replace("\\", "/").rstrip("/")).name


# --------------------------------------------------------------------------- checks

Weights = dict[str, dict[str, Any]]


def _error(code: str, message: str) -> Problem:
    """An error-severity Problem."""
    return Problem(code, message, ERROR)


def _warning(code: str, message: str) -> Problem:
    """A warning-severity Problem."""
    return Problem(code, message, WARNING)


def check_method(drafter: dict[str, Any], method: str | None) -> list[Problem]:
    """1. The speculative method must match the checkpoint kind (None: vLLM infers it)."""
    eagle3 = is_eagle3_checkpoint(drafter)
    if method is None or eagle3 == (method == "eagle3"):
        return []
    if eagle3:
        return [
            _error(
                "method_not_eagle3",
                f"speculative_config method {method!r} but the drafter is an EAGLE-3 "
                f"checkpoint: set method='eagle3'",
            )
        ]
    return [
        _error(
            "drafter_not_eagle3",
            "method 'eagle3' but the drafter is no EAGLE-3 checkpoint (no speculators_model_type "
            "'eagle3' or Eagle3 architecture): use an EAGLE-3 drafter",
        )
    ]


def check_hidden_sizes(verifier: dict[str, Any], drafter: dict[str, Any]) -> list[Problem]:
    """2. Drafter hidden_size and target_hidden_size must equal the verifier's hidden_size."""
    hidden = verifier["hidden_size"]
    problems = []
    target = drafter.get("target_hidden_size")
    if target is not None and target != hidden:
        problems.append(
            _error(
                "target_hidden_size_mismatch",
                f"drafter target_hidden_size {target} ≠ verifier hidden_size {hidden}: "
                f"this drafter was trained for another verifier",
            )
        )
    own = layer_config(drafter).get("hidden_size")
    if own is not None and own != hidden:
        problems.append(
            _error(
                "drafter_hidden_size_mismatch",
                f"drafter hidden_size {own} ≠ verifier hidden_size {hidden}: it reuses the "
                f"verifier's embeddings, so train it at hidden_size {hidden}",
            )
        )
    return problems


def check_fc(
    verifier: dict[str, Any],
    drafter: dict[str, Any],
    weights: Weights,
    aux_layers: tuple[int, ...] | None,
) -> list[Problem]:
    """3. fc.weight must take (number of aux layers) × verifier hidden_size inputs."""
    shape = _shape(weights, "fc.weight")
    if shape is None:
        return [
            _error(
                "fc_missing",
                "drafter weights have no fc.weight: not a speculators-format EAGLE-3 drafter",
            )
        ]
    hidden, fan_in = verifier["hidden_size"], shape[1]
    n_aux = len(aux_layers or _intended_aux_layers(verifier, drafter))
    problems = []
    if fan_in != n_aux * hidden:
        problems.append(
            _error(
                "fc_in_features_mismatch",
                f"drafter fc.weight takes {fan_in} inputs but {n_aux} aux layers × verifier "
                f"hidden_size {hidden} = {n_aux * hidden}: the drafter does not fit this "
                f"verifier or its eagle_aux_hidden_state_layer_ids",
            )
        )
    problems += _check_fc_declared(drafter, fan_in, hidden)
    return problems


def _check_fc_declared(drafter: dict[str, Any], fan_in: int, hidden: int) -> list[Problem]:
    """vLLM's llama EAGLE-3 head sizes fc for 3 taps unless num_aux_hidden_states says otherwise."""
    layer_cfg = layer_config(drafter)
    declared = layer_cfg.get("num_aux_hidden_states") or drafter.get("num_aux_hidden_states")
    n_fc = fan_in // hidden if fan_in % hidden == 0 else None
    is_llama_head = layer_cfg.get("model_type", "llama") == "llama"
    if not is_llama_head or declared or n_fc in (None, VLLM_DEFAULT_NUM_AUX):
        return []
    return [
        _error(
            "fc_aux_count_undeclared",
            f"fc.weight is built for {n_fc} aux layers but vLLM's llama EAGLE-3 head assumes "
            f'{VLLM_DEFAULT_NUM_AUX}: add "num_aux_hidden_states": {n_fc} to '
            f"transformer_layer_config",
        )
    ]


def check_vocab(
    verifier: dict[str, Any], drafter: dict[str, Any], weights: Weights
) -> list[Problem]:
    """4. Vocab sizes, lm_head rows, and the d2t/t2d maps of a reduced draft vocab."""
    vocab = verifier["vocab_size"]
    problems = []
    own = layer_config(drafter).get("vocab_size")
    if own is not None and own != vocab:
        problems.append(
            _error(
                "vocab_size_mismatch",
                f"drafter vocab_size {own} ≠ verifier vocab_size {vocab}: it was trained "
                f"with another tokenizer; use a drafter made for this verifier",
            )
        )
    draft_vocab = drafter.get("draft_vocab_size") or vocab
    if draft_vocab > vocab:
        problems.append(
            _error(
                "draft_vocab_too_large",
                f"draft_vocab_size {draft_vocab} > verifier vocab_size {vocab}: the draft "
                f"vocabulary must be a subset of the verifier's",
            )
        )
    lm_head = _shape(weights, "lm_head.weight")
    if lm_head is not None and lm_head[0] != draft_vocab:
        problems.append(
            _error(
                "lm_head_rows_mismatch",
                f"drafter lm_head.weight has {lm_head[0]} rows but draft_vocab_size is "
                f"{draft_vocab}: fix draft_vocab_size in the drafter's config.json",
            )
        )
    if draft_vocab < vocab:
        problems += _check_vocab_maps(weights, draft_vocab, vocab)
    return problems


def _check_vocab_maps(weights: Weights, draft_vocab: int, vocab: int) -> list[Problem]:
    """d2t [draft_vocab] is required by vLLM; t2d [vocab] is skipped by vLLM (training only)."""
    problems = []
    d2t = _shape(weights, "d2t")
    if d2t is None:
        problems.append(
            _error(
                "d2t_missing",
                f"draft_vocab_size {draft_vocab} < vocab_size {vocab} but the weights have "
                f"no d2t: vLLM would map draft ids to wrong tokens; export d2t too",
            )
        )
    elif d2t != (draft_vocab,):
        problems.append(
            _error(
                "d2t_shape_mismatch",
                f"d2t has shape {list(d2t)}, expected [{draft_vocab}] (draft_vocab_size): "
                f"re-export the vocab map",
            )
        )
    t2d = _shape(weights, "t2d")
    if t2d is None:
        problems.append(
            _warning(
                "t2d_missing",
                f"reduced draft vocab without t2d [{vocab}]: vLLM ignores t2d, but the "
                f"export looks incomplete; re-export the vocab map",
            )
        )
    elif t2d != (vocab,):
        problems.append(
            _error(
                "t2d_shape_mismatch",
                f"t2d has shape {list(t2d)}, expected [{vocab}] (verifier vocab_size): the "
                f"vocab map was built for another verifier",
            )
        )
    return problems


def check_d2t_values(d2t: Any, vocab: int) -> list[Problem]:
    """d2t holds offsets (vLLM: target id = draft id + d2t[draft id]): every target inside the vocab."""
    import numpy as np

    targets = np.arange(len(d2t)) + np.asarray(d2t, dtype=np.int64)
    problems = []
    outside = int(((targets < 0) | (targets >= vocab)).sum())
    if outside:
        problems.append(
            _error(
                "d2t_out_of_range",
                f"{outside} of {len(targets)} d2t entries map a draft id outside the verifier's "
                f"vocabulary [0, {vocab}): vLLM would emit invalid token ids; rebuild the map "
                f"for this verifier",
            )
        )
    repeated = len(targets) - len(np.unique(targets))
    if repeated:
        problems.append(
            _warning(
                "d2t_duplicate_targets",
                f"{repeated} draft ids map to a verifier id another draft id already has: those "
                f"lm_head rows can never add a token; rebuild the map from distinct ids",
            )
        )
    return problems


def check_aux_layer_ids(
    verifier: dict[str, Any], drafter: dict[str, Any]
) -> tuple[tuple[int, ...] | None, list[Problem]]:
    """5. Aux layer ids (drafter override, else (2, L//2, L-3)) must be distinct and < L."""
    try:
        return aux_layers_for(verifier, drafter), []
    except ValueError as err:
        return None, [_error("aux_layers_invalid", str(err))]


def check_max_model_len(drafter: dict[str, Any], max_model_len: int | None) -> list[Problem]:
    """6. max_model_len beyond the drafter's trained positions: a warning.

    A vLLM with `helpers.engine.compat.FEATURES["draft_positions_stretched"]` raises the drafter's
    max_position_embeddings to max_model_len by itself (it only logs it), so nothing crashes; but
    the drafter never saw those positions, so acceptance can fall on long contexts.
    """
    limit = layer_config(drafter).get("max_position_embeddings")
    if max_model_len is None or limit is None or max_model_len <= limit:
        return []
    return [
        _warning(
            "max_model_len_exceeds_drafter",
            f"max_model_len {max_model_len} > drafter max_position_embeddings {limit}: vLLM stretches "
            f"the drafter, but positions past {limit} were never trained; expect lower acceptance there",
        )
    ]


def check_verifier_name(
    verifier: dict[str, Any], drafter: dict[str, Any], used: str
) -> list[Problem]:
    """7. The drafter's recorded verifier vs the one used (warnings; names compared by basename)."""
    recorded = (drafter.get("speculators_config") or {}).get("verifier") or {}
    problems = []
    name = recorded.get("name_or_path")
    if name and _basename(name).lower() != _basename(used).lower():
        problems.append(
            _warning(
                "verifier_name_mismatch",
                f"drafter was trained for verifier {name!r} but runs with {used!r}: fine "
                f"for a fine-tune or requantization of it, else expect low acceptance",
            )
        )
    archs, used_archs = recorded.get("architectures"), verifier.get("architectures")
    if archs and used_archs and not set(archs) & set(used_archs):
        problems.append(
            _warning(
                "verifier_arch_mismatch",
                f"drafter expects a {archs} verifier, got {used_archs}: check the pairing",
            )
        )
    return problems


# --------------------------------------------------------------------------- entry points


def _read_weights(drafter: str | Path) -> tuple[Weights | None, list[Problem]]:
    """The drafter's tensor headers, or a warning saying which checks were skipped."""
    try:
        return drafter_weights(drafter), []
    except Exception as err:  # noqa: BLE001 - missing files / offline hub become one line
        return None, [
            _warning(
                "weights_unreadable",
                f"cannot read the drafter's safetensors headers ({err}): fc, lm_head and "
                f"d2t not checked",
            )
        ]


def validate_pair(
    verifier: str | Path,
    drafter: str | Path,
    method: str | None = "eagle3",
    max_model_len: int | None = None,
    verifier_name: str | None = None,
) -> PairingReport:
    """Run every check on a verifier/drafter pair: configs, tensor headers, and a local d2t's values."""
    report = PairingReport(verifier=str(verifier), drafter=str(drafter))
    try:
        v_cfg, d_cfg = read_config(verifier), read_config(drafter)
    except FileNotFoundError as err:
        report.problems.append(_error("config_unavailable", str(err)))
        return report
    report.aux_layers, aux_problems = check_aux_layer_ids(v_cfg, d_cfg)
    weights, weight_problems = _read_weights(drafter)
    report.problems += check_method(d_cfg, method)
    report.problems += check_hidden_sizes(v_cfg, d_cfg)
    report.problems += weight_problems
    if weights is not None:
        report.problems += check_fc(v_cfg, d_cfg, weights, report.aux_layers)
        report.problems += check_vocab(v_cfg, d_cfg, weights)
        if _shape(weights, "d2t") is not None:  # values: local drafters only (hub: headers only)
            d2t = local_tensor(drafter, "d2t")
            if d2t is not None:
                report.problems += check_d2t_values(d2t, v_cfg["vocab_size"])
    report.problems += aux_problems
    report.problems += check_max_model_len(d_cfg, max_model_len)
    report.problems += check_verifier_name(v_cfg, d_cfg, verifier_name or str(verifier))
    return report


def check_pair(
    verifier: str | Path,
    drafter: str | Path,
    method: str | None = "eagle3",
    max_model_len: int | None = None,
    verifier_name: str | None = None,
) -> PairingReport:
    """validate_pair, raising PairingError (one line per error) if any error was found."""
    report = validate_pair(verifier, drafter, method, max_model_len, verifier_name)
    if not report.ok:
        raise PairingError("\n".join(f"{p.code}: {p.message}" for p in report.errors))
    return report


def edited_copy(src: str | Path, dst: str | Path, **config_changes: Any) -> Path:
    """Copy a model folder to dst with some config.json keys changed: a broken pair to validate."""
    import shutil

    dst = Path(dst)
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    config = read_config(dst)
    config.update(config_changes)
    (dst / "config.json").write_text(json.dumps(config, indent=2))
    return dst
