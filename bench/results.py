"""Where a benchmark's figures go: JSON at the path it was given (its folder made), and a line
saying so. Every benchmark command writes through this one function."""

from __future__ import annotations

import json
from pathlib import Path


def write_results(results: dict, out) -> Path:
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1))
    print(f"wrote {path}")
    return path
