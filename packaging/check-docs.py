#!/usr/bin/env python3
"""packaging/check-docs.py - what `make docs` checks beyond `mkdocs build --strict`. Fails (exit 1, each
problem on a line of its own) on:

  - a page under docs/ that mkdocs.yml's nav does not list, or a nav entry with no page;
  - a broken internal link: a relative link (in docs/, README.md, CONTRIBUTING.md, SECURITY.md,
    CHANGELOG.md) to a file that does not exist, or to a heading anchor the target page does not have;
    a link from docs/ out of docs/ (the site would not have it);
  - a policy key the reference (docs/reference/policy.md) documents that floodwall.schema.json does not
    know, and a key of the schema that the reference omits (floodwall.schema.json is checked against the
    core by tests/python/test_schema.py);
  - the ACL rule blocks that tests/python/test_acl.py reads missing from docs/redis/production.md.

Run with the docs venv's python (PyYAML comes with MkDocs): bash packaging/docs.sh does."""

from __future__ import annotations

import json
import pathlib
import re
import sys
from typing import Dict, Iterator, List, Set, Tuple

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
problems: List[str] = []


def problem(msg: str) -> None:
    problems.append(msg)


# --- the nav -------------------------------------------------------------------------------------------

class _Loader(yaml.SafeLoader):
    pass


_Loader.add_multi_constructor("", lambda loader, suffix, node: None)  # !ENV and python tags: not needed here


def nav_pages(nav: object) -> Iterator[str]:
    if isinstance(nav, str):
        yield nav
    elif isinstance(nav, list):
        for item in nav:
            yield from nav_pages(item)
    elif isinstance(nav, dict):
        for value in nav.values():
            yield from nav_pages(value)


def check_nav() -> None:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)
    listed = [p for p in nav_pages(config.get("nav", [])) if not re.match(r"^[a-z]+://", p)]
    for page in listed:
        if not (DOCS / page).is_file():
            problem(f"mkdocs.yml: the nav lists {page}, which docs/ does not have")
    for page in sorted(DOCS.rglob("*.md")):
        rel = page.relative_to(DOCS).as_posix()
        if rel not in listed:
            problem(f"docs/{rel}: not in mkdocs.yml's nav (a page nobody can reach from the site)")


# --- links ---------------------------------------------------------------------------------------------

FENCE = re.compile(r"^(```|~~~)")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def prose(text: str) -> Iterator[Tuple[int, str]]:
    """The lines outside fenced code blocks, with their numbers, inline code removed."""
    fenced = False
    for n, line in enumerate(text.split("\n"), 1):
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            yield n, re.sub(r"`[^`]*`", "", line)


def slug(heading: str) -> str:
    """A heading's anchor as Python-Markdown's toc extension makes it (MkDocs) and as GitHub does for the
    simple headings these pages have: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\s-]", "", text.lower(), flags=re.UNICODE)
    return re.sub(r"[\s]+", "-", text.strip())


def anchors(path: pathlib.Path) -> Set[str]:
    found: Set[str] = set()
    fenced = False
    for line in path.read_text().split("\n"):
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m and not fenced:
            base, n = slug(m.group(1)), 1
            s = base
            while s in found:
                s = f"{base}_{n}"
                n += 1
            found.add(s)
    return found


def check_links(page: pathlib.Path) -> None:
    in_docs = DOCS in page.parents
    where = page.relative_to(ROOT).as_posix()
    for n, line in prose(page.read_text()):
        for m in LINK.finditer(line):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("//"):
                continue  # http(s), mailto: not checked here (no network in make test)
            file_part, _, anchor = target.partition("#")
            dest = page if not file_part else (page.parent / file_part).resolve()
            if not file_part and not anchor:
                continue
            if not dest.exists():
                problem(f"{where}:{n}: a link to {target}: {dest.relative_to(ROOT) if ROOT in dest.parents else dest} does not exist")
                continue
            if in_docs and DOCS not in dest.parents and dest != DOCS:
                problem(f"{where}:{n}: a link to {target} leaves docs/ (the site has no such page; name the file in code instead)")
                continue
            if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                problem(f"{where}:{n}: a link to {target}: {dest.name} has no heading #{anchor}")


# --- the policy reference against the schema -----------------------------------------------------------

SCHEMA = json.loads((ROOT / "floodwall.schema.json").read_text())


def schema_paths() -> Set[str]:
    paths: Set[str] = set()

    def walk(node: dict, path: str, seen: Tuple[str, ...] = ()) -> None:
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            if name not in seen:
                walk(SCHEMA["$defs"][name], path, seen + (name,))
            return
        for key in ("allOf", "anyOf", "oneOf"):
            for sub in node.get(key, []):
                walk(sub, path, seen)
        for key, sub in node.get("properties", {}).items():
            paths.add(path + key)
            walk(sub, path + key + ".", seen)
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], path + "*.", seen)
        for sub in node.get("patternProperties", {}).values():
            walk(sub, path + "*.", seen)
        if isinstance(node.get("items"), dict):
            walk(node["items"], path + "[].", seen)

    walk(SCHEMA, "")
    return paths


def reference_rows() -> Dict[str, str]:
    """The reference table's keys, each with its row's text. A cell's first code span is a full path; the
    ones after it without a dot share its parent (`utilization.good`, `bad`; `redis.tls.cert_file`,
    `key_file`)."""
    text = (DOCS / "reference/policy.md").read_text()
    rows: Dict[str, str] = {}
    in_table = False
    for line in text.split("\n"):
        if line.startswith("| field |"):
            in_table = True
            continue
        if in_table and not line.startswith("|"):
            in_table = False
        if not in_table or line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        names = re.findall(r"`([^`]+)`", cells[0])
        if not names:
            problem(f"docs/reference/policy.md: a reference row names no key: {line[:80]}")
            continue
        parent = names[0].rsplit(".", 1)[0] + "." if "." in names[0] else ""
        for i, name in enumerate(names):
            rows[name if i == 0 or "." in name else parent + name] = line
    return rows


def check_reference() -> None:
    paths = schema_paths()
    rows = reference_rows()
    modes = {p for p in paths if p.endswith(".mode")}
    for key in rows:
        if key == "*.mode":
            if not modes:
                problem("docs/reference/policy.md documents *.mode, which no section of floodwall.schema.json has")
        elif key not in paths:
            problem(f"docs/reference/policy.md documents `{key}`, which floodwall.schema.json does not know")
    for path in sorted(paths):
        if path in rows or (path.endswith(".mode") and "*.mode" in rows):
            continue
        parts = path.split(".")
        covered = False
        for cut in range(len(parts) - 1, 0, -1):
            ancestor = ".".join(parts[:cut])
            if ancestor in rows:
                rest = [p for p in parts[cut:] if p not in ("*", "[]")]
                # a documented section that lists its own sub-keys ({name, routes, methods?, ...})
                covered = not rest or re.search(rf"\b{re.escape(rest[0])}\b", rows[ancestor]) is not None
                break
        if not covered and not any(r.startswith(path + ".") for r in rows):
            problem(f"floodwall.schema.json has `{path}`, which docs/reference/policy.md does not document")
    # The reference's example lists keys the schema knows (every one: test_schema.py validates it too).
    m = re.search(r"```json\n(.*?)```", (DOCS / "reference/policy.md").read_text(), re.S)
    if not m:
        problem("docs/reference/policy.md: no JSON example")
    else:
        def flat(doc: object, prefix: str = "") -> Iterator[str]:
            if isinstance(doc, dict):
                for k, v in doc.items():
                    if prefix.endswith(("overrides.", "tiers.")):  # a map: its keys are names, not policy keys
                        yield from flat(v, prefix + "*.")
                        continue
                    yield prefix + k
                    yield from flat(v, prefix + k + ".")
            elif isinstance(doc, list):
                for v in doc:
                    yield from flat(v, prefix + "[].")
        for key in flat(json.loads(m.group(1))):
            if key not in paths:
                problem(f"docs/reference/policy.md's example has `{key}`, which floodwall.schema.json does not know")


def check_acl() -> None:
    text = (DOCS / "redis/production.md").read_text()
    for marker in ("acl-rule", "acl-rule-sentinel"):
        m = re.search(rf"<!-- {marker}:.*?-->\n```text\n(ACL SETUSER floodwall [^\n]*)\n```", text)
        if not m:
            problem(f"docs/redis/production.md: no ACL rule after the <!-- {marker}: --> marker (tests/python/test_acl.py reads it)")


def main() -> int:
    check_nav()
    for page in sorted(DOCS.rglob("*.md")) + [ROOT / n for n in ("README.md", "CONTRIBUTING.md", "SECURITY.md", "CHANGELOG.md")]:
        check_links(page)
    check_reference()
    check_acl()
    for p in problems:
        print(f"check-docs: {p}", file=sys.stderr)
    if problems:
        print(f"check-docs: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print("check-docs: nav, links, the policy reference against floodwall.schema.json and the ACL rules: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
