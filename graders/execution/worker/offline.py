"""Grading has no network (the sandbox's namespaces, Landlock and seccomp see to it; the Hugging Face
libraries run offline). A download a submission starts fails deep inside a library, with the
library's own advice and addresses; here it is recognised, and described by what the submission
called and from where, so that the trusted side can say it in its own words.

`guard` makes an internet lookup or connection raise NoNetwork at once, a marker that the
libraries wrap but keep in the exception's chain, instead of the sandbox's EPERM or a timeout.
Sockets themselves are left to the sandbox: making one is not yet using the network."""

import os
import socket
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any


class NoNetwork(ConnectionError):
    """A lookup or connection to the internet, in a grade."""


# Exceptions that mean "this needed the network": ours, the Python and socket ones, and those the
# usual libraries raise offline (huggingface_hub, requests, urllib3), by class name so that
# nothing needs importing. Not ConnectionError's pipe and reset subclasses: a DataLoader's workers
# raise those without any network.
_NETWORK = {
    "NoNetwork",
    "ConnectionError",
    "URLError",
    "gaierror",
    "herror",
    "OfflineModeIsEnabled",
    "LocalEntryNotFoundError",
    "NameResolutionError",
    "NewConnectionError",
    "MaxRetryError",
    "ConnectTimeout",
    "ConnectTimeoutError",
}
_NOT_NETWORK = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)
_INET = (socket.AF_INET, socket.AF_INET6)
_guarded = False


def guard() -> None:
    """Internet lookups and connections raise NoNetwork (once per worker; Unix sockets are untouched)."""
    global _guarded
    if _guarded:
        return
    _guarded = True
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        raise NoNetwork(f"looking up {host!r}: grading has no network")

    def connect(self: socket.socket, address: Any) -> None:
        if self.family in _INET:
            raise NoNetwork(f"connecting to {address!r}: grading has no network")
        return real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        if self.family in _INET:
            raise NoNetwork(f"connecting to {address!r}: grading has no network")
        return real_connect_ex(self, address)

    socket.getaddrinfo = getaddrinfo
    socket.socket.connect = connect  # type: ignore[method-assign,assignment]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign,assignment]


def _is_network(exc: BaseException) -> bool:
    if isinstance(exc, _NOT_NETWORK):
        return False
    return any(c.__name__ in _NETWORK for c in type(exc).__mro__)


def _chain(exc: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in found and len(found) < 20:
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def _frames(tb: TracebackType | None) -> list[tuple[FrameType, int]]:
    found = []
    while tb is not None:
        found.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    return found


def _inside(frame: FrameType, scratch: Path) -> bool:
    name = frame.f_code.co_filename
    try:  # "<frozen importlib._bootstrap>" would resolve inside the working directory
        return os.path.isabs(name) and Path(name).resolve().is_relative_to(scratch)
    except (OSError, ValueError):
        return False


def _callee(frames: list[tuple[FrameType, int]]) -> tuple[str, str]:
    """What the submission's innermost line called: (qualified name, top-level package). Frames
    of the worker's own code (the lazy stand-ins that forward a call) are passed over."""
    ours = __name__.rpartition(".")[0]
    for frame, _ in frames:
        module = str(frame.f_globals.get("__name__", ""))
        if module == ours or module.startswith(ours + "."):
            continue
        return frame.f_code.co_qualname, module.partition(".")[0]
    return "", ""


def describe(exc: BaseException, scratch: Path) -> dict | None:
    """For an exception that comes from using the network: what the submission called (its
    innermost line's callee), and the submission's frames that led there, outermost first, as
    [file, line, function]; None for any other exception."""
    if not any(_is_network(e) for e in _chain(exc)):
        return None
    frames = _frames(exc.__traceback__)
    mine = [i for i, (f, _) in enumerate(frames) if _inside(f, scratch)]
    if not mine:
        return None
    called, package = _callee(frames[mine[-1] + 1 :])
    return {
        "called": called[:200],
        "package": package[:100],
        "frames": [
            [Path(frames[i][0].f_code.co_filename).name, frames[i][1], frames[i][0].f_code.co_name[:100]]
            for i in mine[-6:]
        ],
    }


def argparse_error(exc: BaseException) -> str | None:
    """What argparse said before it exited (a SystemExit from ArgumentParser.error): the
    submission's own arguments, e.g. "the following arguments are required: --data"."""
    for frame, _ in _frames(exc.__traceback__):
        if frame.f_globals.get("__name__") == "argparse" and frame.f_code.co_name == "error":
            message = frame.f_locals.get("message")
            return str(message)[:300] if message is not None else ""
    return None
