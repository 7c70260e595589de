"""Benchmarks: training throughput per device, GPU sampling, the report and its charts."""
