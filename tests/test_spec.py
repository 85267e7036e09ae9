from pathlib import Path

import re

import pytest

from graders.spec import SpecError, assignments, load_spec, spec_path

A3 = spec_path("a3")


def test_a3_spec_loads_with_the_handouts_points():
    spec = load_spec(A3)
    assert spec.points() == 30 and spec.points(bonus=True) == 9
    points = {i.id: i.points for i in spec.items}
    assert points == {"3(a)ii": 1, "3(a)iii": 6, "3(a)iv": 2, "3(a)v": 6, "3(a)vi": 5, "3(b)ii": 7,
                      "3(b)iii": 3, "3(c)": 9, "utils": 0, "advice": 0}


def test_every_assignment_loads():
    assert {"a3", "a2s1"} <= set(assignments())
    for name in assignments():
        assert load_spec(spec_path(name)).assignment == name


@pytest.mark.parametrize("name", [a for a in assignments() if load_spec(spec_path(a)).checks_dir])
def test_every_check_has_exactly_one_hidden_test(name):
    spec = load_spec(spec_path(name))
    checks_dir = Path(__file__).resolve().parent.parent / spec.checks_dir
    tests = [line.split("(")[0].removeprefix("def test_") for f in checks_dir.glob("test_*.py")
             for line in f.read_text().splitlines() if line.startswith("def test_")]
    assert sorted(tests) == sorted(c.name for i in spec.items for c in i.checks)


@pytest.mark.parametrize("edit, field", [
    (("points = 6", "points = -6"), "items.1.points"),
    (('weight = 3, title = "matches the reference on random weights" },\n  { name = "mlp_position_wise"',
      'weight = "heavy", title = "x" },\n  { name = "mlp_position_wise"'), "items.0.checks.0.weight"),
    (("call_timeout_s = 10", "call_timeout = 10"), "limits.call_timeout"),  # a typo: the name as written
    (("n_heads = 2", "n_heads = 3"), "training.model"),
])
def test_a_broken_spec_names_the_field(tmp_path, edit, field):
    text = A3.read_text()
    assert edit[0] in text
    bad = tmp_path / "spec.toml"
    bad.write_text(text.replace(edit[0], edit[1], 1))
    with pytest.raises(SpecError, match=field.replace(".", r"\.")):
        load_spec(bad)


def test_duplicate_check_names_are_refused(tmp_path):
    bad = tmp_path / "spec.toml"
    bad.write_text(A3.read_text().replace('name = "mlp_position_wise"', 'name = "mlp_agrees"'))
    with pytest.raises(SpecError, match="duplicate check name: mlp_agrees"):
        load_spec(bad)


@pytest.mark.parametrize("uses", ['"3(a)vii"', '"3(a)iv"'])  # no such item; the check's own item
def test_a_check_uses_only_other_items_of_the_spec(tmp_path, uses):
    bad = tmp_path / "spec.toml"
    bad.write_text(A3.read_text().replace('uses = ["3(a)ii", "3(a)iii"]', f"uses = [{uses}]"))
    with pytest.raises(SpecError, match=rf"check block_agrees uses {re.escape(uses[1:-1])}: not another item"):
        load_spec(bad)


def test_not_toml_is_refused(tmp_path):
    bad = tmp_path / "spec.toml"
    bad.write_text("items = [")
    with pytest.raises(SpecError, match="not valid TOML"):
        load_spec(bad)
