"""Timings of a grade's stages, in seconds rounded to the millisecond, as results.json shows them."""

import time
from collections.abc import Iterator
from contextlib import contextmanager


class Timings(dict[str, float]):
    """What each stage of one grade took, by name (`intake_s`, `checks_s`, ...)."""

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        """Record the wall time of the `with` block under `name`."""
        began = time.monotonic()
        yield
        self[name] = since(began)


def since(began: float) -> float:
    """Seconds since `began` (a time.monotonic() reading), rounded as every timing is."""
    return round(time.monotonic() - began, 3)
