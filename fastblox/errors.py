"""The library's own error types. The CLI prints them as one line and exits with code 2."""


class FastbloxError(Exception):
    """Base class: a problem with the user's input or configuration (never a bug of ours)."""


class ConfigError(FastbloxError, ValueError):
    """A bad option: unknown part name, malformed --cluster string, bad flag value."""


class TraceError(FastbloxError, ValueError):
    """A trace that cannot be read: names the file and, where it can, the row and column."""

    def __init__(self, message: str, path=None, row=None, column=None):
        where = []
        if path is not None:
            where.append(str(path))
        if row is not None:
            where.append(f"row {row}")
        if column is not None:
            where.append(f"column {column!r}")
        self.path, self.row, self.column = path, row, column
        super().__init__(f"{': '.join([', '.join(where), message]) if where else message}")


class WorkloadError(FastbloxError, ValueError):
    """A workload the cluster cannot run (e.g. a job asking for more GPUs than exist)."""


class SimulationError(FastbloxError, RuntimeError):
    """The replay cannot finish (e.g. a job that can never be placed)."""


class SweepBusyError(FastbloxError):
    """Another sweep is running into the same output folder (it holds the folder's lock)."""


class NoProgressError(SimulationError):
    """The event loop stopped moving time (a bug of fastblox's, not of the input): raised instead
    of hanging, after more passes at one instant than any correct run makes."""


class FastbloxWarning(UserWarning):
    """Something the user should know that does not stop the work (``fastblox`` prints it as one
    ``fastblox: warning: ...`` line)."""
