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
