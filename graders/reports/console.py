"""The table `grade` prints: item, points, max, the first failing check's reason; then each
item's known mistake in full (it says what to fix)."""

from graders.scoring.results import Results

REASON_WIDTH = 111


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
    manual = any(i.status == "manual" and i.bonus for i in results.items)
    bonus = f"bonus {results.bonus_score:g}/{results.bonus_max:g}" + (" (graded by hand)" if manual else "")
    rows.append(("total", f"{results.score:g}", f"{results.max_score:g}", bonus if results.bonus_max else ""))
    width = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [f"{r[0]:<{width[0]}}  {r[1]:>{width[1]}}  {r[2]:>{width[2]}}  {r[3]}" for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    for item in results.items:  # the first known mistake of each item, in full: it says what to fix
        diagnosis = next((c.diagnosis for c in item.checks if c.diagnosis), None)
        if diagnosis:
            lines.append(f"{item.id} diagnosis: {diagnosis.explanation}")
    return "\n".join(lines)
