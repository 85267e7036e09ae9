"""The table `grade` prints: item, points, max, the first failing check's reason; then each
item's known mistake in full (it says what to fix)."""

from graders.scoring.results import Results

REASON_WIDTH = 111


def _total_note(results: Results) -> str:
    """What the total does not count yet: the points staff grade by hand (a TA reading "33/60"
    must not take it for the final grade), and the bonus."""
    notes, by_hand = [], results.by_hand_points
    if by_hand:
        notes.append(f"{by_hand:g} of the {results.max_score:g} points are graded by hand, not in this total")
    if results.bonus_max:
        manual = any(i.status == "manual" and i.bonus for i in results.items)
        notes.append(f"bonus {results.bonus_score:g}/{results.bonus_max:g}" + (" (graded by hand)" if manual else ""))
    return "; ".join(notes)


def table(results: Results) -> str:
    rows = [("item", "points", "max", "")]
    for item in results.items:
        if item.max_score == 0 and item.status == "passed":
            reason = "ok"
        else:
            reason = "" if item.status == "passed" else item.feedback
        rows.append(
            (
                item.id,
                f"{item.score:g}" if not item.status == "manual" else "-",
                f"{item.max_score:g}",
                (reason[: REASON_WIDTH - 1] + "…") if len(reason) > REASON_WIDTH else reason,
            )
        )
    rows.append(("total", f"{results.score:g}", f"{results.max_score:g}", _total_note(results)))
    width = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [f"{r[0]:<{width[0]}}  {r[1]:>{width[1]}}  {r[2]:>{width[2]}}  {r[3]}" for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    for item in results.items:  # the first known mistake of each item, in full: it says what to fix
        diagnosis = next((c.diagnosis for c in item.checks if c.diagnosis), None)
        if diagnosis:
            lines.append(f"{item.id} diagnosis: {diagnosis.explanation}")
    return "\n".join(lines)
