"""The README's examples run as written, as real server processes; and a new user's path: a fresh
virtual environment, `pip install` from a clean copy of the repository, then the same examples."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import venv

import httpx
import pytest

from conftest import free_port, wait_for_port

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "bindings" / "python" / "examples"


def run_example(python: str, name: str, cwd: pathlib.Path) -> None:
    """Starts `python <name>` with PORT set, and checks the policy of the example over HTTP:
    {"request_rate": {"rate": 5, "burst": 10}} lets 10 requests through, then answers 429; a made-up API
    key is still that address's tenant, and a key the example's verify hook knows has its own bucket."""
    port = free_port()
    proc = subprocess.Popen(
        [python, name],
        cwd=cwd,
        env={**os.environ, "PORT": str(port), "PYTHONPATH": ""},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for_port(port, timeout=30)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as http:
            # The burst of 10 goes through; the 429 comes with the 11th request, or a few later when the 5
            # tokens a second refill between requests on a loaded machine (a count, not a time).
            responses = [http.get("/hello") for _ in range(10)]
            for _ in range(100):
                responses.append(http.get("/hello"))
                if responses[-1].status_code != 200:
                    break
            made_up = http.get("/hello", headers={"X-API-Key": "k-made-up"})
            issued = http.get("/hello", headers={"X-API-Key": "k-demo-1"})
        assert [r.status_code for r in responses] == [200] * (len(responses) - 1) + [429], proc.stdout
        assert responses[0].json() == {"hello": "world"}
        assert responses[0].headers["ratelimit-limit"] == "10"
        assert responses[0].headers["ratelimit-remaining"] == "9"
        assert responses[-1].headers["retry-after"] == "1"
        assert responses[-1].json()["error"]["limit_type"] == "request_rate"
        # The address's tenant, spent (a token may be back since, never a fresh bucket's 9).
        assert made_up.status_code == 429 or int(made_up.headers["ratelimit-remaining"]) < 8, made_up.headers
        assert issued.status_code == 200 and issued.headers["ratelimit-remaining"] == "9"  # its own bucket
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("name", ["fastapi_app.py", "flask_app.py"])
def test_the_example_serves_and_limits(name):
    run_example(sys.executable, name, EXAMPLES)


@pytest.mark.parametrize("name", ["fastapi_app.py", "flask_app.py"])
def test_the_examples_are_about_ten_lines(name):
    lines = [line for line in (EXAMPLES / name).read_text().splitlines() if line.strip()]
    assert len(lines) <= 13


def clean_copy(dest: pathlib.Path) -> pathlib.Path:
    """The files a clone of this work tree has: tracked ones and new ones git does not ignore (so the
    work in progress counts before it is committed), and nothing else: no build directory, no venv."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, check=True, capture_output=True,
    ).stdout.split(b"\0")
    for rel in filter(None, listed):
        src = REPO / rel.decode()
        if src.is_file():
            target = dest / rel.decode()
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    return dest


def test_a_new_user_installs_with_pip_and_runs_both_examples(tmp_path):
    clone = clean_copy(tmp_path / "floodwall")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    python = str(env_dir / "bin" / "python")
    pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    # What a new user types: the package from the checkout, plus the frameworks of the examples.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    subprocess.run([*pip, str(clone), "fastapi", "uvicorn", "flask"], check=True, cwd=tmp_path,
                   env={**env, "PYTHONPATH": ""})
    installed = subprocess.run([python, "-c", "import floodwall, pathlib; print(floodwall.__file__)"],
                               check=True, capture_output=True, text=True, cwd=tmp_path).stdout.strip()
    package = pathlib.Path(installed).parent
    assert package.parent.name == "site-packages"
    assert (package / "py.typed").exists() and (package / "_floodwall.pyi").exists()
    assert list(package.glob("_floodwall*.so"))
    assert not (package.parent / "lib").exists() and not (package.parent / "include").exists()
    for name in ("fastapi_app.py", "flask_app.py"):
        run_example(python, name, clone / "bindings" / "python" / "examples")
