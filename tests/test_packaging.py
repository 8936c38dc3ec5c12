"""The package as a host meets it: the wheel holds only the app, and a fresh `startproject`
configured from the README's "Add it to your project" section — literally: the snippets are
read from README.md — passes `check`, migrates, and serves a write and a search.

The wheel goes into a new virtualenv; its dependencies come from this environment through a
.pth path line (no download, no editable-install hooks: a path line does not run them).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]  # subprocesses with their own limits

#: Local state a checkout accumulates; the copy a wheel is built from leaves it out.
LOCAL_STATE = shutil.ignore_patterns(".git", ".venv", ".pgdata", ".pgdata-*", "build", "dist", "*.egg-info", "media",
                                     "__pycache__", ".pytest_cache", "staticfiles", "test-artifacts", "results")


def readme_section(title: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def fenced_blocks(section: str) -> list[tuple[str, str]]:
    return re.findall(r"```(\w+)\n(.*?)```", section, flags=re.DOTALL)


def host_snippets() -> dict[str, str]:
    """The settings and urls snippets (first line `# settings.py` / `# urls.py`) and the
    shell walkthrough (the bash block that creates a key) of the README's host section."""
    snippets = {}
    for language, code in fenced_blocks(readme_section("Add it to your project")):
        first = code.splitlines()[0]
        if language == "python" and first.startswith("# ") and first.endswith(".py"):
            snippets[first[2:]] = code
        elif language == "bash" and "memory_engine_key create" in code:
            snippets["walkthrough"] = code
    assert set(snippets) == {"settings.py", "urls.py", "walkthrough"}, snippets.keys()
    return snippets


def build_wheel(into: Path) -> Path:
    """Build from a copy of the repository (example_project, tests and all), so that only the
    packaging configuration decides what goes in, and no stale build/ directory can leak in."""
    source = into / "source"
    shutil.copytree(ROOT, source, ignore=LOCAL_STATE)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                    "--wheel-dir", str(into / "dist"), str(source)], check=True, timeout=300)
    (wheel,) = (into / "dist").glob("django_memory_engine-*.whl")
    return wheel


def new_venv(path: Path, wheel: Path) -> Path:
    """A virtualenv holding the wheel, with this environment's packages for dependencies."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    python = path / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    ours = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))
    (Path(purelib) / "dependencies.pth").write_text("".join(f"{p}\n" for p in ours))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                    "--quiet", str(wheel)], check=True, timeout=300)
    return python


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def postmaster_pid(data_dir: Path) -> int | None:
    try:
        return int((data_dir / "postmaster.pid").read_text().split()[0])
    except (FileNotFoundError, IndexError, ValueError):
        return None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process (pgserver runs PostgreSQL as its own user under root)
        return True
    return True


def still_running_after(pid: int, *, timeout: float) -> bool:
    """Whether ``pid`` is still running after up to ``timeout`` seconds (a zombie has exited)."""
    try:
        process = psutil.Process(pid)
        deadline = time.monotonic() + timeout
        while process.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
            time.sleep(0.05)
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    """The host's directory; whatever happens, no PostgreSQL of it outlives the test."""
    yield tmp_path
    pid = postmaster_pid(tmp_path / "host" / ".pgdata")
    if pid and alive(pid):
        os.kill(pid, signal.SIGINT)  # PostgreSQL's fast shutdown
        deadline = time.monotonic() + 30
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)


def test_the_wheel_holds_only_the_app(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert {name.split("/")[0] for name in names if ".dist-info/" not in name} == {"memory_engine"}
    assert "memory_engine/migrations/0001_initial.py" in names
    assert "memory_engine/templates/admin/memory_engine/console/base.html" in names
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    assert "License-Expression: Apache-2.0" in metadata
    urls = dict(line.removeprefix("Project-URL: ").split(", ", 1) for line in metadata.splitlines()
                if line.startswith("Project-URL: "))
    assert {"Homepage", "Documentation", "Changelog"} <= set(urls)
    # every link of the description works on a package index
    links = re.findall(r"\]\(([^)]+)\)", metadata)
    assert links and all(link.startswith(("https://", "#")) for link in links), links
    assert urls["Source"] + "/blob/main/docs/operations.md" in links


def test_the_readme_installs_from_a_clone_with_extras_that_exist() -> None:
    """Not on PyPI yet: the README installs from a clone (verified by hand in a fresh venv against
    the package index, which this suite does not reach), naming only extras pyproject declares."""
    import tomllib

    section = readme_section("Add it to your project")
    assert "not on PyPI yet" in section
    (install,) = [code for language, code in fenced_blocks(section) if language == "bash" and "pip install" in code]
    assert "git clone" in install
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    named = set(re.findall(r"pip install '\./django-memory-engine\[(\w[\w-]*)\]'", install))
    assert named and named <= extras, (named, extras)


def test_the_processes_a_test_starts_take_ctrl_c() -> None:
    """The walkthrough's runserver (below) and `make run` (tests/test_make_run.py) are stopped
    with SIGINT, as Ctrl-C stops them. A suite started in the background by a shell without job
    control (`make test &`) has SIGINT ignored, and its children would inherit that and never
    stop: tests/conftest.py gives the suite's process its handler back."""
    code = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert child.stdout.strip() == "True"


@pytest.mark.skipif(shutil.which("curl") is None, reason="the README's walkthrough uses curl")
def test_a_startproject_host_configured_from_the_readme(workdir: Path) -> None:
    snippets = host_snippets()
    python = new_venv(workdir / "venv", build_wheel(workdir))
    env = {key: value for key, value in os.environ.items()
           if key not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL",
                          "PYTHONPATH") and not key.startswith("MEMORY_ENGINE")}
    env["PATH"] = f"{python.parent}{os.pathsep}{env['PATH']}"  # `python` in the walkthrough is the venv's

    def run(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(args, cwd=workdir / "host", env=env, capture_output=True, text=True,
                                timeout=300, **kwargs)
        assert result.returncode == 0, f"{args}\n{result.stdout}\n{result.stderr}"
        return result

    subprocess.run([str(python), "-m", "django", "startproject", "host"], cwd=workdir, env=env, check=True)
    # the installed app, and nothing else of the repository
    where = run("python", "-c", "import memory_engine; print(memory_engine.__file__)").stdout
    assert where.startswith(str(workdir / "venv"))
    assert subprocess.run(["python", "-c", "import example_project"], cwd=workdir / "host", env=env,
                          capture_output=True).returncode != 0
    for name in ("settings.py", "urls.py"):
        with open(workdir / "host" / "host" / name, "a", encoding="utf-8") as module:
            module.write("\n" + snippets[name])

    checked = run("python", "manage.py", "check")
    assert "System check identified no issues" in checked.stdout, checked.stdout + checked.stderr
    assert "misconfigured" not in checked.stderr  # django-q2's own Q_CLUSTER warning
    run("python", "manage.py", "migrate", "--noinput")

    port = free_port()
    log = workdir / "runserver.log"
    server = subprocess.Popen(["python", "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
                              cwd=workdir / "host", env={**env, "PYTHONFAULTHANDLER": "1"}, stdout=log.open("w"),
                              stderr=subprocess.STDOUT,
                              start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, log.read_text()
            try:
                if httpx.get(f"{base}/api/v1/memories", timeout=2).status_code == 401:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "runserver did not answer"
            time.sleep(0.5)

        walkthrough = snippets["walkthrough"].replace("localhost:8000", f"127.0.0.1:{port}")
        output = run("bash", "-euo", "pipefail", "-c", walkthrough).stdout
        decoder, answers, position = json.JSONDecoder(), [], 0
        while position < len(output.rstrip()):
            answer, position = decoder.raw_decode(output, position)
            answers.append(answer)
            while position < len(output) and output[position].isspace():
                position += 1
        written, found = answers
        assert written["action"] == "created", written
        assert found["results"][0]["source"] == "memory" and found["results"][0]["id"] == written["id"], found

        schema = httpx.get(f"{base}/api/schema/?format=json", timeout=30).json()
        assert schema["info"]["title"] == "memory_engine API"  # no SPECTACULAR_SETTINGS in this host
    finally:
        data_dir = workdir / "host" / ".pgdata"
        pid = postmaster_pid(data_dir)  # read now: the server removes the file as it stops
        if server.poll() is None:
            server.send_signal(signal.SIGINT)  # like Ctrl-C: runserver exits, its atexit stops PostgreSQL
            try:
                # bounded by the stop's own bounds (fast, then immediate shutdown, then a kill)
                server.wait(timeout=120)
            except subprocess.TimeoutExpired:
                server.send_signal(signal.SIGABRT)  # PYTHONFAULTHANDLER: every thread's stack to the log
                with contextlib.suppress(subprocess.TimeoutExpired):
                    server.wait(timeout=5)
                with contextlib.suppress(ProcessLookupError):  # the abort ended the whole group
                    os.killpg(server.pid, signal.SIGKILL)
                server.wait()
                raise AssertionError(
                    f"runserver did not exit within 120 s of SIGINT:\n{log.read_text()[-6000:]}") from None
    # the last process using the embedded PostgreSQL stopped it, and its exit waited for the
    # postmaster to exit (a zombie for the moment its new parent takes to reap it counts as exited)
    assert not (pid and still_running_after(pid, timeout=10)), "the embedded PostgreSQL outlived its last user"
