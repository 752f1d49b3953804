"""Integrations with frameworks; each imports its framework, the core never does."""
