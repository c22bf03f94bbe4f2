"""Simulated clusters with SimGrid: platforms, S4U pattern runs, SMPI trace replay and programs."""
