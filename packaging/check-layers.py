#!/usr/bin/env python3
"""The core's layers hold: no file of core/src includes a file of a higher folder.

The folders of core/src, lower to higher: util -> policy -> stores -> http -> metrics -> engine (core/README.md
draws them). A file may include its own folder's files and any lower folder's; an include of a higher
folder is a cycle in the making and fails `make test`, naming the file, the line and the two layers.
capi/src sits above them all and may include any. It also fails when a file of core/src is missing from
core/README.md's map (its name without the extension must appear there), so that the map stays whole.
Run from anywhere: packaging/check-layers.py
"""

import pathlib
import re
import sys

LAYERS = ["util", "policy", "stores", "http", "metrics", "engine"]
ROOT = pathlib.Path(__file__).resolve().parents[1] / "core" / "src"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"/]+)/')


def main() -> int:
    rank = {name: i for i, name in enumerate(LAYERS)}
    folders = sorted(p.name for p in ROOT.iterdir() if p.is_dir())
    unknown = [f for f in folders if f not in rank]
    if unknown:
        print(f"check-layers: core/src/{unknown[0]}/ is in no layer: add it to LAYERS in {__file__} and to "
              "core/README.md's drawing", file=sys.stderr)
        return 1
    errors = []
    files = sorted(p for p in ROOT.rglob("*") if p.suffix in (".hpp", ".cpp", ".h"))
    for path in files:
        layer = path.relative_to(ROOT).parts[0]
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            m = INCLUDE.match(line)
            if m and m.group(1) in rank and rank[m.group(1)] > rank[layer]:
                errors.append(f"core/src/{path.relative_to(ROOT)}:{n}: {layer}/ includes {m.group(1)}/, a higher "
                              f"layer ({' -> '.join(LAYERS)})")
    readme = (ROOT.parent / "README.md").read_text(encoding="utf-8")
    for path in files:
        if not re.search(r"(?<![A-Za-z0-9_])" + re.escape(path.stem) + r"(?![A-Za-z0-9_])", readme):
            errors.append(f"core/src/{path.relative_to(ROOT)}: not in core/README.md's map of files")
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        return 1
    print(f"check-layers: {len(files)} files of core/src, no include of a higher layer, each in core/README.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
