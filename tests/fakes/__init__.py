"""Fakes at the outside edges, each a small real HTTP server speaking the real protocol (wire.py: sidecar, Roman)."""
