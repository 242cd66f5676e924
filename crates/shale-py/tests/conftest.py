import pytest

import shale


@pytest.fixture
def db_path(tmp_path):
    return str(tmp_path / "db")


@pytest.fixture
def db(db_path):
    with shale.open(db_path) as db:
        yield db
