"""`bundle bench --plot`: steady-state latency and size per variant (matplotlib, optional)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bundler.errors import ConfigError

INSTALL_HINT = "pip install 'onnx-bundler[plot]'"


def require_matplotlib(flag: str = "--plot") -> None:
    """A one-line error before any work when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ConfigError(f"{flag} needs matplotlib, which is not installed: {INSTALL_HINT}"
                          ) from None


def write_plot(path: Path, title: str, rows: Sequence[tuple[str, str, float | None, float | None,
                                                           float | None, int]]) -> None:
    """rows: (ep, variant, steady median ms, p90 ms, native 1-thread median ms, model bytes)."""
    import matplotlib

    matplotlib.use("Agg")  # no display: write the file only
    import matplotlib.pyplot as plt

    labels = [f"{variant}\n{ep}" for ep, variant, *_ in rows]
    medians = [row[2] or 0.0 for row in rows]
    spreads = [max(0.0, (row[3] or 0.0) - (row[2] or 0.0)) for row in rows]
    native = [row[4] for row in rows]
    sizes = [row[5] / 1e6 for row in rows]
    figure, (latency, size) = plt.subplots(1, 2, figsize=(max(8, 1.6 * len(rows) + 4), 4.5))
    positions = list(range(len(rows)))
    latency.bar(positions, medians, yerr=[[0] * len(rows), spreads], capsize=4,
                label="browser, steady median (bar to p90)")
    latency.scatter([p for p, n in zip(positions, native, strict=True) if n is not None],
                    [n for n in native if n is not None], color="black", marker="_", s=400,
                    label="native onnxruntime, 1 thread", zorder=3)
    latency.set_xticks(positions, labels)
    latency.set_ylabel("ms per run")
    latency.set_title("Latency")
    latency.legend(fontsize="small")
    size.bar(positions, sizes, color="tab:gray")
    size.set_xticks(positions, labels)
    size.set_ylabel("MB")
    size.set_title("Model file size")
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
