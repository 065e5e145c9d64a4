"""``python -m tfdoctor.schema``: write report.v<N>.json from the current model (``--check``: only compare)."""

from __future__ import annotations

import sys

from tfdoctor.schema import render, schema_path


def main(argv: list[str]) -> int:
    path = schema_path()
    text = render()
    if "--check" in argv:
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current != text:
            print(f"{path} is not current: run python -m tfdoctor.schema", file=sys.stderr)
            return 1
        return 0
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
