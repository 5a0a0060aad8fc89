"""packaging/manifest.py: the manifest make packages writes into dist/ (file, platform, size, sha256).

Run: python3 tests/packaging/test_manifest.py (or pytest). The packages here are real files of each kind
(a wheel's zip, an npm tarball carrying prebuilt addons, a gem, an sdist, a C ABI tarball) made by the test.
make packages checks the manifest it wrote with `manifest.py check dist` and `sha256sum -c`.
"""

from __future__ import annotations

import hashlib
import io
import json
import pathlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
MANIFEST_PY = ROOT / "packaging" / "manifest.py"


def run(*args: str, cwd: pathlib.Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(MANIFEST_PY), *args], cwd=cwd, capture_output=True, text=True)


def tarball(path: pathlib.Path, members: dict) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


class Manifest(unittest.TestCase):
    def setUp(self) -> None:
        self.dist = pathlib.Path(tempfile.mkdtemp(prefix="floodwall-dist-"))
        self.addCleanup(shutil.rmtree, self.dist)
        with zipfile.ZipFile(self.dist / "floodwall-0.1.0-cp39-cp39-manylinux_2_34_x86_64.manylinux_2_35_x86_64.whl", "w") as z:
            z.writestr("floodwall/__init__.py", "")
        with zipfile.ZipFile(self.dist / "floodwall-0.1.0-cp313-cp313-manylinux_2_36_aarch64.whl", "w") as z:
            z.writestr("floodwall/__init__.py", "# arm64")
        tarball(self.dist / "floodwall-0.1.0.tgz", {
            "package/package.json": b"{}",
            "package/prebuilds/linux-x64/floodwall.node": b"\x7fELF x64",
            "package/prebuilds/linux-arm64/floodwall.node": b"\x7fELF arm64",
            "package/prebuilds/linux-x64-musl/floodwall.node": b"\x7fELF musl",
            "package/prebuilds/README": b"not an addon",
        })
        tarball(self.dist / "floodwall-0.1.0.tar.gz", {"floodwall-0.1.0/pyproject.toml": b""})
        tarball(self.dist / "floodwall-capi-0.1.0-linux-aarch64-gnu.tar.gz", {"lib/libfloodwall.so": b"\x7fELF"})
        (self.dist / "floodwall-0.1.0.gem").write_bytes(b"gem bytes")

    def written(self) -> dict:
        r = run("write", str(self.dist))
        self.assertEqual(r.returncode, 0, r.stderr)
        return {e["file"]: e for e in json.loads((self.dist / "manifest.json").read_text())["packages"]}

    def test_every_package_is_listed_with_its_size_and_sha256(self) -> None:
        entries = self.written()
        files = sorted(p.name for p in self.dist.iterdir() if p.name not in ("manifest.json", "SHA256SUMS"))
        self.assertEqual(sorted(entries), files)
        for name, e in entries.items():
            data = (self.dist / name).read_bytes()
            self.assertEqual(e["size"], len(data), name)
            self.assertEqual(e["sha256"], hashlib.sha256(data).hexdigest(), name)

    def test_the_platform_is_read_from_each_file(self) -> None:
        entries = self.written()
        wheel = entries["floodwall-0.1.0-cp39-cp39-manylinux_2_34_x86_64.manylinux_2_35_x86_64.whl"]
        self.assertEqual((wheel["platform"], wheel["python"]), ("manylinux_2_34_x86_64.manylinux_2_35_x86_64", "cp39-cp39"))
        arm = entries["floodwall-0.1.0-cp313-cp313-manylinux_2_36_aarch64.whl"]
        self.assertEqual((arm["platform"], arm["python"]), ("manylinux_2_36_aarch64", "cp313-cp313"))
        # The addons the tarball carries, not a file that merely sits in prebuilds/.
        self.assertEqual(entries["floodwall-0.1.0.tgz"]["platform"], "node linux-arm64, linux-x64, linux-x64-musl; source elsewhere")
        self.assertEqual(entries["floodwall-0.1.0.tar.gz"]["platform"], "python source")
        self.assertEqual(entries["floodwall-capi-0.1.0-linux-aarch64-gnu.tar.gz"]["platform"], "linux-aarch64-gnu")
        self.assertEqual(entries["floodwall-0.1.0.gem"]["platform"], "ruby source")

    def test_an_npm_tarball_without_addons_builds_from_source(self) -> None:
        tarball(self.dist / "floodwall-0.1.0.tgz", {"package/package.json": b"{}"})
        self.assertEqual(self.written()["floodwall-0.1.0.tgz"]["platform"], "node source")

    def test_sha256sum_verifies_the_packages_without_floodwall(self) -> None:
        self.written()
        tool = shutil.which("sha256sum")
        self.assertIsNotNone(tool, "sha256sum (coreutils) is needed by this test")
        r = subprocess.run([tool, "-c", "SHA256SUMS"], cwd=self.dist, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.count(": OK"), 6)

    def test_check_passes_then_names_a_changed_a_missing_and_an_unlisted_package(self) -> None:
        self.written()
        ok = run("check", str(self.dist))
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertIn("6 packages", ok.stdout)
        gem = self.dist / "floodwall-0.1.0.gem"
        gem.write_bytes(b"gem bytes, changed")
        (self.dist / "floodwall-0.1.0.tar.gz").unlink()
        tarball(self.dist / "floodwall-0.2.0.tar.gz", {"floodwall-0.2.0/pyproject.toml": b""})
        bad = run("check", str(self.dist))
        self.assertEqual(bad.returncode, 1)
        lines = bad.stderr.splitlines()
        self.assertIn("manifest: floodwall-0.1.0.tar.gz: listed, not in " + str(self.dist), lines)
        self.assertIn("manifest: floodwall-0.2.0.tar.gz: in " + str(self.dist) + ", not listed", lines)
        self.assertTrue(any(l.startswith("manifest: floodwall-0.1.0.gem: size is 18") for l in lines), lines)
        self.assertTrue(any(l.startswith("manifest: floodwall-0.1.0.gem: sha256 is") for l in lines), lines)

    def test_a_file_that_is_no_package_is_refused_by_name(self) -> None:
        (self.dist / "notes.txt").write_text("left behind")
        r = run("write", str(self.dist))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("notes.txt: not a package this manifest knows", r.stderr)
        self.assertFalse((self.dist / "manifest.json").exists())

    def test_an_unreadable_manifest_fails_the_check(self) -> None:
        (self.dist / "manifest.json").write_text("{not json")
        r = run("check", str(self.dist))
        self.assertEqual(r.returncode, 1)
        self.assertIn("manifest: manifest.json: unreadable", r.stderr)


if __name__ == "__main__":
    unittest.main()
