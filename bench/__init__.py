"""aimem benchmarks: each module prints a table and writes JSON to ``bench/results/``."""
