"""Files that ship with the package: templates/, web/ and playwright.config.py.

In a source checkout (or an editable install) they sit at the top of the repository; a wheel maps
them into the package (see pyproject.toml), so both places are looked at.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent
_PACKAGED = {
    "templates": _PACKAGE_DIR / "templates",
    "web": _PACKAGE_DIR / "web",
    "playwright.config.py": _PACKAGE_DIR / "defaults" / "playwright.config.py",
}


def resource(name: str) -> Path:
    packaged = _PACKAGED[name]
    if packaged.exists():
        return packaged
    return _PACKAGE_DIR.parent / name


def example_model() -> Path:
    return _PACKAGE_DIR / "example" / "digits.onnx"


def example_calibration() -> Path:
    """64 held-out samples of the example (arrays `image` and `label`)."""
    return _PACKAGE_DIR / "example" / "digits_calibration.npz"
