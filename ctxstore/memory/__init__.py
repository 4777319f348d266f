"""Transcript memory: sessions indexed, searchable by meaning and time (spec 004)."""
