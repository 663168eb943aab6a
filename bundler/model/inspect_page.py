"""`bundle inspect --html`: one self-contained page (no scripts, no outside requests) with the
summary, the per-target support tables and the nodes of each graph in topological order."""

from __future__ import annotations

import html
from typing import Any

from bundler.model.analysis import Analysis

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2rem; color: #222; }
table { border-collapse: collapse; margin: .5rem 0 1.5rem; }
td, th { border: 1px solid #ccc; padding: .2rem .5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } code { font-size: 12px; }
.supported { color: #186a1d; } .fallback, .falls-back { color: #8a5a00; }
.unsupported { color: #b00020; } .warn { background: #fff6dc; padding: .3rem .6rem; }
ol.graph li { margin: .15rem 0; } .op { font-weight: 600; }
"""


def _e(value: object) -> str:
    return html.escape(str(value))


def _table(header: list[str], rows: list[list[object]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _shape(spec: dict[str, Any]) -> str:
    return "?" if spec["shape"] is None else "[" + ", ".join(map(str, spec["shape"])) + "]"


def render_page(analysis: Analysis) -> str:
    data = analysis.to_json()
    parts = [f"<h1>{_e(data['model']['file'])}</h1>",
             _table(["bytes", "IR", "producer", "nodes", "subgraphs", "parameters"],
                    [[data["model"]["bytes"], data["model"]["ir_version"],
                      data["model"]["producer"] or "-", data["nodes"], data["subgraphs"],
                      data["parameters"]["count"]]])]
    parts += [f'<p class="warn">&#9888; {_e(w["message"])}; try: <code>{_e(w["fix"])}</code></p>'
              for w in data["warnings"]]
    parts.append("<h2>Inputs and outputs</h2>" + _table(
        ["", "name", "type", "shape"],
        [[role, s["name"], s["type"], _shape(s)] for role in ("input", "output")
         for s in data[role + "s"]]))
    parts.append("<h2>Domains</h2>" + _table(
        ["domain", "opset", "nodes"],
        [[d["domain"] + ("" if d["default"] else " (non-default)"), d["version"], d["nodes"]]
         for d in data["domains"]]))
    parts.append("<h2>Parameters by type</h2>" + _table(
        ["type", "count", "bytes"],
        [[t, v["count"], v["bytes"]] for t, v in data["parameters"]["by_dtype"].items()]))
    parts.append("<h2>Operators</h2>" + _table(["operator", "nodes"],
                                               [list(i) for i in data["operators"].items()]))
    parts.append(f"<h2>Targets (onnxruntime {_e(data['runtime']['version'])})</h2>")
    for target, entry in data["targets"].items():
        status = entry["status"]
        parts.append(f'<h3>{_e(target)}: <span class="{status.replace(" ", "-")}">'
                     f"{_e(status)}</span></h3>")
        rows = [[kind, e["op"], e["domain"], e["version"], ", ".join(e["nodes"])]
                for kind in ("unsupported", "fallback") for e in entry[kind]]
        if rows:
            parts.append(_table(["", "operator", "domain", "version", "nodes"], rows))
    parts.append("<h2>Graph</h2>")
    for graph in analysis.graphs:
        items = "".join(
            f'<li><span class="op">{_e(n["op"])}</span> <code>{_e(n["name"])}</code>:'
            f' {_e(", ".join(filter(None, n["inputs"])))} &rarr; {_e(", ".join(n["outputs"]))}</li>'
            for n in graph["nodes"])
        parts.append(f"<h3>{_e(graph['name'])}</h3><ol class=\"graph\">{items}</ol>")
    title = _e(f"{data['model']['file']}: bundle inspect")
    return (f"<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}"
            f"</title><style>{_STYLE}</style></head><body>{''.join(parts)}</body></html>\n")
