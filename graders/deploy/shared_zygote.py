"""Imported once, by `grade batch`'s fork server (forked_grades.PRELOAD): starts the worker zygote
that every grade forked from that server shares.

A `grade` process starts a zygote for its own workers (about 2 CPU-s: torch and matplotlib
imported once); a batch's forked grades would each start one too. This one is started for the
default limits' workers (their environment depends only on the thread count). It belongs to the
fork server, which stops it and removes its code as it exits (and the zygote dies with it, by its
parent-death signal); a forked grade neither stops nor removes it (execution/zygote.py keeps
ownership by pid). A grade whose workers need another environment (`--limit threads=N`) starts a
zygote of its own, as a `grade` process does.

The zygote never runs student code and holds no secret (it is started with the workers'
environment); sharing it between grades shares what every worker inherits, nothing a worker left.
"""

from graders.execution.client import warm_zygote
from graders.spec import Limits

warm_zygote(Limits())
