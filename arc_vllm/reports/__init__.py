"""Benchmark reports: statistics (``stats``) and summaries with the paper's tables (``summary``)."""
