"""Benchmarks: IMB-compatible overlap (IMB-NBC) and one-sided (IMB-RMA) measurements."""
