"""Rank mapping for mesh and torus networks (RMATT, 001): networks, patterns, metrics, BISEM, OPTIM."""
