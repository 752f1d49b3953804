"""Exceptions that jobq raises on purpose, so callers can tell them from database errors."""


class JobqError(Exception):
    """Base class of jobq's own errors."""


class ConfigurationError(JobqError, ValueError):
    """A DSN, option or server setting that jobq cannot work with."""


class DecodeError(JobqError):
    """A payload that cannot become a registered Job: it fails the attempt, never the worker."""
