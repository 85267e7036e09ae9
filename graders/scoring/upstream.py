"""Failures that may come from elsewhere: a check that also runs the student's code of other items
(the spec's `uses`, followed through those items' own checks) fails, and one of those items fails
a check of its own that runs nothing else. Under the spec's scoring policy "charge_once" such a
check is excused (not applicable: its weight moves to its item's other checks) and says what it
found; under "cascade" it keeps its failure and its message says where to look first. The weight
moves only to an isolated check of the item that applies: an item with none (3(b)iii: the training
run needs the loss) cannot be shown to work on its own, so it keeps its failures, noted as in cascade.
A check may rule a used item out itself: A3's training run, when the student's loss is wrong in it,
is graded on a second run with the grader's loss in its place (the bug costs 3(b)ii only), and then
that loss is never named as the cause of what the run still does wrong."""

from graders.scoring.results import CheckResult
from graders.spec import Item, Spec

Ruled = dict[str, set[str]] | None  # check name -> used items that check showed are not the cause


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


def _culprits(
    spec: Spec, checked: dict[str, CheckResult], broken: dict[str, str], ruled_out: Ruled = None
) -> dict[str, list[Item]]:
    """Check name -> the used items that fail on their own, for each failed check with `uses`, but
    those the check itself ruled out (`ruled_out`: it ran the grader's code in their place, or saw
    theirs do right in its run). None where a file the item needs is broken: then every check says
    so already."""
    items = {i.id: i for i in spec.items}
    ruled_out = ruled_out or {}
    found: dict[str, list[Item]] = {}
    for item in spec.items:
        if any(f in broken for f in item.needs):
            continue
        for check in item.checks:
            result = checked.get(check.name)
            if result is None or result.status != "failed" or not check.uses:
                continue
            used = _reached(check.uses, items)
            cleared = ruled_out.get(check.name, set())
            culprits = [i for i in spec.items if i.id in used - cleared and _fails_alone(i, checked)]
            if culprits:
                found[check.name] = culprits
    return found


def _names(culprits: list[Item]) -> tuple[str, bool]:
    return " and ".join(f"{i.title} ({i.id})" for i in culprits), len(culprits) == 1


def with_upstream_notes(
    spec: Spec,
    checked: dict[str, CheckResult],
    broken: dict[str, str],
    only: set[str] | None = None,
    ruled_out: Ruled = None,
) -> dict[str, CheckResult]:
    """Cascade: `checked` with a note on each failed check (of `only`, when given) whose used items
    fail on their own."""
    noted = dict(checked)
    for name, culprits in _culprits(spec, checked, broken, ruled_out).items():
        if only is not None and name not in only:
            continue
        names, one = _names(culprits)
        note = (
            f" (This check also runs your {names}, which {'fails' if one else 'fail'} "
            f"{'its' if one else 'their'} own checks: fix {'that' if one else 'those'} first; "
            "this one may then pass.)"
        )
        noted[name] = checked[name].model_copy(update={"message": checked[name].message + note})
    return noted


def _excusable(spec: Spec, checked: dict[str, CheckResult], culprits: dict[str, list[Item]]) -> dict[str, list[Item]]:
    """The culprits of the checks that may be excused: those of items with an isolated check (one
    that runs no other item's code) that applies, to take the excused weight."""
    kept: dict[str, list[Item]] = {}
    for item in spec.items:
        mine = {c.name for c in item.checks if c.name in culprits}
        isolated = [
            c for c in item.checks if not c.uses and c.name in checked and checked[c.name].status != "not_applicable"
        ]
        if mine and isolated:
            kept.update({name: culprits[name] for name in mine})
    return kept


def charge_once(
    spec: Spec, checked: dict[str, CheckResult], broken: dict[str, str], ruled_out: Ruled = None
) -> dict[str, CheckResult]:
    """Charge once: each failed check whose used items fail on their own becomes not applicable,
    saying so and what it found (its diagnosis kept); the bug is charged where it is. Where that
    would leave an item no check that applies, its checks keep their failures, noted as in cascade."""
    found = _culprits(spec, checked, broken, ruled_out)
    excusable = _excusable(spec, checked, found)
    excused = with_upstream_notes(spec, checked, broken, set(found) - set(excusable), ruled_out)
    for name, culprits in excusable.items():
        names, one = _names(culprits)
        message = (
            f"not charged here: this check also runs your {names}, which {'fails' if one else 'fail'} "
            f"{'its' if one else 'their'} own checks, and a bug costs points once, there. "
            f"What this check found: {checked[name].message}"
        )
        excused[name] = checked[name].model_copy(update={"status": "not_applicable", "message": message})
    return excused


def apply_policy(
    spec: Spec, checked: dict[str, CheckResult], broken: dict[str, str], ruled_out: Ruled = None
) -> dict[str, CheckResult]:
    """The spec's scoring policy applied to the checks' outcomes."""
    if spec.scoring.policy == "charge_once":
        return charge_once(spec, checked, broken, ruled_out)
    return with_upstream_notes(spec, checked, broken, ruled_out=ruled_out)
