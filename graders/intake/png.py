"""Reading a PNG that a submission wrote: never through a link, never a FIFO or device, capped."""

import os
import stat
from pathlib import Path

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_PLOT_BYTES = 4 << 20


def read_png(path: Path) -> bytes | None:
    """The file's bytes when it is a regular PNG file of at most MAX_PLOT_BYTES, else None.
    Raises OSError when it cannot be opened or read (missing, a symlink)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, MAX_PLOT_BYTES + 1)
        while len(data) <= MAX_PLOT_BYTES and (more := os.read(fd, MAX_PLOT_BYTES + 1 - len(data))):
            data += more
    finally:
        os.close(fd)
    if len(data) > MAX_PLOT_BYTES or not data.startswith(PNG_SIGNATURE):
        return None
    return data
