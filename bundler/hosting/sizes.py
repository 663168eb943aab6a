"""File size limits of static hosts: the default `--max-file-size` and the parser of sizes."""

from __future__ import annotations

import re

MIB = 1024 * 1024
DEFAULT_MAX_FILE_SIZE = 25 * MIB  # Cloudflare Pages refuses bigger files
_SIZE = re.compile(r"^\s*(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[KMG]i?B|B)?\s*$", re.IGNORECASE)
_UNITS = {"b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "kib": 1024, "mib": MIB,
          "gib": 1024**3}


def parse_size(value: object) -> int:
    """Bytes from 26214400, "25MiB", "25 MB" (MB = 1000², MiB = 1024²)."""
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    else:
        match = _SIZE.match(str(value)) if isinstance(value, str) else None
        if match is None:
            raise ValueError(f"expected a size such as 25MiB, 10MB or 1000000, got {value!r}")
        size = int(float(match["number"]) * _UNITS[(match["unit"] or "b").lower()])
    if size < 1024:
        raise ValueError(f"a file size limit under 1 KiB makes no sense, got {value!r}")
    return size
