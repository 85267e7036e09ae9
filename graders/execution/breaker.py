"""A broken method is paid for once per grade. When a request running a student method hangs past
its timeout or kills its worker (a signal, an exit, the memory cap), the method is remembered with
that first failure; a later request that would run it, directly or through a method that calls it
(the spec's items: each `runs` a method, and its checks' `uses` name the items whose code it also
runs), fails at once instead of paying the timeout and a fresh worker again. A request on a model
with stand-ins swapped in runs only the method it names, so the checks that replace the broken
method by a stand-in still run. An ordinary exception marks nothing: it may come from one input."""

from dataclasses import dataclass, field

from graders.spec import Spec


def call_structure(spec: Spec) -> dict[str, set[str]]:
    """Method -> every student method a call of it runs, itself included."""
    items = {i.id: i for i in spec.items}
    direct: dict[str, set[str]] = {}
    for i in spec.items:
        if i.runs:
            direct[i.runs] = {r for c in i.checks for u in c.uses if u in items and (r := items[u].runs)}
    reached: dict[str, set[str]] = {}
    for method in direct:
        seen, todo = {method}, list(direct[method])
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo += direct.get(m, ())
        reached[method] = seen
    return reached


@dataclass
class Breaker:
    calls: dict[str, set[str]]
    # (the methods the failed request ran, its first hang or crash, said): the culprit is one of them
    broken: list[tuple[frozenset[str], str]] = field(default_factory=list)
    failed_fast: int = 0

    def _runs(self, method: str, stand_ins: bool) -> frozenset[str]:
        """What a request of `method` surely runs: with stand-ins swapped in, only the method."""
        return frozenset({method} if stand_ins else self.calls.get(method, {method}))

    def blocked(self, method: str, stand_ins: bool) -> str | None:
        """Why a request of `method` is not run (None: run it). It is not when it runs everything a
        request that hung or crashed ran: one of those methods is broken, and it would run it again.
        A request that runs only part of that (the attention alone, after the whole model hung)
        still runs, and pins the culprit down when it fails too."""
        if method not in self.calls:
            return None
        runs = self._runs(method, stand_ins)
        for ran, failure in self.broken:
            if ran <= runs:
                self.failed_fast += 1
                return f"not re-run: {failure}"
        return None

    def record(self, method: str, stand_ins: bool, failure: str, check: str | None) -> None:
        if method in self.calls:
            earlier = ", earlier" + (f" (check '{check}')" if check else "")
            self.broken.append((self._runs(method, stand_ins), failure + earlier))
