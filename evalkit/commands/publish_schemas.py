"""The JSON Schemas of every file evalkit reads, into docs/schemas/: the run files' models (evalkit.runs.schemas) and
the user-written files' from their owners (evalkit.config.config_file, evalkit.gate.rules_file).

    python -m evalkit.commands.publish_schemas [DIR]    (default docs/schemas; tests/test_schemas.py keeps it current)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pydantic import BaseModel

from evalkit.config.config_file import ConfigFile
from evalkit.gate.rules_file import GateRules
from evalkit.runs.schemas import RUN_FILES

PUBLISHED: dict[str, type[BaseModel]] = {**RUN_FILES, "evalkit-toml": ConfigFile, "gate-rules": GateRules}


def json_schemas() -> dict[str, str]:
    """File name -> JSON Schema text of every published model (what docs/schemas/ holds)."""
    return {
        f"{name}.schema.json": json.dumps(m.model_json_schema(), indent=2, sort_keys=True) + "\n"
        for name, m in PUBLISHED.items()
    }


def main(argv: list[str]) -> int:
    """Write the JSON Schemas into the directory given (default docs/schemas)."""
    out = Path(argv[0] if argv else "docs/schemas")
    out.mkdir(parents=True, exist_ok=True)
    for name, text in json_schemas().items():
        (out / name).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
