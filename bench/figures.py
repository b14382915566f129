"""The benchmark's figures: percentiles, and the results of a burst of streaming turns (or
of several bursts, pooled) summed up as latencies, markers, bytes and CPU."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

from .client import ChatSocket, TurnResult


def pct(values: Iterable[float], q: float) -> float | None:
    data = sorted(values)
    if not data:
        return None
    # Nearest rank: p99 of 100 samples is the 99th, never an interpolated value nobody saw.
    rank = max(1, min(len(data), round(q / 100 * len(data) + 0.5)))
    return round(data[rank - 1], 2)


def summary(values: list[float]) -> dict[str, Any]:
    return {
        "n": len(values),
        "p50": pct(values, 50),
        "p90": pct(values, 90),
        "p99": pct(values, 99),
        "max": round(max(values), 2) if values else None,
    }


def aggregate(
    n: int,
    results: list[TurnResult],
    usage: dict[str, dict[str, float]],
    wall: float,
    load0: float,
    threads: dict[str, int],
    sockets: list[ChatSocket],
) -> dict[str, Any]:
    """One burst of streaming turns, as figures: latencies, markers, bytes, CPU."""
    latencies = [x for r in results for x in r.latencies_ms]
    series = sorted((t, x) for r in results for t, x in zip(r.emitted_at, r.latencies_ms, strict=True))
    # Where in the level the slow markers are: per second since the first token.
    t0 = series[0][0] if series else 0.0
    by_second: dict[int, list[float]] = {}
    for t, x in series:
        by_second.setdefault(int(t - t0), []).append(x)
    added = [x for r in results for x in r.added_ms]
    ratios = [r.bytes_wire / r.final_html for r in results if r.final_html]
    payload = [r.bytes_pushed / r.final_html for r in results if r.final_html]
    first = [(r.first_frame - r.post_started) * 1000 for r in results if r.first_frame]
    first_text = [r.first_text_ms for r in results if r.first_text_ms is not None]
    received = sum(r.received for r in results)
    posts = [(r.post_done - r.post_started) * 1000 for r in results if r.post_done]
    errors = sorted({r.error for r in results if r.error})
    # The first few turns that went wrong, with what arrived, to see why.
    problems = [
        {
            "turn": r.turn_id,
            "lost": r.lost,
            "duplicated": r.duplicated,
            "reordered": r.reordered,
            "seq_order": r.seq_order[:80],
            "error": r.error,
        }
        for r in results
        if r.lost or r.duplicated or r.reordered or r.seq_gaps or r.seq_dups or r.seq_reordered or r.error
    ][:5]
    return {
        "turns": n,
        "completed": sum(1 for r in results if r.finished and not r.error),
        "wall_s": round(wall, 1),
        "latency_ms": summary(latencies),
        "added_ms": summary(added),
        "p99_by_second": [pct(by_second[k], 99) for k in sorted(by_second)],
        "markers": {
            "expected": sum(r.expected for r in results),
            "received": sum(r.received for r in results),
            "lost": sum(r.lost for r in results) + sum(r.plan.n for r in results if r.plan and not r.turn_id),
            "duplicated": sum(r.duplicated for r in results),
            "reordered": sum(r.reordered for r in results),
        },
        "fragments": {
            "frames": sum(r.frames for r in results),
            "seq_gaps": sum(r.seq_gaps for r in results),
            "seq_dups": sum(r.seq_dups for r in results),
            "seq_reordered": sum(r.seq_reordered for r in results),
        },
        "bytes": {
            "wire_per_turn": round(statistics.mean(r.bytes_wire for r in results)) if results else 0,
            "payload_per_turn": round(statistics.mean(r.bytes_pushed for r in results)) if results else 0,
            "final_html": round(statistics.mean(r.final_html for r in results)) if results else 0,
            "ratio_p50": pct(ratios, 50),
            "ratio_max": round(max(ratios), 2) if ratios else None,
            "ratio_payload_p50": pct(payload, 50),
        },
        "send_ms": summary(posts),
        "send_to_first_frame_ms": summary(first),
        "first_text_ms": summary(first_text),
        "processes": usage,
        # CPU seconds each process spent per 1 000 tokens that reached a socket.
        "cpu_s_per_1k_tokens": per_1k_tokens(usage, received),
        "threads": threads,
        "load_avg_1m": round(load0, 2),
        "ws_extensions": sorted({e for s in sockets for e in s.extensions}),
        "errors": errors,
        "problems": problems,
        # Raw samples, for pooling runs; dropped from the JSON.
        "_raw": {
            "latency": latencies,
            "added": added,
            "ratios": ratios,
            "payload": payload,
            "first": first,
            "first_text": first_text,
            "frames": [(r.turn_id, *f) for r in results for f in r.frame_log],
        },
    }


def per_1k_tokens(usage: dict[str, dict[str, float]], tokens: int) -> dict[str, float | None]:
    per = {
        name: round(1000 * usage[name]["cpu_s"] / tokens, 3) if tokens and name in usage else None
        for name in ("web", "worker", "redis")
    }
    known = [v for v in per.values() if v is not None]
    per["server"] = round(sum(known), 3) if known else None
    return per


def merge_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Scenario 1 runs turns one after another; their figures are pooled."""
    raw = {key: [x for r in runs for x in r["_raw"][key]] for key in runs[0]["_raw"]}
    merged = dict(runs[-1])
    merged["turns"] = sum(r["turns"] for r in runs)
    merged["completed"] = sum(r["completed"] for r in runs)
    merged["wall_s"] = round(sum(r["wall_s"] for r in runs), 1)
    merged["latency_ms"] = summary(raw["latency"])
    merged["added_ms"] = summary(raw["added"])
    merged["send_to_first_frame_ms"] = summary(raw["first"])
    merged["first_text_ms"] = summary(raw["first_text"])
    for key in ("markers", "fragments"):
        merged[key] = {k: sum(r[key][k] for r in runs) for k in runs[0][key]}
    cpu = {
        name: {"cpu_s": sum(r["processes"].get(name, {}).get("cpu_s", 0.0) for r in runs)}
        for name in ("web", "worker", "redis")
        if name in runs[0]["processes"]
    }
    merged["cpu_s_per_1k_tokens"] = per_1k_tokens(cpu, merged["markers"]["received"])
    merged["bytes"] = {
        "per_turn": [{k: r["bytes"][k] for k in ("wire_per_turn", "final_html", "ratio_p50")} for r in runs],
        "ratio_p50": pct(raw["ratios"], 50),
        "ratio_max": round(max(raw["ratios"]), 2) if raw["ratios"] else None,
        "ratio_payload_p50": pct(raw["payload"], 50),
    }
    merged["errors"] = sorted({e for r in runs for e in r["errors"]})
    merged["_raw"] = raw
    return merged
