"""Per-operator time from onnxruntime's profiler: native onnxruntime writes it to a JSON file, and
onnxruntime-web prints the same Chrome-trace events to the console, one per line. Both are
aggregated here by op type and by node; a node run by the CPU provider in a WebGPU session is a
fallback (onnxruntime-web had no WebGPU kernel for it, or chose the CPU for it: shape
computations often run there on purpose).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import onnxruntime as ort

from bundler.verify.reference import Feeds

TOP = 10
CPU_PROVIDER = "CPUExecutionProvider"
_KERNEL_SUFFIX = "_kernel_time"


@dataclasses.dataclass(frozen=True)
class OpTime:
    name: str  # an op type, or a node's name
    op_type: str
    total_ms: float  # per run, summed over the nodes it stands for
    share: float  # of all kernel time
    nodes: int
    provider: str


@dataclasses.dataclass
class Profile:
    """Kernel time per run over `runs` profiled runs."""

    source: str  # "browser" or "native"
    runs: int
    kernel_ms: float
    by_op_type: list[OpTime]
    by_node: list[OpTime]
    fallback_nodes: list[str]  # nodes the CPU provider ran in a WebGPU session
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def trace_events(lines: Iterable[str]) -> list[dict[str, Any]]:
    """The trace events in `lines` (console messages or a file's lines), others skipped."""
    events = []
    for line in lines:
        text = line.strip().rstrip(",")
        if not text.startswith("{"):
            continue
        with contextlib.suppress(ValueError):
            event = json.loads(text)
            if isinstance(event, dict) and "cat" in event:
                events.append(event)
    return events


def _last_runs(events: Sequence[dict[str, Any]], runs: int) -> list[dict[str, Any]]:
    """The Node events of the last `runs` model runs (the first runs include the JIT's warm-up)."""
    windows = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                     if e.get("cat") == "Session" and e.get("name") == "model_run")[-runs:]
    nodes = [e for e in events if e.get("cat") == "Node"
             and str(e.get("name", "")).endswith(_KERNEL_SUFFIX)]
    if not windows:
        return nodes
    return [e for e in nodes if any(start <= e["ts"] <= end for start, end in windows)]


def aggregate(events: Sequence[dict[str, Any]], source: str, runs: int, ep: str | None = None,
              top: int = TOP) -> Profile:
    """By op type and by node, per run, the `top` of each."""
    kept = _last_runs(events, runs)
    counted = max(1, min(runs, sum(e.get("name") == "model_run" for e in events) or runs))
    by_node: dict[str, list[float]] = collections.defaultdict(list)
    about: dict[str, tuple[str, str]] = {}
    for event in kept:
        args = event.get("args", {})
        node = str(event["name"]).removesuffix(_KERNEL_SUFFIX)
        by_node[node].append(float(event.get("dur", 0)) / 1000)  # µs -> ms
        about[node] = (str(args.get("op_name", "?")), str(args.get("provider", "")))
    node_ms = {node: sum(times) / counted for node, times in by_node.items()}
    total = sum(node_ms.values())

    def share(value: float) -> float:
        return round(value / total, 4) if total else 0.0

    op_ms: dict[str, float] = collections.defaultdict(float)
    op_nodes: dict[str, set[str]] = collections.defaultdict(set)
    op_providers: dict[str, set[str]] = collections.defaultdict(set)
    for node, value in node_ms.items():
        op_type, provider = about[node]
        op_ms[op_type] += value
        op_nodes[op_type].add(node)
        op_providers[op_type].add(provider)
    ops = [OpTime(op, op, round(value, 4), share(value), len(op_nodes[op]),
                  ",".join(sorted(p for p in op_providers[op] if p)))
           for op, value in op_ms.items()]
    nodes = [OpTime(node, about[node][0], round(value, 4), share(value), 1, about[node][1])
             for node, value in node_ms.items()]
    fallback = sorted(node for node, (_, provider) in about.items()
                      if ep == "webgpu" and provider == CPU_PROVIDER)
    return Profile(source, counted, round(total, 4),
                   sorted(ops, key=lambda o: (-o.total_ms, o.name))[:top],
                   sorted(nodes, key=lambda o: (-o.total_ms, o.name))[:top], fallback)


def native_profile(model: Path, feeds: Feeds, runs: int = 5, threads: int = 1) -> Profile:
    """onnxruntime's own profile of `runs` runs (after one that is not counted), CPU EP."""
    with tempfile.TemporaryDirectory(prefix="bundler-profile-") as folder:
        options = ort.SessionOptions()
        options.log_severity_level = 4
        options.intra_op_num_threads = threads
        options.enable_profiling = True
        options.profile_file_prefix = str(Path(folder) / "native")
        session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        for _ in range(runs + 1):
            session.run(None, dict(feeds))
        path = Path(session.end_profiling())
        events = json.loads(path.read_text(encoding="utf-8"))
    return aggregate(events, "native", runs, ep="cpu")


def profile_rows(profile: Profile) -> list[list[str]]:
    """Rows for a table of the top op types."""
    return [[op.name, str(op.nodes), f"{op.total_ms:.3f}", f"{op.share:.1%}", op.provider]
            for op in profile.by_op_type]

