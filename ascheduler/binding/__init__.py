"""Binding: node locks and the bind-phase protocol."""
