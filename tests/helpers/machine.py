"""Where a run keeps the machine class it ran on, for the summary ``conftest.py`` prints."""

import pytest

MACHINE = pytest.StashKey[dict]()
