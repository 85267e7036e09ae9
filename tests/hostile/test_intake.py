"""Intake refuses what no honest upload contains, before any student code runs, and quickly."""

import stat
import time
import zipfile
from pathlib import Path

import pytest

from bombs import TWO_GIB, bomb_zip, raw_zip
from conftest import FILES, grade_all, reference_files, write_zip
from graders.intake.submission import MAX_DECLARED_BYTES, MAX_ENTRIES, MAX_FILE_BYTES, take_in


def _zip_with(path: Path, entries: list[tuple[zipfile.ZipInfo | str, bytes]]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in [*((n, reference_files()[n].encode()) for n in FILES), *entries]:
            z.writestr(name, data)
    return path


def _special(name: str, kind: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = (kind | 0o777) << 16
    return info


def _valid(tmp: Path) -> Path:
    return write_zip(tmp / "valid.zip", reference_files())


REJECTED = {
    "not_a_zip": (lambda tmp: (tmp / "x.zip").write_bytes(b"PK\x03\x04 not really") and tmp / "x.zip",
                  "not a readable zip"),
    "truncated": (lambda tmp: (tmp / "t.zip").write_bytes(_valid(tmp).read_bytes()[:-200]) and tmp / "t.zip",
                  "not a readable zip"),
    "empty": (lambda tmp: write_zip(tmp / "e.zip", {}), "empty zip"),
    "dot_dot": (lambda tmp: _zip_with(tmp / "d.zip", [("../evil.py", b"x = 1")]), "outside the submission"),
    "absolute": (lambda tmp: _zip_with(tmp / "a.zip", [("/etc/evil.py", b"x = 1")]), "outside the submission"),
    "symlink": (lambda tmp: _zip_with(tmp / "s.zip", [(_special("link.py", stat.S_IFLNK), b"/etc/passwd")]),
                "link or device"),
    "device": (lambda tmp: _zip_with(tmp / "c.zip", [(_special("dev", stat.S_IFCHR), b"")]), "link or device"),
    "too_many_entries": (lambda tmp: _zip_with(tmp / "m.zip", [(f"f{i}.txt", b"") for i in range(MAX_ENTRIES)]),
                         f"at most {MAX_ENTRIES}"),
    "declared_total": (lambda tmp: raw_zip(tmp / "big.zip", "data.bin", b"", MAX_DECLARED_BYTES + 1, 0, method=0,
                                           compressed=MAX_DECLARED_BYTES + 1), "would expand to"),
    "bomb_2gib": (lambda tmp: bomb_zip(tmp / "bomb.zip"), "zip bomb"),
}


def test_a_bomb_whose_headers_lie_inflates_no_further_than_they_say(tmp_path):
    liar = bomb_zip(tmp_path / "liar.zip", honest=False)
    # CPU time of this process, not wall time: a busy CI machine does not make it fail, while
    # inflating the 2 GiB the stream really holds would take seconds of it.
    started = time.process_time()
    result = take_in(liar, FILES, tmp_path / "scratch")
    assert time.process_time() - started < 0.5
    assert result.rejected is None and "null bytes" in result.problems["model_solution.py"], result.problems


@pytest.mark.parametrize("case", sorted(REJECTED))
def test_refused_with_a_clear_reason_in_well_under_a_second(tmp_path, case):
    make, words = REJECTED[case]
    source = make(tmp_path)
    started = time.process_time()  # CPU time: see the liar's test
    result = take_in(source, FILES, tmp_path / "scratch")
    elapsed = time.process_time() - started
    assert result.rejected and words in result.rejected, result.rejected
    assert source.name in result.rejected or case == "not_a_zip"
    assert elapsed < 0.5, f"{case}: {elapsed:.2f} s"
    assert not (tmp_path / "scratch").exists()  # nothing was written


def test_the_bomb_inflates_to_two_gib_so_the_test_means_something(tmp_path):
    with zipfile.ZipFile(bomb_zip(tmp_path / "bomb.zip", size=64 << 20)) as z:
        assert z.read("model_solution.py") == bytes(64 << 20)
    info = zipfile.ZipFile(bomb_zip(tmp_path / "big.zip")).infolist()[0]
    assert info.file_size == TWO_GIB and info.compress_size < 16 << 20


def test_a_file_problem_costs_that_file_only(tmp_path):
    files = {**reference_files(), "utils.py": b"# \xff\xfe not utf-8\n",
             "train.py": "# padding\n" * (MAX_FILE_BYTES // 10 + 1)}
    result = take_in(write_zip(tmp_path / "p.zip", files), FILES, tmp_path / "scratch")
    assert result.rejected is None and set(result.files) == {"model_solution.py"}
    assert "not valid UTF-8" in result.problems["utils.py"]
    assert f"at most {MAX_FILE_BYTES}" in result.problems["train.py"]


def test_a_required_file_twice_is_chosen_deterministically_with_a_warning(tmp_path):
    files = {**{f"a/{n}": t for n, t in reference_files().items()}, "b/model_solution.py": "broken(",
             "__MACOSX/a/._model_solution.py": "junk", "a/.DS_Store": "junk"}
    for _ in range(2):
        result = take_in(write_zip(tmp_path / "twice.zip", files), FILES, tmp_path / "scratch")
        assert set(result.files) == set(FILES) and not result.problems
        assert result.warnings == ["model_solution.py appears 2 times; graded a/model_solution.py, "
                                   "ignored b/model_solution.py"]


def test_a_refused_bomb_still_gets_a_valid_report_with_score_zero(tmp_path):
    results = grade_all([bomb_zip(tmp_path / "bomb.zip")], tmp_path / "out", jobs=1)["bomb"]
    assert results["score"] == 0 and results["grader_error"] is None
    assert "zip bomb" in " ".join(results["problems"].values()) + str(results.get("submission"))
