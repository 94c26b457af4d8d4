"""A serving sweep's validity checks (notebook 04, section 7, after speculators' `validate_rows`)
and its sentences, printed only where the checks that bear on them hold (`gated`)."""

from __future__ import annotations

import math

import pandas as pd

__all__ = [
    "CROSSING_NEEDS",
    "EQUAL_SPEED_NEEDS",
    "gated",
    "holds",
    "gain_statement",
    "validity_checks",
    "check_lines",
]

#: Repeats of a level must lie within this fraction of their median (total tokens/s).
_REPEAT_SPREAD = 0.05
#: The prefix cache's saved share of token work may differ between modes by this much.
_CACHE_SKEW = 0.05
#: Time-averaged requests in flight must reach this share of the level's concurrency.
_WAVE_FILL = 0.9
#: A stream whose client-side TPOT or chunk count is below this share of the server's is coalesced.
_STREAM_FLOOR = 0.5
#: The checks that bear on the ratio of total tokens/s at a concurrency (and where it crosses 1).
CROSSING_NEEDS = ("repeats", "queueing", "waves", "preemptions", "prefix cache")
#: The checks that bear on the gain at equal per-user speed (also the speed each user gets).
EQUAL_SPEED_NEEDS = (*CROSSING_NEEDS, "server timing", "stream")


def gain_statement(gains: pd.DataFrame, curve: pd.DataFrame) -> str:
    """One sentence, computed: the gain at equal per-user speed, or why there is none to read."""
    speeds = {m: curve[curve["mode"] == m].per_user_tok_s for m in ("plain", "spec")}
    span = ", ".join(f"{m} {s.min():.0f}–{s.max():.0f}" for m, s in speeds.items())
    if gains.empty:
        return (
            f"The two curves share no per-user speed (tok/s per user: {span}): this run cannot "
            f"compare them at equal interactivity."
        )
    fast, slow = gains.iloc[0], gains.iloc[-1]
    trend = f"{fast.gain:.2f}× at {fast.per_user_tok_s:.0f} tok/s per user ({fast.measured})"
    if len(gains) > 1:
        trend += f" and {slow.gain:.2f}× at {slow.per_user_tok_s:.0f} ({slow.measured})"
    above = int((gains.gain > 1).sum())
    return (
        f"At equal per-user speed the speculative server delivered {trend}; it served more "
        f"tokens/s at {above} of the {len(gains)} shared speeds (per-user ranges: {span})."
    )


def _check(name: str, where: str, value: float, limit: str, holds: bool) -> dict[str, object]:
    """One row of the validity table."""
    return {"check": name, "where": where, "value": value, "limit": limit, "holds": bool(holds)}


def validity_checks(results: pd.DataFrame) -> pd.DataFrame:
    """The sweep's checks: one row per check and place (mode and level, or level), its result."""
    rows = []
    for (mode, c), g in results.groupby(["mode", "concurrency"]):
        where, tok = f"{mode} C={c}", g.output_tok_s
        spread = (tok.max() - tok.min()) / tok.median() if len(g) > 1 else 0.0
        fill = (g.mean_in_flight / c).min()
        waiting, preempted = g.peak_waiting.max(), g.preemptions.sum()
        server = g.server_tpot_ms if "server_tpot_ms" in g else pd.Series([math.nan])
        for name, value, limit, ok in (
            ("repeats", spread, f"≤ {_REPEAT_SPREAD:.0%} of the median", spread <= _REPEAT_SPREAD),
            ("queueing", waiting, "0 waiting", waiting == 0),
            ("waves", fill, f"≥ {_WAVE_FILL:.0%} of C in flight", fill >= _WAVE_FILL),
            ("preemptions", preempted, "0", preempted == 0),
            ("server timing", float(server.min()), "server TPOT read", bool(server.notna().all())),
        ):
            rows.append(_check(name, where, value, limit, ok))
        rows.append(_stream_check(g, where))
    work = results.prompt_tokens + results.requests * results.mean_output_tokens
    saved = results.assign(saved=results.prefix_cache_hits / work)
    for c, g in saved.groupby("concurrency"):
        share = g.groupby("mode").saved.mean()
        plain, spec = share.get("plain", 0.0), share.get("spec", 0.0)
        where, skew = f"C={c}: saved plain {plain:.1%}, spec {spec:.1%}", abs(spec - plain)
        limit = f"modes differ by ≤ {_CACHE_SKEW:.0%} of token work"
        rows.append(_check("prefix cache", where, skew, limit, skew <= _CACHE_SKEW))
    return pd.DataFrame(rows)


def _stream_check(level: pd.DataFrame, where: str) -> dict[str, object]:
    """The coalesced-stream check of a mode and level: client TPOT and chunks over the server's."""
    ratios = [math.nan]
    if "server_tpot_ms" in level:
        ratios.append(float((level.mean_tpot_ms / level.server_tpot_ms).min()))
    if "chunks_per_request" in level:
        tau = level.acceptance_length.fillna(1.0)
        steps = level.mean_output_tokens / tau
        ratios.append(float((level.chunks_per_request / steps).min()))
    value = min((r for r in ratios if not math.isnan(r)), default=math.nan)
    limit = f"client TPOT and chunks ≥ {_STREAM_FLOOR:.0%} of the server's"
    return _check("stream", where, value, limit, value >= _STREAM_FLOOR)


def holds(checks: pd.DataFrame, needs: tuple[str, ...]) -> bool:
    """True when every check named in `needs` holds everywhere (what `gated` prints under)."""
    return bool(checks[checks.check.isin(needs)].holds.all())


def gated(statement: str, checks: pd.DataFrame, needs: tuple[str, ...], what: str) -> str:
    """`statement` if the checks in `needs` hold everywhere, else a line naming the failed."""
    if holds(checks, needs):
        return statement
    failed = checks[checks.check.isin(needs) & ~checks.holds]
    where = "; ".join(f"{r.check} at {r.where}" for r in failed.head(4).itertuples())
    more = f" (and {len(failed) - 4} more)" if len(failed) > 4 else ""
    return f"This run cannot say {what}: {where}{more} failed (the checks below)."


def check_lines(checks: pd.DataFrame) -> list[str]:
    """One printed line per kind of check: holds everywhere, or where it fails and by how much."""
    lines = []
    for name, g in checks.groupby("check", sort=False):
        failed, limit = g[~g.holds], g.limit.iloc[0]
        if failed.empty:
            lines.append(f"{name}: holds at all {len(g)} places ({limit})")
        else:
            where = "; ".join(f"{r.where}: {r.value:.3g}" for r in failed.itertuples())
            lines.append(f"{name}: FAILS at {len(failed)} of {len(g)} ({limit}) — {where}")
    return lines
