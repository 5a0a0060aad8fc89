#!/usr/bin/env python3
"""packaging/manifest.py write|check DIST - the manifest of the packages in DIST (make packages).

write: DIST/manifest.json, one entry per package file (file, platform, size, sha256, and for a wheel its
       Python tag), and DIST/SHA256SUMS, which `sha256sum -c SHA256SUMS` verifies with no floodwall tool.
check: recomputes both from the files and fails, naming the file, when a package is missing, unlisted,
       of another size or hash, or listed under another platform.

A file's platform is read from the file, not from a table: a wheel's from its name (the tags pip matches),
the npm tarball's from the prebuilt addons it carries (prebuilds/<tag>/floodwall.node; any other machine
builds from source), a C ABI tarball's from its name (floodwall-capi-<version>-<platform>.tar.gz); the
sdist and the gem build from source wherever they are installed. Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tarfile

MANIFEST = "manifest.json"
SUMS = "SHA256SUMS"


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def describe(path: str) -> dict:
    """The manifest entry of one package file; ValueError for a file that is not a package."""
    name = os.path.basename(path)
    entry = {"file": name}
    if name.endswith(".whl"):
        # {distribution}-{version}(-{build})?-{python}-{abi}-{platform}.whl (PEP 427)
        parts = name[:-4].split("-")
        if len(parts) not in (5, 6):
            raise ValueError(f"{name}: not a wheel file name")
        entry["platform"] = parts[-1]
        entry["python"] = f"{parts[-3]}-{parts[-2]}"
    elif name.endswith(".tgz"):
        with tarfile.open(path, "r:gz") as tar:
            tags = sorted({m.name.split("/")[2] for m in tar.getmembers()
                           if re.fullmatch(r"package/prebuilds/[^/]+/floodwall\.node", m.name)})
        entry["platform"] = "node " + (", ".join(tags) + "; source elsewhere" if tags else "source")
    elif name.endswith(".gem"):
        entry["platform"] = "ruby source"
    elif name.startswith("floodwall-capi-") and name.endswith(".tar.gz"):
        m = re.fullmatch(r"floodwall-capi-\d+\.\d+\.\d+-(.+)\.tar\.gz", name)
        if not m:
            raise ValueError(f"{name}: not floodwall-capi-<version>-<platform>.tar.gz")
        entry["platform"] = m.group(1)
    elif name.endswith(".tar.gz"):
        entry["platform"] = "python source"
    else:
        raise ValueError(f"{name}: not a package this manifest knows (.whl, .tar.gz, .tgz, .gem)")
    entry["size"] = os.path.getsize(path)
    entry["sha256"] = sha256(path)
    return entry


def packages(dist: str) -> list:
    return sorted(n for n in os.listdir(dist) if n not in (MANIFEST, SUMS) and not n.startswith(".")
                  and os.path.isfile(os.path.join(dist, n)))


def compute(dist: str) -> list:
    return [describe(os.path.join(dist, n)) for n in packages(dist)]


def write(dist: str) -> None:
    entries = compute(dist)
    if not entries:
        raise SystemExit(f"manifest: {dist} holds no package")
    with open(os.path.join(dist, MANIFEST), "w") as f:
        json.dump({"packages": entries}, f, indent=2)
        f.write("\n")
    with open(os.path.join(dist, SUMS), "w") as f:
        f.writelines(f"{e['sha256']}  {e['file']}\n" for e in entries)
    for e in entries:
        print(f"{e['file']}\t{e['platform']}\t{e['size']}\t{e['sha256']}")


def check(dist: str) -> list:
    """The differences between DIST's manifest and its files, one line each (empty: they agree)."""
    try:
        with open(os.path.join(dist, MANIFEST)) as f:
            listed = {e["file"]: e for e in json.load(f)["packages"]}
    except (OSError, ValueError, KeyError, TypeError) as err:
        return [f"{MANIFEST}: unreadable ({err})"]
    problems = []
    present = set(packages(dist))
    for name in sorted(set(listed) - present):
        problems.append(f"{name}: listed, not in {dist}")
    for name in sorted(present - set(listed)):
        problems.append(f"{name}: in {dist}, not listed")
    for name in sorted(present & set(listed)):
        actual = describe(os.path.join(dist, name))
        for key in ("platform", "python", "size", "sha256"):
            if listed[name].get(key) != actual.get(key):
                problems.append(f"{name}: {key} is {actual.get(key)!r}, the manifest says {listed[name].get(key)!r}")
    try:
        with open(os.path.join(dist, SUMS)) as f:
            sums = dict(reversed(line.rstrip("\n").split("  ", 1)) for line in f if line.strip())
    except (OSError, ValueError) as err:
        return problems + [f"{SUMS}: unreadable ({err})"]
    if sums != {n: e["sha256"] for n, e in listed.items()}:
        problems.append(f"{SUMS} and {MANIFEST} disagree")
    return problems


def main(argv: list) -> int:
    if len(argv) != 3 or argv[1] not in ("write", "check"):
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    dist = argv[2]
    if argv[1] == "write":
        write(dist)
        return 0
    problems = check(dist)
    for p in problems:
        print(f"manifest: {p}", file=sys.stderr)
    if not problems:
        print(f"manifest: {len(packages(dist))} packages in {dist} as listed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
