"""The package as a user installs it: from the wheel, under its distribution name."""

import importlib.metadata
import os

import shale


def test_the_tests_run_against_the_installed_wheel():
    here = os.path.dirname(os.path.abspath(__file__))
    source = os.path.join(os.path.dirname(here), "python")
    assert not os.path.abspath(shale.__file__).startswith(source), shale.__file__
    assert "site-packages" in shale.__file__


def test_the_distribution_metadata():
    meta = importlib.metadata.metadata("shale-db")
    assert meta["Name"] == "shale-db"
    assert meta["License"] == "Apache-2.0"
    assert "numpy" in " ".join(importlib.metadata.requires("shale-db") or [])
    assert meta["Summary"].startswith("Shale")


def test_the_readme_quick_start_runs(tmp_path):
    readme = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    start = text.index("```python\n") + len("```python\n")
    code = text[start : text.index("```", start)]
    code = code.replace('"/tmp/', f'"{tmp_path}/')
    exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    assert (tmp_path / "my-db-copy" / "CURRENT").exists()
