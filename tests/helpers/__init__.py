"""Helpers shared by the tests (servers' extras, runners), importable as ``tests.helpers``."""
