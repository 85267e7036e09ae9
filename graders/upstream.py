"""Feedback on failures that may come from elsewhere: a check that also runs the student's code
of other items (the spec's `uses`, followed through those items' own checks) fails, and one of
those items fails a check of its own that runs nothing else. The score stays as it is; the
message says where to look first."""

from .results import CheckResult
from .spec import Item, Spec


def _reached(uses: tuple[str, ...], items: dict[str, Item]) -> set[str]:
    """The items in `uses` and every item their checks use in turn (an item left out by
    `grade --only` ends the trail)."""
    found: set[str] = set()
    todo = list(uses)
    while todo:
        item_id = todo.pop()
        if item_id not in found and item_id in items:
            found.add(item_id)
            todo += [u for c in items[item_id].checks for u in c.uses]
    return found


def _fails_alone(item: Item, checked: dict[str, CheckResult]) -> bool:
    """A check of the item that runs no other item's code failed: the item's own code is wrong."""
    return any(not c.uses and c.name in checked and checked[c.name].status == "failed" for c in item.checks)


def with_upstream_notes(spec: Spec, checked: dict[str, CheckResult], broken: dict[str, str]) -> dict[str, CheckResult]:
    """`checked` with a note on each failed check whose used items fail on their own. None where
    a file the item needs is broken: then every check says so already."""
    items = {i.id: i for i in spec.items}
    noted = dict(checked)
    for item in spec.items:
        if any(f in broken for f in item.needs):
            continue
        for check in item.checks:
            result = checked.get(check.name)
            if result is None or result.status != "failed" or not check.uses:
                continue
            used = _reached(check.uses, items)
            culprits = [i for i in spec.items if i.id in used and _fails_alone(i, checked)]
            if culprits:
                names = " and ".join(f"{i.title} ({i.id})" for i in culprits)
                one = len(culprits) == 1
                note = (f" (This check also runs your {names}, which {'fails' if one else 'fail'} "
                        f"{'its' if one else 'their'} own checks: fix {'that' if one else 'those'} first; "
                        "this one may then pass.)")
                noted[check.name] = result.model_copy(update={"message": result.message + note})
    return noted
