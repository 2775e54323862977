"""Exceptions a user sees: each names the file or field at fault and the fix."""


class AuditError(RuntimeError):
    """A protocol rule or an input contract was violated; the run must stop."""
