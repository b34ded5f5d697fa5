"""Rank accelerators and layouts for one model (`ranking`) and say what to take first
(`shortlist`)."""
