"""The `built` fixture: a small in-memory store for hand-computed simulator cases."""

import pytest

from simkit import Built


@pytest.fixture
def built() -> Built:
    return Built()
