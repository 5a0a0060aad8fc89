"""The root README shows each binding's example exactly as the binding's test suite runs it."""
import os

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLES = ["bindings/python/examples/fastapi_app.py", "bindings/python/examples/flask_app.py",
            "bindings/node/examples/express_app.js", "bindings/ruby/examples/config.ru",
            "bindings/ruby/examples/sinatra_app.rb", "examples/c/quickstart.c"]


def test_readme_shows_every_example_verbatim():
    readme = open(os.path.join(ROOT, "README.md")).read()
    for path in EXAMPLES:
        text = open(os.path.join(ROOT, path)).read().rstrip()
        if path.endswith("quickstart.c"):
            text = text.split("\n", 1)[1]  # its first line says where it comes from
        assert text in readme, f"README.md does not show {path} as it is"
