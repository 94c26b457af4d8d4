"""Clients of a vLLM OpenAI-compatible server (notebook 04): chat calls, streamed and timed as
`vllm bench serve` does (tokens from the server's usage), a request's own acceptance, /metrics."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import requests
from prometheus_client.parser import text_string_to_metric_families

from chapters.ch04_serving.server import failure_note
from helpers.common import vllm_names
from helpers.common.counters import RequestAcceptance, SpecCounters
from helpers.common.vllm_names import METRICS

__all__ = [
    "chat",
    "answer_text",
    "response_acceptance",
    "stream_chat",
    "scrape_metrics_text",
    "scrape_spec_counters",
    "scrape_engine_stats",
    "tokenize",
    "served_models",
    "RESPONSE_KEYS",
]

_Messages = list[dict[str, str]]
_CHAT_PATH = "/v1/chat/completions"
_DONE = "[DONE]"


@dataclass(frozen=True)
class _ResponseKeys:
    """Where a response carries its request's acceptance (vLLM's spelling, with the flag on)."""

    #: The response's (and final usage chunk's) PerRequestMetrics (chat_completion/protocol.py).
    metrics: str = "metrics"
    #: Inside it, the request's SpeculativeDecodingMetrics (entrypoints/generate/base/protocol.py).
    speculative_decoding: str = "speculative_decoding"
    #: Verify steps by accepted drafts, j = 0..k, and the drafts proposed (v1/metrics/stats.py).
    histogram: str = "acceptance_histogram"
    num_draft_tokens: str = "num_draft_tokens"


#: `RESPONSE_KEYS.metrics`, then `.speculative_decoding`, then `.histogram` and `.num_draft_tokens`.
RESPONSE_KEYS = _ResponseKeys()


def _chat_payload(
    model: str, messages: _Messages, max_tokens: int = 128, stream: bool = False, **extra: Any
) -> dict[str, Any]:
    """The JSON body of a greedy chat completion request (extra keys, temperature too, override)."""
    payload = {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": 0.0}
    if stream:
        payload["stream_options"] = {"include_usage": True}
    return payload | {"stream": stream} | extra


def chat(
    base_url: str,
    model: str,
    messages: _Messages,
    max_tokens: int = 128,
    timeout: float = 120,
    **extra: Any,
) -> dict[str, Any]:
    """One non-streaming chat completion; the response JSON (errors carry the server's message)."""
    payload = _chat_payload(model, messages, max_tokens, stream=False, **extra)
    return _request("post", f"{base_url}{_CHAT_PATH}", json=payload, timeout=timeout).json()


def _explained(err: Exception, url: str) -> Exception:
    """`err` with what broke the server at `url` appended (server.failure_note), if any."""
    note = failure_note(url)
    if not note:
        return err
    if isinstance(err, requests.RequestException):
        return type(err)(f"{err}; {note}", response=err.response, request=err.request)
    return type(err)(f"{err}; {note}")


def _request(method: str, url: str, **kwargs: Any) -> requests.Response:
    """requests.request, its errors carrying the server's message and what broke the server."""
    try:
        response = requests.request(method, url, **kwargs)
    except requests.ConnectionError as err:  # refused or broken
        raise _explained(err, url) from None
    try:
        response.raise_for_status()
    except requests.HTTPError as err:
        raised = requests.HTTPError(f"{err}: {response.text[:300]}", response=response)
        if response.status_code >= 500:
            raised = _explained(raised, response.url)
        raise raised from None
    return response


def answer_text(response: dict[str, Any]) -> str:
    """The assistant's text of a non-streaming chat completion."""
    return response["choices"][0]["message"]["content"] or ""


def response_acceptance(body: dict[str, Any]) -> RequestAcceptance | None:
    """The acceptance a response (or final usage chunk) carries; None where not recorded."""
    spec = (body.get(RESPONSE_KEYS.metrics) or {}).get(RESPONSE_KEYS.speculative_decoding)
    if not spec:
        return None
    return RequestAcceptance(
        tuple(int(n) for n in spec[RESPONSE_KEYS.histogram]),
        int(spec[RESPONSE_KEYS.num_draft_tokens]),
    )


@dataclass
class StreamResult:
    """Timing and counts of one streamed request (seconds; tokens from the server's usage)."""

    text: str = ""
    ttft: float = 0.0
    latency: float = 0.0
    output_tokens: int = 0
    prompt_tokens: int = 0
    chunks: int = 0
    finish_reason: str | None = None
    first_token_at: float = 0.0
    last_token_at: float = 0.0
    #: The request's acceptance from the final usage chunk (None: not recorded by the server).
    acceptance: RequestAcceptance | None = None
    #: Which prompt of the benchmark's list this request sent (a unit of its intervals).
    prompt_index: int = -1

    @property
    def tpot(self) -> float:
        """Time per output token after the first: (last − first token) / (output tokens − 1)."""
        span = self.last_token_at - self.first_token_at
        return span / (self.output_tokens - 1) if self.output_tokens > 1 else 0.0

    @property
    def output_tps(self) -> float:
        """Output tokens per second of this request, end to end."""
        return self.output_tokens / self.latency if self.latency > 0 else 0.0

    @property
    def tokens_per_chunk(self) -> float:
        """Mean tokens per content chunk (above 1 when accepted drafts arrive together)."""
        return self.output_tokens / self.chunks if self.chunks else 0.0

    def __str__(self) -> str:
        """One line: TTFT, TPOT, tokens, chunks, tokens/s."""
        return (
            f"TTFT {self.ttft * 1000:.1f} ms, TPOT {self.tpot * 1000:.2f} ms, "
            f"{self.output_tokens} tokens in {self.chunks} chunks "
            f"({self.tokens_per_chunk:.2f} tokens/chunk), {self.output_tps:.0f} tok/s"
        )


class _StreamError(RuntimeError):
    """An error event in a stream (the server's own message)."""


def _parse_sse_line(line: str | bytes) -> dict[str, Any] | str | None:
    """One SSE line: a `data:` event's JSON, _DONE for `data: [DONE]`, else None."""
    line = (line.decode("utf-8", errors="replace") if isinstance(line, bytes) else line).strip()
    if not line.startswith("data:"):
        return None
    data = line[len("data:") :].strip()
    return _DONE if data == _DONE else json.loads(data)


def _chunk_content(event: dict[str, Any]) -> str:
    """The delta text of a chat.completion.chunk ('' for role-only or usage-only chunks)."""
    choices = event.get("choices") or [{}]
    return (choices[0].get("delta") or {}).get("content") or ""


def _result_from_events(
    events: Iterable[tuple[float, dict[str, Any] | str]], start: float
) -> StreamResult:
    """Fold (arrival time, SSE event) pairs of one request sent at `start` into a StreamResult."""
    result = StreamResult()
    parts: list[str] = []
    last = start
    for at, event in events:
        last = at
        if event == _DONE or not isinstance(event, dict):
            continue
        if "error" in event:
            raise _StreamError(f"server error in stream: {event['error']}")
        content = _chunk_content(event)
        if content:
            if result.chunks == 0:
                result.first_token_at, result.ttft = at, at - start
            result.last_token_at = at
            result.chunks += 1
            parts.append(content)
        finish = (event.get("choices") or [{}])[0].get("finish_reason")
        result.finish_reason = finish or result.finish_reason
        usage = event.get("usage")
        if usage:
            result.output_tokens = int(usage.get("completion_tokens") or 0)
            result.prompt_tokens = int(usage.get("prompt_tokens") or 0)
            result.acceptance = response_acceptance(event) or result.acceptance
    result.text, result.latency = "".join(parts), last - start
    if result.output_tokens == 0:  # no usage chunk: fall back to one token per content chunk
        result.output_tokens = result.chunks
    return result


def stream_chat(
    base_url: str,
    model: str,
    messages: _Messages,
    max_tokens: int = 128,
    timeout: float = 120,
    **extra: Any,
) -> StreamResult:
    """One streaming chat completion (usage included), timed: TTFT, TPOT, tokens/s."""
    payload = _chat_payload(model, messages, max_tokens, stream=True, **extra)
    start, url = time.perf_counter(), f"{base_url}{_CHAT_PATH}"
    with _request("post", url, json=payload, timeout=timeout, stream=True) as response:
        events = (
            (time.perf_counter(), ev)
            for ev in map(_parse_sse_line, response.iter_lines(chunk_size=None))
            if ev is not None
        )
        try:
            return _result_from_events(events, start)
        except (_StreamError, requests.RequestException) as err:  # an error event, a cut stream
            raise _explained(err, url) from None


#: The engine's counters and gauges an EngineStats holds, by its field names.
_ENGINE_FIELDS = {
    METRICS.prefix_cache_queries: "prefix_cache_queries",
    METRICS.prefix_cache_hits: "prefix_cache_hits",
    METRICS.num_preemptions: "preemptions",
    METRICS.num_running: "running",
    METRICS.num_waiting: "waiting",
    METRICS.kv_cache_usage: "kv_cache_usage",
}
#: EngineStats' cumulative counters (differenced by `-`; the other figures are gauges).
_COUNTED = ("prefix_cache_queries", "prefix_cache_hits", "preemptions")
#: The server's latency histograms, by the workbook's names (only `_sum` and `_count` are read).
_HISTOGRAMS = {METRICS.ttft: "ttft", METRICS.tpot: "tpot"}
#: The metric names this module reads (and the `# TYPE`/`# HELP` lines that describe them).
_READ = (vllm_names.SPEC_DECODE_PREFIX, METRICS.cache_config_info, *_ENGINE_FIELDS)


def _read_lines(text: str) -> str:
    """Only the lines of the metrics read here (parsing every bucket costs tens of ms a scrape)."""

    def keep(line: str) -> bool:
        parts = line.split()
        name = parts[2] if line.startswith("#") and len(parts) > 2 else line
        if name.startswith(_READ):
            return True
        sample = name.split("{")[0].split(" ")[0]
        return name.startswith(tuple(_HISTOGRAMS)) and (
            line.startswith("#") or sample.endswith(("_sum", "_count"))
        )

    return "\n".join(line for line in text.splitlines() if keep(line)) + "\n"


def spec_counters_from_text(text: str) -> SpecCounters:
    """SpecCounters from Prometheus text: `_total` samples summed over label sets, per position."""
    values: dict[str, float] = {}
    per_pos: dict[int, float] = {}
    for family in text_string_to_metric_families(_read_lines(text)):
        if not family.name.startswith(vllm_names.SPEC_DECODE_PREFIX) or family.type != "counter":
            continue  # vLLM also exports `…_created` timestamps (as gauges, with the same labels)
        for sample in family.samples:
            if sample.name != METRICS.exported(family.name):
                continue
            position = sample.labels.get(METRICS.position)
            if family.name == METRICS.accepted_per_pos and position is not None:
                per_pos[int(position)] = per_pos.get(int(position), 0.0) + sample.value
            else:
                values[family.name] = values.get(family.name, 0.0) + sample.value
    totals = (METRICS.num_drafts, METRICS.num_draft_tokens, METRICS.num_accepted_tokens)
    positions = tuple(int(per_pos.get(i, 0)) for i in range(max(per_pos) + 1)) if per_pos else ()
    return SpecCounters(*(int(values.get(name, 0)) for name in totals), positions)


def scrape_metrics_text(base_url: str, timeout: float = 10) -> str:
    """The raw Prometheus text of GET /metrics."""
    return _request("get", f"{base_url}/metrics", timeout=timeout).text


def scrape_spec_counters(base_url: str, timeout: float = 10) -> SpecCounters:
    """The server's cumulative spec-decode counters now (all zero for a plain server)."""
    return spec_counters_from_text(scrape_metrics_text(base_url, timeout))


@dataclass(frozen=True)
class EngineStats:
    """The engine's other /metrics figures: counters (differenced by `-`), gauges, KV cache size."""

    prefix_cache_queries: float = 0.0
    prefix_cache_hits: float = 0.0
    preemptions: float = 0.0
    running: float = 0.0
    waiting: float = 0.0
    kv_cache_usage: float = 0.0
    num_gpu_blocks: int = 0
    block_size: int = 0
    #: The server's latency histograms ("ttft", "tpot"): name -> (sum in seconds, count).
    latency: dict[str, tuple[float, float]] = field(default_factory=dict)

    def __sub__(self, before: EngineStats) -> EngineStats:
        """Counters accumulated since `before`; gauges and the cache's size as now."""
        old = {name: before.latency.get(name, (0.0, 0.0)) for name in self.latency}
        latency = {n: (s - old[n][0], c - old[n][1]) for n, (s, c) in self.latency.items()}
        counted = {name: getattr(self, name) - getattr(before, name) for name in _COUNTED}
        return replace(self, latency=latency, **counted)

    def mean_seconds(self, name: str) -> float:
        """A latency histogram's mean (sum / count); NaN where nothing was observed."""
        total, count = self.latency.get(name, (0.0, 0.0))
        return total / count if count else math.nan

    @property
    def prefix_hit_rate(self) -> float:
        """Prompt tokens found in the prefix cache / tokens looked up (NaN: none looked up)."""
        queried = self.prefix_cache_queries
        return self.prefix_cache_hits / queried if queried else math.nan

    @property
    def kv_tokens(self) -> int:
        """Tokens the KV cache holds: blocks × tokens per block."""
        return self.num_gpu_blocks * self.block_size


def engine_stats_from_text(text: str) -> EngineStats:
    """EngineStats from Prometheus text (summed over label sets; blocks from cache_config_info)."""
    values: dict[str, Any] = {"latency": {}}
    for family in text_string_to_metric_families(_read_lines(text)):
        if family.name in _HISTOGRAMS:
            total = sum(s.value for s in family.samples if s.name == f"{family.name}_sum")
            count = sum(s.value for s in family.samples if s.name == f"{family.name}_count")
            values["latency"][_HISTOGRAMS[family.name]] = (total, count)
        elif family.name == METRICS.cache_config_info:
            for sample in family.samples[:1]:
                values["num_gpu_blocks"] = int(sample.labels.get(METRICS.num_gpu_blocks) or 0)
                values["block_size"] = int(sample.labels.get(METRICS.block_size) or 0)
        elif family.name in _ENGINE_FIELDS:
            wanted = METRICS.exported(family.name) if family.type == "counter" else family.name
            found = sum(s.value for s in family.samples if s.name == wanted)
            values[_ENGINE_FIELDS[family.name]] = found
    return EngineStats(**values)


def scrape_engine_stats(base_url: str, timeout: float = 10) -> EngineStats:
    """The server's engine figures now (see EngineStats)."""
    return engine_stats_from_text(scrape_metrics_text(base_url, timeout))


def tokenize(base_url: str, model: str, text: str, timeout: float = 30) -> list[int]:
    """Token ids of a raw text (no chat template) from the server's tokenizer (POST /tokenize)."""
    body = {"model": model, "prompt": text, "add_special_tokens": False}
    response = _request("post", f"{base_url}/tokenize", json=body, timeout=timeout)
    return [int(t) for t in response.json()["tokens"]]


def complete_tokens(
    base_url: str, model: str, ids: list[int], max_tokens: int, timeout: float = 300, **extra: Any
) -> dict[str, Any]:
    """One greedy non-streaming completion of a prompt given as token ids; the response JSON."""
    payload = {"model": model, "prompt": ids, "max_tokens": max_tokens, "temperature": 0.0}
    url = f"{base_url}/v1/completions"
    return _request("post", url, json=payload | extra, timeout=timeout).json()


def served_models(base_url: str, timeout: float = 10) -> list[str]:
    """Model names GET /v1/models lists (what requests must name in `model`)."""
    response = _request("get", f"{base_url}/v1/models", timeout=timeout)
    return [m["id"] for m in response.json()["data"]]
