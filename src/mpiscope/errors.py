"""Errors the user sees as one sentence: the problem, then the fix.

Library code raises these; only `cli.main` catches them, prints
`error: <message>` and exits with `exit_code`.
"""

from __future__ import annotations


class MpiscopeError(Exception):
    exit_code = 1


class UsageError(MpiscopeError):
    exit_code = 2


class TraceError(MpiscopeError):
    exit_code = 3


class TraceNotFound(TraceError):
    pass


class TraceCorrupt(TraceError):
    pass


class MpiError(MpiscopeError):
    exit_code = 4


class NativeBuildError(MpiscopeError):
    exit_code = 5


class SimError(MpiscopeError):
    exit_code = 6
