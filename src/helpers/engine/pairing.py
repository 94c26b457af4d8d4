"""Check an EAGLE-3 drafter against its verifier from config.json and safetensors headers only.

A mismatched pair otherwise fails deep inside vLLM (a shape error while loading `fc`, or a
silent acceptance collapse); here every problem gets one named line that says what to do.
No tensor is loaded: weight shapes come from the safetensors JSON header, and every tensor in it
is checked against the shape its config implies and against the names vLLM's EAGLE-3 loader
(`model_executor/models/llama_eagle3.py` and `qwen3_eagle3.py`, `load_weights`) loads, skips or
refuses.

Beyond the tensors: every config key vLLM's decoder and its EAGLE-3 layer read is typed
(`_VERIFIER_MODEL_SCHEMA`: rms_norm_eps "tiny" stopped the first generate with a TypeError),
hidden_act must be an activation transformers knows and silu where vLLM runs only silu, k (when
given) at most what vLLM's rejection sampler verifies (MAX_DRAFT_TOKENS, a bare AssertionError
past it), and the tokenizer (when at hand: the verifier's folder, a profile's tokenizer folder or
the local HF cache) must have the content transformers reads, no id past the model's vocab_size,
every `<|marker|>` of the chat template as a special token, and the special-token ids of
config.json and generation_config.json on special tokens, the tokenizer's own among them. A
vocabulary shuffled with its special tokens is caught that way; one whose ordinary pieces alone
are permuted is not: nothing in the files says which piece a row of the embedding learned, so
only running the model shows it (garbage text, acceptance near zero).

The validator never raises: a folder that does not exist, a name that is neither a folder nor a
hub id, a config that is not JSON or not an object, a key of the wrong type (`_VERIFIER_SCHEMA`,
`_drafter_schema`: one line per key, naming the file, the key, what it holds and what it should),
swapped roles, missing keys, a truncated or garbage safetensors file each become one problem in
the report; anything it did not foresee becomes one `check_crashed` problem naming both configs.
A hub model's config and headers come from the local cache at once when the hub is off or does
not answer (no retries).
"""

from __future__ import annotations

import json
import math
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from helpers.common.configs import field_problems, read_config, read_json
from helpers.common.envinfo import hub_reachable, offline_var
from helpers.common.paths import local_dir, restore_hint
from helpers.common.profiles import MAX_DRAFT_TOKENS
from helpers.eagle3.taps import (
    aux_layers_for,
    default_aux_layers,
    drafter_aux_layer_ids,
    num_hidden_layers,
)

__all__ = [
    "PairingReport",
    "PairingError",
    "HeaderError",
    "safetensors_header",
    "validate_pair",
    "edited_copy",
]

_ERROR = "error"
_WARNING = "warning"
#: fc inputs vLLM's Eagle3LlamaForCausalLM builds when the config names no count.
_VLLM_DEFAULT_NUM_AUX = 3

#: Bytes per element of each safetensors dtype (the format's own names).
_DTYPE_BYTES: dict[str, int] = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U64": 8,
    "U32": 4,
    "U16": 2,
    "U8": 1,
    "BOOL": 1,
}
_FLOAT_DTYPES = frozenset({"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2"})
_INT_DTYPES = frozenset({"I64", "I32", "I16", "I8", "U64", "U32", "U16", "U8"})

#: speculators `transformer_layer_config.model_type` -> the class vLLM builds (update_eagle3 in
#: transformers_utils/configs/speculators/algos.py; any other model_type is refused there).
_SPECULATORS_EAGLE3_LAYERS: dict[str, str] = {
    "llama": "Eagle3LlamaForCausalLM",
    "qwen3": "Eagle3Qwen3ForCausalLM",
}
#: EAGLE-3 architectures in vLLM's model registry -> the loader module that builds them
#: (tests/engine/test_pairing.py checks this copy against the installed registry).
_EAGLE3_ARCHITECTURES: dict[str, str] = {
    "Eagle3LlamaForCausalLM": "llama_eagle3",
    "LlamaForCausalLMEagle3": "llama_eagle3",
    "Eagle3MiniMaxM2ForCausalLM": "llama_eagle3",
    "Eagle3Qwen2_5vlForCausalLM": "llama_eagle3",
    "Eagle3Qwen3vlForCausalLM": "llama_eagle3",
    "PEagleDraftModel": "llama_eagle3",
    "PeagleLlamaForCausalLM": "llama_eagle3",
    "Eagle3Qwen3ForCausalLM": "qwen3_eagle3",
    "PeagleQwen3ForCausalLM": "qwen3_eagle3",
    "Eagle3DeepseekV2ForCausalLM": "deepseek_eagle3",
    "Eagle3DeepseekV3ForCausalLM": "deepseek_eagle3",
}
#: Head sizes vLLM's CPU attention backend runs (CPUAttentionBackend.get_supported_head_sizes;
#: tests/engine/test_pairing.py checks this copy against the installed vLLM).
_CPU_HEAD_SIZES: tuple[int, ...] = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)
#: Verifier config keys the checks need (top level or text_config).
_VERIFIER_KEYS: tuple[str, ...] = ("hidden_size", "vocab_size", "num_hidden_layers")
#: Drafter layer keys vLLM would otherwise take from LlamaConfig's defaults (a 7B Llama's sizes).
_DRAFTER_LAYER_KEYS: dict[str, int] = {
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "vocab_size": 32000,
}
#: Loaders whose tensor layout `expected_tensors` knows.
_KNOWN_LAYOUTS = ("llama_eagle3", "qwen3_eagle3")
#: A hub id: owner/name, each starting with a letter or digit (huggingface_hub's rules, roughly).
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}$")

#: Drafter decoder-layer keys the checks read, and what each must hold (in
#: transformer_layer_config for the speculators format, else at the top level). JSON null counts
#: as absent everywhere in a model config (vLLM then takes its default); presence is checked by
#: check_drafter_keys.
_DRAFTER_LAYER_SCHEMA: dict[str, str] = {
    **dict.fromkeys(_DRAFTER_LAYER_KEYS, "positive int or null"),
    "num_key_value_heads": "positive int or null",
    "head_dim": "positive int or null",
    "max_position_embeddings": "positive int or null",
    "num_aux_hidden_states": "positive int or null",
    "model_type": "string or null",
    "attention_bias": "bool or null",
    "norm_before_fc": "bool or null",
    "fc_norm": "bool or null",
    # what vLLM's llama/qwen3 EAGLE-3 layer reads besides the sizes (llama_eagle3.py, llama.py)
    "rms_norm_eps": "positive number or null",
    "rope_theta": "positive number or null",
    "rope_parameters": "object or null",
    "rope_parameters.rope_theta": "positive number or null",
    "rope_scaling": "object or null",
    "hidden_act": "string or null",
    "tie_word_embeddings": "bool or null",
}
#: Drafter top-level keys the checks read (with the parents of the nested ones).
_DRAFTER_TOP_SCHEMA: dict[str, str] = {
    "architectures": "list of strings or null",
    "speculators_model_type": "string or null",
    "speculators_config": "object or null",
    "speculators_config.proposal_methods": "list or null",
    "speculators_config.proposal_methods[0]": "object or null",
    "speculators_config.proposal_methods[0].speculative_tokens": "positive int or null",
    "speculators_config.verifier": "object or null",
    "speculators_config.verifier.name_or_path": "string or null",
    "speculators_config.verifier.architectures": "list of strings or null",
    "transformer_layer_config": "object or null",
    "target_hidden_size": "positive int or null",
    "draft_vocab_size": "positive int or null",
    "eagle_aux_hidden_state_layer_ids": "list of ints or null",
    "eagle_config": "object or null",
    "eagle_config.eagle_aux_hidden_state_layer_ids": "list of ints or null",
    "eagle_config.norm_before_fc": "bool or null",
    "eagle_config.fc_norm": "bool or null",
    "norm_before_fc": "bool or null",
    "fc_norm": "bool or null",
    "num_aux_hidden_states": "positive int or null",
    "norm_before_residual": "bool or null",
    "quantization_config": "object or null",
}
#: Verifier keys the checks read, at the top level only.
_VERIFIER_SCHEMA: dict[str, str] = {
    "architectures": "list of strings or null",
    "speculators_model_type": "string or null",
    "text_config": "object or null",
}
#: Verifier keys vLLM's decoder (qwen3_moe.py, qwen3.py, qwen2.py, llama.py) and its sampler read,
#: each at the top level, else in text_config (`_verifier_schema`): a string where vLLM multiplies
#: (rms_norm_eps "tiny") stopped the first generate with a TypeError.
_VERIFIER_MODEL_SCHEMA: dict[str, str] = {
    **dict.fromkeys(_VERIFIER_KEYS, "positive int or null"),
    "num_attention_heads": "positive int or null",
    "num_key_value_heads": "positive int or null",
    "head_dim": "positive int or null",
    "intermediate_size": "positive int or null",
    "moe_intermediate_size": "positive int or null",
    "num_experts": "positive int or null",
    "num_local_experts": "positive int or null",
    "num_experts_per_tok": "positive int or null",
    "decoder_sparse_step": "positive int or null",
    "mlp_only_layers": "list of ints or null",
    "norm_topk_prob": "bool or null",
    "max_position_embeddings": "positive int or null",
    "rms_norm_eps": "positive number or null",
    "rope_theta": "positive number or null",
    "rope_parameters": "object or null",
    "rope_parameters.rope_theta": "positive number or null",
    "rope_parameters.rope_type": "string or null",
    "rope_scaling": "object or null",
    "hidden_act": "string or null",
    "attention_bias": "bool or null",
    "tie_word_embeddings": "bool or null",
    "sliding_window": "positive int or null",
    "use_sliding_window": "bool or null",
    "bos_token_id": "token ids or null",
    "eos_token_id": "token ids or null",
    "pad_token_id": "token ids or null",
}
#: Activation names transformers builds (transformers.activations.ACT2CLS; tests/engine/
#: test_pairing.py checks this copy against the installed transformers).
_ACTIVATIONS: tuple[str, ...] = (
    "gelu",
    "gelu_10",
    "gelu_accurate",
    "gelu_fast",
    "gelu_new",
    "gelu_python",
    "gelu_python_tanh",
    "gelu_pytorch_tanh",
    "hardswish",
    "laplace",
    "leaky_relu",
    "linear",
    "mish",
    "prelu",
    "quick_gelu",
    "relu",
    "relu2",
    "relu6",
    "sigmoid",
    "silu",
    "sqrtsoftplus",
    "swish",
    "tanh",
    "xielu",
)
#: Verifier architectures whose vLLM MLPs run silu only: the dense ones raise "Unsupported
#: activation: X. Only silu is supported for now." and Qwen3-MoE's experts compute silu whatever
#: the config says. Every EAGLE-3 layer vLLM builds here (LlamaMLP) is the same.
_SILU_ONLY_ARCHITECTURES = frozenset(
    {"Qwen3MoeForCausalLM", "Qwen3ForCausalLM", "Qwen2ForCausalLM", "LlamaForCausalLM"}
)
#: The special-token roles a model's config and its tokenizer both name.
_TOKEN_ROLES: tuple[str, ...] = ("bos", "eos", "pad")
#: A chat template's control marker: `<|im_start|>`, `<|im_end|>`.
_MARKER = re.compile(r"<\|[^|<>\s]+\|>")


@dataclass(frozen=True)
class _Problem:
    """One thing wrong with a pairing: a stable code, a one-line message, error or warning."""

    code: str
    message: str
    severity: str = _ERROR

    def __str__(self) -> str:
        """`[error] code: message`."""
        return f"[{self.severity}] {self.code}: {self.message}"


@dataclass
class PairingReport:
    """What validate_pair found for one verifier/drafter pair."""

    verifier: str
    drafter: str
    aux_layers: tuple[int, ...] | None = None
    problems: list[_Problem] = field(default_factory=list)

    @property
    def errors(self) -> list[_Problem]:
        """Problems that would stop or break the run."""
        return [p for p in self.problems if p.severity == _ERROR]

    @property
    def warnings(self) -> list[_Problem]:
        """Problems worth a look that do not stop the run."""
        return [p for p in self.problems if p.severity == _WARNING]

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


class HeaderError(ValueError):
    """A safetensors file (or shard index) whose header is unreadable or disagrees with the file."""


# --------------------------------------------------------------------------- reading


def _entry_problem(name: str, entry: Any, data_bytes: int) -> str | None:
    """What is wrong with one header entry (dtype, shape, data_offsets vs the file), or None."""
    if not isinstance(entry, dict):
        return f"tensor {name!r} has no {{dtype, shape, data_offsets}} entry"
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if dtype not in _DTYPE_BYTES:
        return f"tensor {name!r} has unknown dtype {dtype!r}"
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        return f"tensor {name!r} has shape {shape!r}, not a list of sizes"
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(isinstance(o, int) for o in offsets)
    ):
        return f"tensor {name!r} has data_offsets {offsets!r}, not [begin, end]"
    begin, end = offsets
    need = math.prod(shape) * _DTYPE_BYTES[dtype]
    if end - begin != need:
        return (
            f"tensor {name!r} ({dtype} {shape}) needs {need:,} bytes but its data_offsets span "
            f"{end - begin:,}"
        )
    if not 0 <= begin <= end <= data_bytes:
        return (
            f"tensor {name!r} ends at byte {end:,} of the data but the file holds {data_bytes:,}: "
            f"the file is truncated"
        )
    return None


def safetensors_header(path: Path) -> dict[str, dict[str, Any]]:
    """Tensor name -> {dtype, shape, data_offsets} from a .safetensors file's JSON header.

    No tensor is read; the header is checked against the file's length (a truncated or garbage
    file raises HeaderError, naming the file, the first thing wrong and how to restore it).
    """
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise HeaderError(
                f"{path} has {size} bytes, fewer than the 8 that give a safetensors header's "
                f"length: {restore_hint(path)}"
            )
        (length,) = struct.unpack("<Q", head)
        if length > size - 8:
            raise HeaderError(
                f"{path}: its first 8 bytes announce a {length:,}-byte header but only "
                f"{size - 8:,} bytes follow (truncated, or not a safetensors file): "
                f"{restore_hint(path)}"
            )
        raw = f.read(length)
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise HeaderError(
            f"{path}: the header is not JSON ({type(err).__name__}), so this is no safetensors "
            f"file: {restore_hint(path)}"
        ) from None
    if not isinstance(header, dict):
        raise HeaderError(
            f"{path}: the header is a JSON {type(header).__name__}, not an object of tensors: "
            f"{restore_hint(path)}"
        )
    header.pop("__metadata__", None)
    data_bytes = size - 8 - length
    bad = [m for n, e in header.items() if (m := _entry_problem(n, e, data_bytes))]
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise HeaderError(f"{path}: {bad[0]}{more}: {restore_hint(path)}")
    layout = _layout_problem(header, data_bytes)
    if layout:
        raise HeaderError(f"{path}: {layout}: {restore_hint(path)}")
    return header


def _layout_problem(header: dict[str, dict[str, Any]], data_bytes: int) -> str | None:
    """What safetensors refuses in valid entries: gaps or overlaps between tensors, or data the
    header does not account for (the tensors must tile the data exactly); None when they do."""
    end = 0
    for name, entry in sorted(header.items(), key=lambda item: item[1]["data_offsets"]):
        begin = entry["data_offsets"][0]
        if begin != end:
            return (
                f"tensor {name!r} starts at byte {begin:,} of the data but the tensor before it "
                f"ends at {end:,}: the header's offsets leave a gap or overlap"
            )
        end = entry["data_offsets"][1]
    if end != data_bytes:
        return (
            f"the header's tensors cover {end:,} bytes of data but the file holds {data_bytes:,} "
            f"after its header: {data_bytes - end:,} bytes too many"
        )
    return None


def _shard_map(index: Path) -> dict[str, str]:
    """The weight_map of a sharded model's index (tensor -> shard file); HeaderError if
    unreadable."""
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map")
    except (UnicodeDecodeError, json.JSONDecodeError, AttributeError) as err:
        raise HeaderError(
            f"{index} is not a JSON object ({type(err).__name__}): {restore_hint(index)}"
        ) from None
    if not isinstance(weight_map, dict) or not weight_map:
        raise HeaderError(f"{index} has no weight_map of tensors to shards: {restore_hint(index)}")
    return weight_map


def _weight_index(folder: Path) -> dict[str, dict[str, Any]]:
    """Header entries of every tensor in a model folder (single file or sharded index)."""
    single = folder / "model.safetensors"
    if single.is_file():
        return safetensors_header(single)
    index = folder / "model.safetensors.index.json"
    if not index.is_file():
        raise FileNotFoundError(f"{folder} has no model.safetensors(.index.json)")
    weight_map = _shard_map(index)
    entries: dict[str, dict[str, Any]] = {}
    for shard in sorted(set(weight_map.values())):
        if not (folder / shard).is_file():
            raise HeaderError(
                f"{index} names shard {shard}, which is missing: {restore_hint(index)}"
            )
        entries.update(safetensors_header(folder / shard))
    absent = sorted(set(weight_map) - set(entries))
    if absent:
        raise HeaderError(
            f"{index} maps {len(absent)} tensor(s) to shards that do not hold them (first: "
            f"{absent[0]!r}): {restore_hint(index)}"
        )
    return entries


def _hub_weight_index(ref: str) -> dict[str, dict[str, Any]]:
    """Header entries of a hub model, via HTTP range reads of its safetensors headers only."""
    from huggingface_hub import get_safetensors_metadata

    var = offline_var()
    if var is not None or not hub_reachable():
        raise OSError(f"{var} is set" if var else "the hub does not answer (no network?)")
    meta = get_safetensors_metadata(ref)
    entries: dict[str, dict[str, Any]] = {}
    for file_meta in meta.files_metadata.values():
        for name, info in file_meta.tensors.items():
            entries[name] = {"dtype": info.dtype, "shape": list(info.shape)}
    return entries


def _drafter_weights(ref: str | Path) -> dict[str, dict[str, Any]]:
    """The drafter's tensor headers, local or (headers only) from the hub."""
    folder = local_dir(ref)
    return _weight_index(folder) if folder is not None else _hub_weight_index(str(ref))


def _local_tensor(ref: str | Path, name: str) -> Any:
    """One tensor's values (numpy) from a local model folder; None for hub models or if absent."""
    from safetensors import safe_open

    folder = local_dir(ref)
    if folder is None:
        return None
    path = folder / "model.safetensors"
    if not path.is_file():
        index = folder / "model.safetensors.index.json"
        shard = (
            json.loads(index.read_text(encoding="utf-8"))["weight_map"].get(name)
            if index.is_file()
            else None
        )
        if shard is None:
            return None
        path = folder / shard
    with safe_open(str(path), "np") as f:
        return f.get_tensor(name) if name in f.keys() else None


def _ref_problem(ref: str | Path, role: str) -> _Problem | None:
    """A local path that does not exist, or a name that is neither a folder nor a hub id: at
    once."""
    folder = local_dir(ref)
    if folder is None and isinstance(ref, Path):
        folder = ref  # a Path is always meant as a folder, even one that looks like owner/name
    if folder is not None:
        if folder.is_dir():
            return None
        return _error("path_missing", f"{role} folder {folder} does not exist: check the path")
    name = str(ref)
    if _HUB_ID.match(name) and ".." not in name and "--" not in name:
        return None
    return _error(
        "path_missing",
        f"{role} {name!r} is neither a folder here nor a hub id (owner/name): check the path "
        f"(relative paths start from {Path.cwd()}, or write data/... from the repo root)",
    )


def _drafter_schema(drafter: dict[str, Any]) -> dict[str, str]:
    """The drafter keys to type: the top level's, and the layer's where _layer_config finds
    it."""
    layer = drafter.get("transformer_layer_config")
    prefix = "transformer_layer_config." if isinstance(layer, dict) and layer else ""
    layer_keys = {f"{prefix}{k}": kind for k, kind in _DRAFTER_LAYER_SCHEMA.items()}
    return {**_DRAFTER_TOP_SCHEMA, **layer_keys}


def _verifier_schema(verifier: dict[str, Any]) -> dict[str, str]:
    """The verifier keys to type, each where _verifier_value reads it (top level, else
    text_config)."""
    text = verifier.get("text_config")
    nested = set(text) - set(verifier) if isinstance(text, dict) else set()
    model = {
        (f"text_config.{k}" if k.split(".")[0] in nested else k): kind
        for k, kind in _VERIFIER_MODEL_SCHEMA.items()
    }
    return {**_VERIFIER_SCHEMA, **model}


def _config_source(ref: str | Path, role: str) -> str:
    """How a message names a model's config: `drafter data/x/config.json`."""
    folder = local_dir(ref)
    where = folder / "config.json" if folder is not None else f"config.json of hub model {ref}"
    return f"{role} {where}"


def _schema_problems(ref: str | Path, role: str, config: dict[str, Any]) -> list[_Problem]:
    """One config_field_invalid error per key of the wrong type, naming the file and the key."""
    schema = _drafter_schema(config) if role == "drafter" else _verifier_schema(config)
    return [
        _error("config_field_invalid", line)
        for line in field_problems(config, schema, _config_source(ref, role))
    ]


def _read_role_config(ref: str | Path, role: str) -> tuple[dict[str, Any] | None, list[_Problem]]:
    """One model's config.json, or the one problem that stops reading it."""
    missing = _ref_problem(ref, role)
    if missing is not None:
        return None, [missing]
    try:
        config = read_config(ref)
    except FileNotFoundError as err:
        return None, [_error("config_unavailable", f"{role}: {err}")]
    except ValueError as err:  # read_config's one line: which file, and how to restore it
        return None, [_error("config_unreadable", f"{role}: {err}")]
    except OSError as err:
        return None, [_error("config_unavailable", f"{role}: cannot read config.json ({err})")]
    if not isinstance(config, dict):
        folder = local_dir(ref)
        where = folder / "config.json" if folder is not None else None
        return None, [
            _error(
                "config_not_object",
                f"{role} {where or f'{ref} config.json'} holds a JSON {type(config).__name__}, "
                f"not an object of settings: "
                f"{restore_hint(where) if where else 'download it again'}",
            )
        ]
    return config, []


# --------------------------------------------------------------------------- config helpers


def _is_eagle3_checkpoint(drafter: dict[str, Any]) -> bool:
    """True for an EAGLE-3 drafter (speculators eagle3, or an Eagle3 architecture)."""
    archs = drafter.get("architectures") or []
    by_arch = any("eagle3" in str(arch).lower() for arch in archs)
    return drafter.get("speculators_model_type") == "eagle3" or by_arch


def _layer_config(drafter: dict[str, Any]) -> dict[str, Any]:
    """The drafter's decoder-layer config (speculators transformer_layer_config, else the top)."""
    layer = drafter.get("transformer_layer_config")
    return layer if isinstance(layer, dict) and layer else drafter


def _verifier_value(verifier: dict[str, Any], key: str) -> Any:
    """A verifier setting from the top level, else from its text_config (multimodal configs)."""
    if key in verifier:
        return verifier[key]
    return (verifier.get("text_config") or {}).get(key)


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


def _is_positive_int(value: Any) -> bool:
    """True for an int > 0 (not a bool, not a string of digits)."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _is_token_id(value: Any) -> bool:
    """True for an int >= 0 (not a bool, not a string of digits)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


# --------------------------------------------------------------------------- checks

_Weights = dict[str, dict[str, Any]]


def _error(code: str, message: str) -> _Problem:
    """An error-severity Problem."""
    return _Problem(code, message, _ERROR)


def _warning(code: str, message: str) -> _Problem:
    """A warning-severity Problem."""
    return _Problem(code, message, _WARNING)


def _check_roles(verifier: dict[str, Any], drafter: dict[str, Any]) -> list[_Problem]:
    """0. The verifier must be a plain model and the drafter the EAGLE-3 head, not the reverse."""
    if not _is_eagle3_checkpoint(verifier):
        return []
    if not _is_eagle3_checkpoint(drafter):
        return [
            _error(
                "roles_swapped",
                "the verifier's config is an EAGLE-3 drafter's and the drafter's a plain "
                "model's: verifier and drafter are swapped; pass the verifier first",
            )
        ]
    return [
        _error(
            "verifier_is_a_drafter",
            "both configs are EAGLE-3 drafters: the verifier must be the model the drafter "
            "drafts for",
        )
    ]


def _check_verifier_keys(verifier: dict[str, Any]) -> list[_Problem]:
    """0. The verifier settings every check needs: hidden_size, vocab_size, num_hidden_layers."""
    bad = [k for k in _VERIFIER_KEYS if _verifier_value(verifier, k) is None]  # types: schema
    if not bad:
        return []
    return [
        _error(
            "verifier_config_incomplete",
            f"the verifier's config.json has no {', '.join(bad)}: is it a "
            f"decoder model's config.json?",
        )
    ]


def _check_drafter_keys(drafter: dict[str, Any]) -> list[_Problem]:
    """0. The drafter's layer sizes, which vLLM would otherwise take from a 7B Llama's defaults."""
    speculators = any(
        drafter.get(k) is not None for k in ("speculators_config", "speculators_model_type")
    )
    layer = drafter.get("transformer_layer_config") if speculators else drafter
    if speculators and not (isinstance(layer, dict) and layer):
        return [
            _error(
                "drafter_config_incomplete",
                "the drafter's speculators config has no transformer_layer_config: vLLM would "
                "build a layer from LlamaConfig's defaults (a 7B Llama's sizes); add it",
            )
        ]
    where = "transformer_layer_config" if speculators else "config.json"
    bad = [k for k in _DRAFTER_LAYER_KEYS if layer.get(k) is None]  # types: _drafter_schema
    if not bad:
        return []
    defaults = ", ".join(f"{k} {_DRAFTER_LAYER_KEYS[k]}" for k in bad)
    return [
        _error(
            "drafter_config_incomplete",
            f"the drafter's {where} has no {', '.join(bad)}: vLLM would build "
            f"LlamaConfig's defaults ({defaults}) and load the weights into the wrong shapes; "
            f"add them",
        )
    ]


def _check_method(drafter: dict[str, Any], method: str | None) -> list[_Problem]:
    """1. The speculative method must match the checkpoint kind (None: vLLM infers it)."""
    eagle3 = _is_eagle3_checkpoint(drafter)
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


def _vllm_architecture(drafter: dict[str, Any]) -> str | None:
    """The model class name vLLM builds for an EAGLE-3 drafter config (None: vLLM refuses it).

    speculators format: by `transformer_layer_config.model_type` (default llama); otherwise the
    first architecture, prefixed `Eagle3` unless it starts or ends with it (EAGLEConfig).
    """
    if drafter.get("speculators_config") is not None:
        model_type = _layer_config(drafter).get("model_type", "llama")
        return _SPECULATORS_EAGLE3_LAYERS.get(model_type)
    archs = drafter.get("architectures") or []
    if not archs:
        return None
    arch = str(archs[0])
    return arch if arch.startswith("Eagle3") or arch.endswith("Eagle3") else f"Eagle3{arch}"


def _check_architecture(drafter: dict[str, Any]) -> list[_Problem]:
    """1b. vLLM must have an EAGLE-3 class for the drafter (speculators layer type or
    architecture)."""
    if not _is_eagle3_checkpoint(drafter):
        return []  # check_method says so
    if drafter.get("speculators_config") is None and drafter.get("speculators_model_type"):
        return []  # check_speculators_fields says speculators_config is missing
    arch = _vllm_architecture(drafter)
    if arch in _EAGLE3_ARCHITECTURES:
        return []
    if drafter.get("speculators_config") is not None:
        model_type = _layer_config(drafter).get("model_type", "llama")
        return [
            _error(
                "drafter_arch_unsupported",
                f"transformer_layer_config.model_type {model_type!r}: vLLM's speculators EAGLE-3 "
                f"loader builds only {', '.join(sorted(_SPECULATORS_EAGLE3_LAYERS))} layers "
                f"('Unsupported model_type'); use one of those",
            )
        ]
    return [
        _error(
            "drafter_arch_unsupported",
            f"architectures {drafter.get('architectures')} become {arch!r} in vLLM, which has "
            f"no such EAGLE-3 class (it has {', '.join(sorted(_EAGLE3_ARCHITECTURES))}): "
            f"convert the drafter to the speculators format",
        )
    ]


def _speculators_gaps(drafter: dict[str, Any]) -> Iterator[str]:
    """The speculators fields vLLM reads that are missing or malformed, by their path."""
    spec = drafter.get("speculators_config")
    spec = spec if isinstance(spec, dict) else {}
    methods = spec.get("proposal_methods")
    first = methods[0] if isinstance(methods, list) and methods else None
    tokens = first.get("speculative_tokens") if isinstance(first, dict) else None
    if not _is_positive_int(tokens):
        yield "speculators_config.proposal_methods[0].speculative_tokens"
    verifier = spec.get("verifier")
    if not (isinstance(verifier, dict) and verifier.get("name_or_path")):
        yield "speculators_config.verifier.name_or_path"


def _check_speculators_fields(drafter: dict[str, Any]) -> list[_Problem]:
    """1c. The speculators-format fields vLLM reads (SpeculatorsConfig), one problem per gap."""
    if drafter.get("speculators_config") is None:
        if drafter.get("speculators_model_type") is None:
            return []  # not the speculators format: vLLM reads its architectures instead
        return [
            _error(
                "speculators_field_missing",
                "speculators_model_type is set but speculators_config is missing: vLLM only "
                "reads the speculators format when speculators_config is there; add it",
            )
        ]
    return [
        _error(
            "speculators_field_missing",
            f"{path} is missing or malformed: vLLM's SpeculatorsConfig reads it (without it vLLM "
            f"stops with 'Invalid speculators config structure', or builds a default-sized layer); "
            f"add it",
        )
        for path in _speculators_gaps(drafter)
    ]


def _head_dim(layer: dict[str, Any]) -> int:
    """The drafter's head_dim (LlamaConfig: hidden_size // num_attention_heads when unset)."""
    return int(layer.get("head_dim") or layer["hidden_size"] // layer["num_attention_heads"])


def _check_device(drafter: dict[str, Any], gpu: bool) -> list[_Problem]:
    """1d. On a CPU, vLLM's attention backend runs only some head sizes (CPU_HEAD_SIZES)."""
    if gpu:
        return []
    head_dim = _head_dim(_layer_config(drafter))
    if head_dim in _CPU_HEAD_SIZES:
        return []
    return [
        _error(
            "head_dim_unsupported_on_cpu",
            f"drafter head_dim {head_dim}: vLLM's CPU attention runs head sizes "
            f"{list(_CPU_HEAD_SIZES)} only; choose num_attention_heads so that head_dim is one "
            f"of them, or run on a GPU",
        )
    ]


def _check_hidden_sizes(verifier: dict[str, Any], drafter: dict[str, Any]) -> list[_Problem]:
    """2. Drafter hidden_size and target_hidden_size must equal the verifier's hidden_size."""
    hidden = _verifier_value(verifier, "hidden_size")
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
    own = _layer_config(drafter).get("hidden_size")
    if own is not None and own != hidden:
        problems.append(
            _error(
                "drafter_hidden_size_mismatch",
                f"drafter hidden_size {own} ≠ verifier hidden_size {hidden}: it reuses the "
                f"verifier's embeddings, so train it at hidden_size {hidden}",
            )
        )
    return problems


def _check_fc(
    verifier: dict[str, Any],
    drafter: dict[str, Any],
    weights: _Weights,
    aux_layers: tuple[int, ...] | None,
) -> list[_Problem]:
    """3. fc.weight must take (number of aux layers) × verifier hidden_size inputs."""
    shape = _shape(weights, "fc.weight")
    if shape is None:
        return [
            _error(
                "fc_missing",
                "drafter weights have no fc.weight: not a speculators-format EAGLE-3 drafter",
            )
        ]
    if len(shape) != 2:
        return []  # check_tensors names the rank
    hidden, fan_in = _verifier_value(verifier, "hidden_size"), shape[1]
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


def _check_fc_declared(drafter: dict[str, Any], fan_in: int, hidden: int) -> list[_Problem]:
    """vLLM's llama EAGLE-3 head sizes fc for 3 taps unless num_aux_hidden_states says otherwise."""
    layer_cfg = _layer_config(drafter)
    declared = layer_cfg.get("num_aux_hidden_states") or drafter.get("num_aux_hidden_states")
    n_fc = fan_in // hidden if fan_in % hidden == 0 else None
    is_llama_head = layer_cfg.get("model_type", "llama") == "llama"
    if not is_llama_head or declared or n_fc in (None, _VLLM_DEFAULT_NUM_AUX):
        return []
    return [
        _error(
            "fc_aux_count_undeclared",
            f"fc.weight is built for {n_fc} aux layers but vLLM's llama EAGLE-3 head assumes "
            f'{_VLLM_DEFAULT_NUM_AUX}: add "num_aux_hidden_states": {n_fc} to '
            f"transformer_layer_config",
        )
    ]


def _draft_vocab(verifier: dict[str, Any], drafter: dict[str, Any]) -> int:
    """The draft vocabulary size (draft_vocab_size, else the verifier's vocabulary)."""
    return drafter.get("draft_vocab_size") or _verifier_value(verifier, "vocab_size")


def _check_vocab(
    verifier: dict[str, Any], drafter: dict[str, Any], weights: _Weights
) -> list[_Problem]:
    """4. Vocab sizes, lm_head rows, and the d2t/t2d maps of a reduced draft vocab."""
    vocab = _verifier_value(verifier, "vocab_size")
    problems = []
    own = _layer_config(drafter).get("vocab_size")
    if own is not None and own != vocab:
        problems.append(
            _error(
                "vocab_size_mismatch",
                f"drafter vocab_size {own} ≠ verifier vocab_size {vocab}: it was trained "
                f"with another tokenizer; use a drafter made for this verifier",
            )
        )
    draft_vocab = _draft_vocab(verifier, drafter)
    if draft_vocab > vocab:
        problems.append(
            _error(
                "draft_vocab_too_large",
                f"draft_vocab_size {draft_vocab} > verifier vocab_size {vocab}: the draft "
                f"vocabulary must be a subset of the verifier's",
            )
        )
    lm_head = _shape(weights, "lm_head.weight")
    if lm_head is not None and lm_head[:1] != (draft_vocab,):
        problems.append(
            _error(
                "lm_head_rows_mismatch",
                f"drafter lm_head.weight has {lm_head[0] if lm_head else 0} rows but "
                f"draft_vocab_size is {draft_vocab}: fix draft_vocab_size in the drafter's "
                f"config.json",
            )
        )
    if lm_head is None and draft_vocab < vocab:
        problems.append(
            _error(
                "lm_head_missing",
                f"no lm_head.weight for a reduced draft vocabulary ({draft_vocab} < {vocab}): "
                f"vLLM would share the verifier's {vocab}-row lm_head and fail to map its "
                f"logits; export the drafter's lm_head",
            )
        )
    if draft_vocab < vocab:
        problems += _check_vocab_maps(weights, draft_vocab, vocab)
    elif _shape(weights, "d2t") is not None:
        problems.append(
            _error(
                "d2t_unexpected",
                f"d2t is present but the draft vocabulary is the verifier's ({vocab}): vLLM "
                f"builds no draft-to-target map then, and one vLLM (helpers.engine.compat."
                f"FEATURES['full_vocab_d2t']) stops with 'no module or parameter named "
                f"draft_id_to_target_id'; drop d2t or set draft_vocab_size",
            )
        )
    return problems


def _check_vocab_maps(weights: _Weights, draft_vocab: int, vocab: int) -> list[_Problem]:
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


# --------------------------------------------------------------------------- every tensor


@dataclass(frozen=True)
class _ExpectedTensor:
    """A tensor vLLM's EAGLE-3 loader takes: the shape the config implies, whether it must be
    there, and how that shape follows from the config (for the error message)."""

    shape: tuple[int, ...]
    required: bool
    why: str
    #: Dimensions another check already reports (fc's fan-in, lm_head's rows): not repeated here.
    checked_elsewhere: tuple[int, ...] = ()


def _layer_prefixes(weights: _Weights, n_layers: int) -> list[str]:
    """The name prefix of each drafter layer: `midlayer.` or `layers.0.` for the first, then
    `layers.i.`."""
    first = "midlayer." if any(n.startswith("midlayer.") for n in weights) else "layers.0."
    return [first] + [f"layers.{i}." for i in range(1, n_layers)]


def _expected_tensors(
    verifier: dict[str, Any], drafter: dict[str, Any], weights: _Weights
) -> dict[str, _ExpectedTensor]:
    """Every tensor the drafter's loader (llama or qwen3 EAGLE-3 layers) takes, with its shape.

    Attention projections are heads × head_dim wide; the first layer reads 2 × hidden inputs
    (token embedding ‖ fused hidden state), later layers hidden; fc maps n_aux × target_hidden to
    hidden; lm_head has draft_vocab rows. lm_head, embed_tokens and d2t may be absent (vLLM then
    shares the verifier's or builds no map); check_vocab decides when that is wrong.
    """
    layer = _layer_config(drafter)
    h, heads = layer["hidden_size"], layer["num_attention_heads"]
    kv_heads = layer.get("num_key_value_heads") or heads
    hd, inter = _head_dim(layer), layer["intermediate_size"]
    q, kv = heads * hd, kv_heads * hd
    qwen3 = _EAGLE3_ARCHITECTURES.get(_vllm_architecture(drafter) or "") == "qwen3_eagle3"
    target = drafter.get("target_hidden_size") or h
    n_aux = len(_intended_aux_layers(verifier, drafter))
    spec: dict[str, _ExpectedTensor] = {
        "fc.weight": _ExpectedTensor(
            (h, n_aux * target), True, f"[hidden {h}, {n_aux} aux × {target}]", (1,)
        ),
        "norm.weight": _ExpectedTensor((h,), True, f"[hidden {h}]"),
        "lm_head.weight": _ExpectedTensor(
            (_draft_vocab(verifier, drafter), h), False, f"[draft vocab, hidden {h}]", (0,)
        ),
        "embed_tokens.weight": _ExpectedTensor(
            (layer["vocab_size"], h), False, f"[vocab {layer['vocab_size']}, hidden {h}]"
        ),
    }
    if _eagle_config_flag(drafter, "norm_before_fc"):
        spec["input_norm.weight"] = _ExpectedTensor(
            (n_aux * target,), True, f"[{n_aux} aux × {target}] (norm_before_fc)"
        )
    if _eagle_config_flag(drafter, "fc_norm"):
        for i in range(n_aux):
            spec[f"fc_norm.{i}.weight"] = _ExpectedTensor((target,), True, f"[{target}] (fc_norm)")
    bias = bool(layer.get("attention_bias"))
    for i, prefix in enumerate(_layer_prefixes(weights, layer["num_hidden_layers"])):
        fan_in = 2 * h if i == 0 else h
        src = f"2 × hidden {h}" if i == 0 else f"hidden {h}"
        proj = {
            "self_attn.q_proj": (q, fan_in, f"[{heads} heads × head_dim {hd}, {src}]"),
            "self_attn.k_proj": (kv, fan_in, f"[{kv_heads} kv heads × head_dim {hd}, {src}]"),
            "self_attn.v_proj": (kv, fan_in, f"[{kv_heads} kv heads × head_dim {hd}, {src}]"),
            "self_attn.o_proj": (h, q, f"[hidden {h}, {heads} heads × head_dim {hd}]"),
            "mlp.gate_proj": (inter, h, f"[intermediate {inter}, hidden {h}]"),
            "mlp.up_proj": (inter, h, f"[intermediate {inter}, hidden {h}]"),
            "mlp.down_proj": (h, inter, f"[hidden {h}, intermediate {inter}]"),
        }
        for name, (rows, cols, why) in proj.items():
            spec[f"{prefix}{name}.weight"] = _ExpectedTensor((rows, cols), True, why)
        if bias:
            for name in ("q_proj", "k_proj", "v_proj"):
                rows = proj[f"self_attn.{name}"][0]
                spec[f"{prefix}self_attn.{name}.bias"] = _ExpectedTensor(
                    (rows,), True, f"[{rows}] (attention_bias)"
                )
        for norm in ("input_layernorm", "post_attention_layernorm", "hidden_norm"):
            # hidden_norm exists in every layer but only the first one reads it
            needed = norm != "hidden_norm" or i == 0
            spec[f"{prefix}{norm}.weight"] = _ExpectedTensor((h,), needed, f"[hidden {h}]")
        if qwen3:
            for norm in ("q_norm", "k_norm"):
                spec[f"{prefix}self_attn.{norm}.weight"] = _ExpectedTensor(
                    (hd,), True, f"[head_dim {hd}] (Qwen3 attention)"
                )
    return spec


def _eagle_config_flag(drafter: dict[str, Any], name: str) -> bool:
    """A boolean EAGLE-3 option as vLLM reads it: eagle_config, else top level, else the layer."""
    eagle = drafter.get("eagle_config") or {}
    if name in eagle:
        return bool(eagle[name])
    return bool(drafter.get(name, _layer_config(drafter).get(name, False)))


#: Names vLLM's EAGLE-3 loader drops without a word, or with a warning (not errors).
_DROPPED_QUIETLY = (".rotary_emb.inv_freq", "t2d", "d2t")


def _unexpected(name: str, drafter: dict[str, Any]) -> _Problem | None:
    """What vLLM's loader does with a tensor it has no parameter for: drop it (warning) or stop."""
    if any(name.endswith(s) for s in _DROPPED_QUIETLY):
        return None
    if name == "mask_hidden" or name.endswith(".bias"):
        return _warning(
            "tensor_ignored",
            f"{name}: vLLM's EAGLE-3 loader skips it (no parallel drafting / attention_bias "
            f"configured), so what it learned is lost; set the config option it belongs to or "
            f"drop it",
        )
    if name == "input_norm.weight":
        return _error(
            "tensor_ignored",
            f"{name} is in the weights but norm_before_fc is not set: vLLM drops it and the "
            f"drafter runs without the norm it was trained with; set norm_before_fc: true",
        )
    return _error(
        "tensor_unexpected",
        f"{name}: vLLM's EAGLE-3 loader has no parameter for it and stops with 'There is no "
        f"module or parameter named ...'; check the config (layers, norms) or drop it",
    )


def _int_dtype_max(dtype: str) -> int:
    """The largest value an integer safetensors dtype holds: I8 127, U8 255, I64 2**63 - 1."""
    bits = 8 * _DTYPE_BYTES[dtype]
    return 2 ** (bits - 1) - 1 if dtype.startswith("I") else 2**bits - 1


def _dtype_problem(name: str, dtype: str, vocab: int) -> _Problem | None:
    """A weight stored as integers, or a d2t that cannot hold every offset into the vocabulary.

    vLLM builds draft_id_to_target_id as a torch.long parameter and loads d2t into it with
    `param.data.copy_` (default_weight_loader), which casts any dtype without a word: a float map
    is truncated, and an integer dtype narrower than the offsets (up to vocab - 1) held wrong
    values since its export.
    """
    if name == "d2t" and (dtype not in _INT_DTYPES or _int_dtype_max(dtype) < vocab - 1):
        return _error(
            "tensor_dtype_mismatch",
            f"d2t is {dtype}, which cannot hold its integer offsets (target id = draft id + "
            f"d2t[draft id], up to {vocab - 1} for this vocabulary): vLLM casts it into its int64 "
            f"draft_id_to_target_id without a word, so the map is wrong; re-export it as int64",
        )
    if name not in ("d2t", "t2d") and dtype not in _FLOAT_DTYPES:
        return _error(
            "tensor_dtype_mismatch",
            f"{name} is {dtype}, not a floating-point weight: re-export the drafter",
        )
    return None


def _shape_problem(name: str, got: tuple[int, ...], want: _ExpectedTensor) -> _Problem | None:
    """A tensor whose shape differs from the config's, outside dimensions other checks own."""
    if len(got) != len(want.shape):
        bad = True
    else:
        bad = any(
            g != w
            for i, (g, w) in enumerate(zip(got, want.shape))
            if i not in want.checked_elsewhere
        )
    if not bad:
        return None
    return _error(
        "tensor_shape_mismatch",
        f"{name} has shape {list(got)} but the config implies {list(want.shape)} = {want.why}: "
        f"the config and the weights disagree; fix the config (or re-export)",
    )


def _check_tensors(
    verifier: dict[str, Any], drafter: dict[str, Any], weights: _Weights
) -> list[_Problem]:
    """5. Every tensor in the header against the loader's layout: missing, unexpected, shape,
    dtype."""
    arch = _vllm_architecture(drafter)
    if _EAGLE3_ARCHITECTURES.get(arch or "") not in _KNOWN_LAYOUTS:
        return []  # check_architecture names an unsupported class; others' layouts are not modelled
    if drafter.get("quantization_config"):
        return []  # quantized weights add scale tensors this layout does not model
    spec = _expected_tensors(verifier, drafter, weights)
    problems = []
    for name, want in spec.items():
        if name not in weights and want.required and name != "fc.weight":  # check_fc: fc_missing
            problems.append(
                _error(
                    "tensor_missing",
                    f"{name} {want.why} is not in the weights: vLLM would leave it at its "
                    f"initial values without a word; re-export the drafter",
                )
            )
    for name, entry in weights.items():
        want = spec.get(name)
        found = _unexpected(name, drafter) if want is None else None
        found = found or _dtype_problem(
            name, str(entry.get("dtype", "")), _verifier_value(verifier, "vocab_size")
        )
        if found is None and want is not None:
            found = _shape_problem(name, tuple(entry["shape"]), want)
        if found is not None:
            problems.append(found)
    return problems


def _check_d2t_values(d2t: Any, vocab: int) -> list[_Problem]:
    """d2t holds offsets (vLLM: target id = draft id + d2t[draft id]): every target inside the
    vocab."""
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


def _check_aux_layer_ids(
    verifier: dict[str, Any], drafter: dict[str, Any]
) -> tuple[tuple[int, ...] | None, list[_Problem]]:
    """6. Aux layer ids (drafter override, else (2, L//2, L-3)) must be distinct and < L.

    A drafter that names no ids gets vLLM's default taps, whatever it was trained on: a warning
    (vLLM PR #50170 measured a silent collapse to 1.2 % acceptance that way).
    """
    try:
        layers = aux_layers_for(verifier, drafter)
    except ValueError as err:
        return None, [_error("aux_layers_invalid", str(err))]
    if drafter_aux_layer_ids(drafter) is not None:
        return layers, []
    return layers, [
        _warning(
            "aux_layers_defaulted",
            f"the drafter's config names no eagle_aux_hidden_state_layer_ids, so vLLM taps its "
            f"default {layers}: if the drafter was trained on other layers, acceptance collapses "
            f"without an error (vLLM PR #50170); pin the ids it was trained on",
        )
    ]


def _check_max_model_len(drafter: dict[str, Any], max_model_len: int | None) -> list[_Problem]:
    """7. max_model_len beyond the drafter's trained positions: a warning.

    A vLLM with `helpers.engine.compat.FEATURES["draft_positions_stretched"]` raises the drafter's
    max_position_embeddings to max_model_len by itself (it only logs it), so nothing crashes; but
    the drafter never saw those positions, so acceptance can fall on long contexts.
    """
    limit = _layer_config(drafter).get("max_position_embeddings")
    if max_model_len is None or limit is None or max_model_len <= limit:
        return []
    return [
        _warning(
            "max_model_len_exceeds_drafter",
            f"max_model_len {max_model_len} > drafter max_position_embeddings {limit}: vLLM "
            "stretches "
            f"the drafter, but positions past {limit} were never trained; expect lower acceptance "
            "there",
        )
    ]


def _check_verifier_name(
    verifier: dict[str, Any], drafter: dict[str, Any], used: str
) -> list[_Problem]:
    """8. The drafter's recorded verifier vs the one used (warnings; names compared by basename)."""
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


def _check_k(drafter: dict[str, Any], k: int | None, max_model_len: int | None) -> list[_Problem]:
    """9. Draft tokens per step: what vLLM verifies (its rejection sampler's MAX_SPEC_LEN) and
    what fits a request's context beside a prompt."""
    if k is None:
        return []
    methods = ((drafter.get("speculators_config") or {}).get("proposal_methods")) or [{}]
    trained = methods[0].get("speculative_tokens") if isinstance(methods[0], dict) else None
    for_this = f": this drafter's config proposes {trained}" if trained else ""
    if not 1 <= k <= MAX_DRAFT_TOKENS:
        return [
            _error(
                "k_out_of_range",
                f"k = {k:,} draft tokens per step: vLLM verifies at most {MAX_DRAFT_TOKENS} (its "
                f"rejection sampler's MAX_SPEC_LEN) and past that stops with a bare "
                f"AssertionError at the first step; use 1 to {MAX_DRAFT_TOKENS} (EAGLE-3 drafters "
                f"are trained for a few{for_this})",
            )
        ]
    if max_model_len is not None and k + 1 >= max_model_len:
        return [
            _error(
                "k_out_of_range",
                f"k = {k}: a verify step holds k + 1 = {k + 1} tokens, which leaves no room for a "
                f"prompt in max_model_len {max_model_len}; use a smaller k (EAGLE-3 drafters are "
                f"trained for a few{for_this})",
            )
        ]
    return []


def _activation_problem(role: str, act: Any, silu_only: str | None) -> _Problem | None:
    """A hidden_act transformers does not know, or not silu where vLLM runs silu only (`silu_only`
    says which of its classes, and how it fails)."""
    if act is None or (act == "silu" or (silu_only is None and act in _ACTIVATIONS)):
        return None
    if act not in _ACTIVATIONS:
        why = (
            f"is no activation transformers knows (it has {len(_ACTIVATIONS)}, e.g. silu, gelu, "
            f"relu): building the model stops with a KeyError"
        )
    else:
        why = f"is not what vLLM runs: {silu_only}"
    return _error("hidden_act_unsupported", f"the {role}'s hidden_act {act!r} {why}; use silu")


def _check_activations(verifier: dict[str, Any], drafter: dict[str, Any]) -> list[_Problem]:
    """10. hidden_act of both models: one transformers knows, and silu where vLLM runs only silu
    (its Qwen3-MoE experts compute silu whatever the config says)."""
    archs = _verifier_value(verifier, "architectures") or []
    arch = str(archs[0]) if archs else ""
    silu_only = (
        f"its {arch} runs silu only (a dense MLP stops with 'Unsupported activation', MoE experts "
        f"compute silu whatever the config says)"
        if arch in _SILU_ONLY_ARCHITECTURES
        else None
    )
    layer = (
        f"its EAGLE-3 layer ({_vllm_architecture(drafter) or 'LlamaMLP'}) runs silu only and stops "
        f"with 'Unsupported activation'"
    )
    found = [
        _activation_problem("verifier", _verifier_value(verifier, "hidden_act"), silu_only),
        _activation_problem("drafter", _layer_config(drafter).get("hidden_act"), layer),
    ]
    return [p for p in found if p is not None]


def _check_verifier_shape(verifier: dict[str, Any]) -> list[_Problem]:
    """11. Verifier sizes that must agree with each other: experts per token within the experts,
    attention heads in whole groups of key/value heads."""
    problems = []
    experts = _verifier_value(verifier, "num_experts") or _verifier_value(
        verifier, "num_local_experts"
    )
    per_token = _verifier_value(verifier, "num_experts_per_tok")
    if experts and per_token and per_token > experts:
        problems.append(
            _error(
                "verifier_config_invalid",
                f"the verifier's num_experts_per_tok {per_token} > its {experts} experts: the "
                f"router cannot pick that many (torch.topk fails inside vLLM); fix the config",
            )
        )
    heads = _verifier_value(verifier, "num_attention_heads")
    kv_heads = _verifier_value(verifier, "num_key_value_heads")
    if heads and kv_heads and heads % kv_heads:
        problems.append(
            _error(
                "verifier_config_invalid",
                f"the verifier's num_attention_heads {heads} is no multiple of its "
                f"num_key_value_heads {kv_heads}: grouped attention needs whole groups; fix the "
                f"config",
            )
        )
    return problems


# --------------------------------------------------------------------------- the tokenizer


def _model_file(ref: str | Path, name: str) -> Path | None:
    """One file of a model or tokenizer folder: local, or a hub model's cached copy (never the
    network); None when it is not there."""
    folder = local_dir(ref)
    if folder is not None:
        return folder / name if (folder / name).is_file() else None
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(str(ref), name)
    except Exception:  # an id the cache cannot even name
        return None
    return Path(found) if isinstance(found, str) else None


def _tokenizer_problem(path: Path, what: str) -> _Problem:
    """A tokenizer.json that is no tokenizer: one error naming it and how to restore it."""
    return _error("tokenizer_invalid", f"{path} {what}: {restore_hint(path)}")


def _read_tokens(path: Path) -> tuple[dict[int, str], set[int]] | _Problem:
    """(id -> token, the added tokens' ids) of a tokenizer.json, or the problem that stops it:
    not JSON, no model.vocab, no added_tokens list (transformers: KeyError), an id that is no
    integer."""
    try:
        tokenizer = read_json(path)
    except (OSError, ValueError) as err:
        return _error("tokenizer_invalid", str(err))
    if not isinstance(tokenizer, dict):
        return _tokenizer_problem(path, f"holds a JSON {type(tokenizer).__name__}, not a tokenizer")
    model = tokenizer.get("model")
    vocab = model.get("vocab") if isinstance(model, dict) else None
    if not isinstance(vocab, (dict, list)):
        return _tokenizer_problem(path, "has no model.vocab: it is no tokenizer (or an empty one)")
    added = tokenizer.get("added_tokens")
    if not isinstance(added, list):
        return _tokenizer_problem(
            path, "has no added_tokens list (transformers stops with KeyError: 'added_tokens')"
        )
    if isinstance(vocab, dict):
        pieces = list(vocab.items())
    else:  # a Unigram model: [[piece, score], ...], the id is the place
        pieces = [(e[0] if isinstance(e, list) and e else e, n) for n, e in enumerate(vocab)]
    tokens: dict[int, str] = {}
    for piece, token_id in pieces:
        if not _is_token_id(token_id):
            return _tokenizer_problem(
                path, f"has model.vocab id {token_id!r} of {piece!r}, not an integer >= 0"
            )
        tokens[token_id] = str(piece)
    added_ids = set()
    for n, item in enumerate(added):
        token_id = item.get("id") if isinstance(item, dict) else None
        content = item.get("content") if isinstance(item, dict) else None
        if not isinstance(content, str) or not _is_token_id(token_id):
            return _tokenizer_problem(path, f"has added_tokens item {n} without an id and content")
        tokens[token_id] = content
        added_ids.add(token_id)
    return tokens, added_ids


def _named_token(value: Any) -> str | None:
    """The text of a special token as tokenizer_config.json names it (a string or {content})."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value else None


def _role_ids(configs: list[tuple[str, dict[str, Any]]], role: str) -> list[tuple[str, list]]:
    """(where, ids) for every config that sets `role`_token_id (an id or a list of ids)."""
    found = []
    for where, config in configs:
        value = _verifier_value(config, f"{role}_token_id")
        if value is not None:
            found.append((where, value if isinstance(value, list) else [value]))
    return found


def _special_token_problems(
    tokens: dict[int, str],
    added: set[int],
    configs: list[tuple[str, dict[str, Any]]],
    named: dict[str, Any],
) -> list[_Problem]:
    """The special-token ids the model's configs use must be special tokens of the tokenizer, and
    the tokenizer's own special tokens among them: else the two number the vocabulary apart."""
    problems: list[_Problem] = []
    by_text = {text: token_id for token_id, text in tokens.items()}
    for role in _TOKEN_ROLES:
        text = _named_token(named.get(f"{role}_token"))
        own = by_text.get(text) if text else None
        mine = (
            f", while its {role} token {text!r} (tokenizer_config.json) is id {own}" if text else ""
        )
        for where, ids in _role_ids(configs, role):
            ordinary = [i for i in ids if i in tokens and added and i not in added]
            if ordinary:
                problems.append(
                    _error(
                        "special_token_mismatch",
                        f"{where}'s {role}_token_id is {ids[0] if len(ids) == 1 else ids}, which "
                        f"the tokenizer gives to {tokens[ordinary[0]]!r}, an ordinary piece{mine}: "
                        f"tokenizer and model number the vocabulary differently (a shuffled or "
                        f"another model's tokenizer), so every token reaches the wrong embedding "
                        f"row; use the model's own tokenizer",
                    )
                )
            elif own is not None and own not in ids and not ordinary:
                problems.append(
                    _error(
                        "special_token_mismatch",
                        f"{where}'s {role}_token_id is {ids[0] if len(ids) == 1 else ids}{mine}: "
                        f"tokenizer and model disagree on the {role} token; use the model's own "
                        f"tokenizer",
                    )
                )
    if len(problems) > 1:
        first = problems[0]
        more = f" ({len(problems) - 1} more special-token id(s) disagree the same way)"
        return [_error(first.code, first.message + more)]
    return problems


def _template_problems(
    template_files: list[Path], named: dict[str, Any], tokens: dict[int, str], added: set[int]
) -> list[_Problem]:
    """Every control marker a chat template writes (`<|im_start|>`) must be a special token of
    the tokenizer, or the model never sees it as one."""
    specials = {tokens[i] for i in added}
    sources = [(str(path), path.read_text(encoding="utf-8")) for path in template_files]
    inline = named.get("chat_template")
    if isinstance(inline, str):
        sources.append(("tokenizer_config.json's chat_template", inline))
    problems = []
    for where, template in sources:
        missing = sorted(set(_MARKER.findall(template)) - specials)
        if missing and added:
            problems.append(
                _error(
                    "chat_template_token_missing",
                    f"{where} writes {', '.join(map(repr, missing))} but the tokenizer has no such "
                    f"special token: the marker becomes ordinary pieces and the model never sees "
                    f"the turn it was trained on; use the tokenizer and template of one model",
                )
            )
    return problems


def _check_tokenizer(
    verifier: dict[str, Any], model: str | Path, tokenizer: str | Path
) -> list[_Problem]:
    """12. The tokenizer against the model: content transformers needs, no id past the model's
    vocab_size, special tokens and chat-template markers at the ids the model uses. Skipped when
    the tokenizer is not at hand (a hub model not in the cache)."""
    path = _model_file(tokenizer, "tokenizer.json")
    if path is None:
        return []
    read = _read_tokens(path)
    if isinstance(read, _Problem):
        return [read]
    tokens, added = read
    size, vocab = max(tokens, default=-1) + 1, _verifier_value(verifier, "vocab_size")
    if size > vocab:
        return [
            _error(
                "tokenizer_vocab_mismatch",
                f"tokenizer {path} has {size:,} ids (up to {size - 1:,}) but the verifier's "
                f"vocab_size is {vocab:,}: a token past {vocab - 1:,} indexes past the model's "
                f"embedding (vLLM stops with IndexError); use the tokenizer the model was "
                f"trained with",
            )
        ]
    configs = [("config.json", verifier)]
    generation = _model_file(model, "generation_config.json")
    if generation is not None:
        try:
            loaded = read_json(generation)
        except (OSError, ValueError) as err:
            return [_error("config_unreadable", f"verifier: {err}")]
        if isinstance(loaded, dict):
            configs.append(("generation_config.json", loaded))
    named_path = _model_file(tokenizer, "tokenizer_config.json")
    named = read_json(named_path) if named_path is not None else {}
    named = named if isinstance(named, dict) else {}
    template = _model_file(tokenizer, "chat_template.jinja")
    return _special_token_problems(tokens, added, configs, named) + _template_problems(
        [template] if template else [], named, tokens, added
    )


# --------------------------------------------------------------------------- entry points


def _read_weights(drafter: str | Path) -> tuple[_Weights | None, list[_Problem]]:
    """The drafter's tensor headers; a damaged file is an error, an absent one a warning."""
    try:
        return _drafter_weights(drafter), []
    except HeaderError as err:
        return None, [
            _error("weights_corrupt", f"{err}; no tensor of the drafter could be checked")
        ]
    except Exception as err:
        return None, [
            _warning(
                "weights_unreadable",
                f"cannot read the drafter's safetensors headers ({err}): fc, lm_head and "
                f"d2t not checked",
            )
        ]


def _config_problems(
    verifier: str | Path, drafter: str | Path
) -> tuple[dict[str, Any] | None, dict[str, Any] | None, list[_Problem]]:
    """Both configs read and sane enough to check (roles, keys), or the problems that stop it."""
    v_cfg, v_problems = _read_role_config(verifier, "verifier")
    d_cfg, d_problems = _read_role_config(drafter, "drafter")
    problems = v_problems + d_problems
    if v_cfg is None or d_cfg is None:
        return None, None, problems
    problems = _schema_problems(verifier, "verifier", v_cfg)
    problems += _schema_problems(drafter, "drafter", d_cfg)
    if problems:  # every check below trusts the types
        return None, None, problems
    problems = _check_roles(v_cfg, d_cfg) or _check_verifier_keys(v_cfg) + _check_drafter_keys(
        d_cfg
    )
    return (None, None, problems) if problems else (v_cfg, d_cfg, [])


def validate_pair(
    verifier: str | Path,
    drafter: str | Path,
    method: str | None = "eagle3",
    max_model_len: int | None = None,
    verifier_name: str | None = None,
    gpu: bool | None = None,
    k: int | None = None,
    tokenizer: str | Path | None = None,
) -> PairingReport:
    """Run every check on a verifier/drafter pair: configs, every tensor header, a local d2t's
    values, k (None: not checked), and the tokenizer (None: the verifier's own) against the model.

    `gpu` picks the device checks (None: a GPU when nvidia-smi lists one). Never raises: what
    stops the checks (a missing folder, an unreadable config, a key of the wrong type) is in the
    report, and so is anything unforeseen (one check_crashed error naming both configs).
    """
    report = PairingReport(verifier=str(verifier), drafter=str(drafter))
    checks = _Checks(method, max_model_len, verifier_name, gpu, k, tokenizer)
    try:
        _run_checks(report, verifier, drafter, checks)
    except Exception as err:
        first = str(err).splitlines()[0] if str(err) else ""
        report.problems.append(
            _error(
                "check_crashed",
                f"the pairing check stopped on {_config_source(drafter, 'drafter')} with "
                f"{_config_source(verifier, 'verifier')} ({type(err).__name__}: {first}): "
                f"something in them it does not foresee; the checks after it did not run",
            )
        )
    return report


@dataclass(frozen=True)
class _Checks:
    """What validate_pair was asked beyond the two models (see its arguments)."""

    method: str | None
    max_model_len: int | None
    verifier_name: str | None
    gpu: bool | None
    k: int | None
    tokenizer: str | Path | None


def _run_checks(
    report: PairingReport, verifier: str | Path, drafter: str | Path, checks: _Checks
) -> None:
    """validate_pair's checks, in order, adding what each finds to `report`."""
    v_cfg, d_cfg, stop = _config_problems(verifier, drafter)
    if v_cfg is None or d_cfg is None:
        report.problems += stop
        return
    gpu = checks.gpu
    if gpu is None:
        from helpers.common.envinfo import has_gpu

        gpu = has_gpu()
    report.aux_layers, aux_problems = _check_aux_layer_ids(v_cfg, d_cfg)
    weights, weight_problems = _read_weights(drafter)
    report.problems += _check_method(d_cfg, checks.method)
    report.problems += _check_architecture(d_cfg)
    report.problems += _check_speculators_fields(d_cfg)
    report.problems += _check_device(d_cfg, gpu)
    report.problems += _check_hidden_sizes(v_cfg, d_cfg)
    report.problems += weight_problems
    if weights is not None:
        report.problems += _check_fc(v_cfg, d_cfg, weights, report.aux_layers)
        report.problems += _check_vocab(v_cfg, d_cfg, weights)
        if report.aux_layers is not None:
            report.problems += _check_tensors(v_cfg, d_cfg, weights)
        if _shape(weights, "d2t") is not None and not any(
            p.code in ("d2t_shape_mismatch", "d2t_unexpected", "tensor_dtype_mismatch")
            for p in report.problems
        ):  # values: local drafters only (hub: headers only)
            d2t = _local_tensor(drafter, "d2t")
            if d2t is not None:
                report.problems += _check_d2t_values(d2t, _verifier_value(v_cfg, "vocab_size"))
    report.problems += aux_problems
    report.problems += _check_max_model_len(d_cfg, checks.max_model_len)
    report.problems += _check_verifier_name(v_cfg, d_cfg, checks.verifier_name or str(verifier))
    report.problems += _check_k(d_cfg, checks.k, checks.max_model_len)
    report.problems += _check_activations(v_cfg, d_cfg)
    report.problems += _check_verifier_shape(v_cfg)
    report.problems += _check_tokenizer(v_cfg, verifier, checks.tokenizer or verifier)


def check_pair(
    verifier: str | Path,
    drafter: str | Path,
    method: str | None = "eagle3",
    max_model_len: int | None = None,
    verifier_name: str | None = None,
    k: int | None = None,
    tokenizer: str | Path | None = None,
) -> PairingReport:
    """validate_pair, raising PairingError (one line per error) if any error was found."""
    report = validate_pair(
        verifier, drafter, method, max_model_len, verifier_name, k=k, tokenizer=tokenizer
    )
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
    (dst / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return dst
