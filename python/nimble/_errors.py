"""Python exceptions for the runtime's nimble_status_t (nimble/status.h).

Every failing call raises nimble.Error (or a subclass named after the status
code) carrying the runtime's message unchanged, e.g.
    nimble.InvalidArgumentError: [INVALID_ARGUMENT] entry 'main': input 'x' has
    shape [2,3], expected [?batch,784]
Subclasses also derive from the builtin exception a Python caller would
catch for that kind of fault (ValueError, LookupError, ...).
"""


class Error(Exception):
    """A runtime error: `code` (the status code name, e.g. "INVALID_ARGUMENT"),
    `code_value` (its number) and `message` (the runtime's text)."""

    code = "UNKNOWN"
    code_value = -1

    def __init__(self, message, code=None, code_value=None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if code_value is not None:
            self.code_value = code_value

    def __str__(self):
        return "[%s] %s" % (self.code, self.message)


class InvalidArgumentError(Error, ValueError):
    code, code_value = "INVALID_ARGUMENT", 1


class NotFoundError(Error, LookupError):
    code, code_value = "NOT_FOUND", 2


class AlreadyExistsError(Error):
    code, code_value = "ALREADY_EXISTS", 3


class PermissionDeniedError(Error):
    code, code_value = "PERMISSION_DENIED", 4


class UnauthenticatedError(Error):
    code, code_value = "UNAUTHENTICATED", 5


class ResourceExhaustedError(Error, MemoryError):
    code, code_value = "RESOURCE_EXHAUSTED", 6


class FailedPreconditionError(Error):
    code, code_value = "FAILED_PRECONDITION", 7


class OutOfRangeError(Error, IndexError):
    code, code_value = "OUT_OF_RANGE", 8


class UnimplementedError(Error, NotImplementedError):
    code, code_value = "UNIMPLEMENTED", 9


class InternalError(Error):
    code, code_value = "INTERNAL", 10


class UnavailableError(Error):
    code, code_value = "UNAVAILABLE", 11


class DataLossError(Error):
    code, code_value = "DATA_LOSS", 12


class DeadlineExceededError(Error):
    code, code_value = "DEADLINE_EXCEEDED", 13


class CancelledError(Error):
    code, code_value = "CANCELLED", 14


class IOFailureError(Error):
    code, code_value = "IO_ERROR", 15


BY_CODE = {cls.code_value: cls for cls in (
    InvalidArgumentError, NotFoundError, AlreadyExistsError, PermissionDeniedError,
    UnauthenticatedError, ResourceExhaustedError, FailedPreconditionError, OutOfRangeError,
    UnimplementedError, InternalError, UnavailableError, DataLossError, DeadlineExceededError,
    CancelledError, IOFailureError)}


def raise_status(lib, status, context=None):
    """Raises the exception for a non-NULL nimble_status_t and frees it."""
    if not status:
        return
    try:
        code = lib.nimble_status_code(status)
        message = (lib.nimble_status_message(status) or b"").decode("utf-8", "replace")
        name = (lib.nimble_status_code_name(code) or b"UNKNOWN").decode("ascii", "replace")
    finally:
        lib.nimble_status_free(status)
    if context:
        message = "%s: %s" % (context, message)
    cls = BY_CODE.get(code, Error)
    raise cls(message, code=name, code_value=code)
