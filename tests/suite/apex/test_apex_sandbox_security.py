"""Hostile programs through ``run_command``: what each backend that works here stops (docs/threat-model.md).

bubblewrap (strong) is held to every promise. The weak ``unshare`` backend is run only where a test pins
something it does promise (no network, no process outliving the call, the caps, machine-independent
output); what it does NOT stop is stated in ``test_weak_backend_leaves_the_host_filesystem_visible``.
"""

from __future__ import annotations

import os
import resource
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

import pytest

from evoaudit.suite.apex.base.workspace import Workspace
from evoaudit.suite.apex.runtime import tools
from evoaudit.suite.apex.runtime.isolation import sandbox_works

REPO = Path(__file__).resolve().parents[3]
bwrap_only = pytest.mark.skipif(not sandbox_works("bwrap"), reason="bubblewrap does not start here")


def _kinds(*kinds: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize(
        "kind",
        [
            pytest.param(k, marks=pytest.mark.skipif(not sandbox_works(k), reason=f"{k} does not start here"))
            for k in kinds
        ],
    )


def _ws(kind: str, **limits: int) -> Workspace:
    ws = Workspace("w", "ana@firm.com", ("firm.com",))
    ws.settings.sandbox = kind
    for k, v in limits.items():
        setattr(ws.settings, k, v)
    return ws


def _run(ws: Workspace, command: str) -> str:
    out, err = tools.call_tool(ws, "run_command", {"command": command})
    assert err is None, err
    return out


@bwrap_only
def test_no_capability_and_a_non_root_user_inside():
    out = _run(_ws("bwrap"), "id -u; grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status")
    assert out.splitlines()[1:] == [
        "1000",
        "CapPrm:\t0000000000000000",
        "CapEff:\t0000000000000000",
        "CapBnd:\t0000000000000000",
    ]


@bwrap_only
def test_remount_and_a_pth_drop_into_the_venv_fail():
    site = f"/opt/venv/lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
    out = _run(
        _ws("bwrap"),
        "mount -o remount,bind,rw /usr && echo REMOUNTED;"
        " mount -o remount,bind,rw /opt/venv && echo REMOUNTED;"
        f" echo 'import os' > {site}/zz_evil.pth && echo DROPPED; echo x > /usr/evil && echo WROTE",
    )
    assert "REMOUNTED" not in out and "DROPPED" not in out and "WROTE" not in out
    assert not list(Path(sys.prefix).glob("lib/python*/site-packages/zz_evil.pth"))


@bwrap_only
def test_only_workspace_home_spool_and_tmp_are_writable():
    # Every mount point the program can write to, from its own mount table (proc and dev are not binds).
    code = (
        "import os\n"
        "for line in open('/proc/self/mountinfo'):\n"
        "    f = line.split()\n"
        "    if 'rw' in f[5].split(',') and not f[4].startswith(('/proc', '/dev')):\n"
        "        print('RW', f[4])\n"
        "for d in ('/', '/etc', '/usr', '/opt/venv', '/opt/workspace_api', '/root',\n"
        "          '/workspace', '/home/user', '/spool', '/tmp'):\n"
        "    try:\n"
        "        open(os.path.join(d, 'probe'), 'w').close(); print('WROTE', d)\n"
        "    except OSError:\n"
        "        pass\n"
    )
    ws = _ws("bwrap")
    ws.put_file("probe.py", code.encode())
    out = _run(ws, "python probe.py")
    rw = {line.split()[1] for line in out.splitlines() if line.startswith("RW ")}
    wrote = {line.split()[1] for line in out.splitlines() if line.startswith("WROTE ")}
    allowed = {"/workspace", "/home/user", "/spool", "/tmp"}
    assert rw <= allowed and wrote == allowed, out


@bwrap_only
def test_host_canaries_are_unreadable(tmp_path):
    canary = tmp_path / "canary600.txt"
    canary.write_text("HOST-SECRET")
    canary.chmod(0o600)
    targets = [canary, REPO / "pyproject.toml", Path("/etc/shadow"), Path("/etc/hostname")]
    out = _run(_ws("bwrap"), "; ".join(f"cat {t} && echo READ-{i}" for i, t in enumerate(targets)))
    assert "READ-" not in out and "HOST-SECRET" not in out and "[tool." not in out


def _listeners(tmp_path: Path):
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()
    unix_path = tmp_path / "host.sock"
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(str(unix_path))
    unix.listen()
    abstract = socket.socket(socket.AF_UNIX)
    abstract_name = f"evoaudit-test-{os.getpid()}"
    abstract.bind("\0" + abstract_name)
    abstract.listen()
    return [tcp, unix, abstract], tcp.getsockname()[1], unix_path, abstract_name


@_kinds("bwrap", "unshare")
def test_no_network_tcp_loopback_or_abstract_socket(kind, tmp_path):
    socks, port, unix_path, abstract = _listeners(tmp_path)
    try:
        code = (
            "import socket\n"
            "def tryit(name, fam, addr):\n"
            "    s = socket.socket(fam)\n"
            "    s.settimeout(2)\n"
            "    try:\n"
            "        s.connect(addr); print('CONNECTED', name)\n"
            "    except OSError as e:\n"
            "        print('refused', name, type(e).__name__)\n"
            f"tryit('tcp', socket.AF_INET, ('127.0.0.1', {port}))\n"
            f"tryit('abstract', socket.AF_UNIX, '\\0{abstract}')\n"
            f"tryit('unix', socket.AF_UNIX, {str(unix_path)!r})\n"
        )
        ws = _ws(kind)
        ws.put_file("net.py", code.encode())
        out = _run(ws, "python net.py")
    finally:
        for s in socks:
            s.close()
    assert "CONNECTED tcp" not in out and "CONNECTED abstract" not in out, out
    if kind == "bwrap" or os.geteuid() == 0:
        # bubblewrap does not show the host path; as root, unshare runs as nobody, who cannot reach it.
        assert "CONNECTED unix" not in out, out


def _sleepers(tag: str) -> list[int]:
    out = []
    for pid in os.listdir("/proc"):
        try:
            if tag.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                out.append(int(pid))
        except (OSError, ValueError):
            continue
    return out


@_kinds("bwrap", "unshare")
def test_no_process_outlives_the_call(kind):
    tag = f"31{os.getpid() % 1000:03d}"
    command = (
        f"nohup sleep {tag}1 >/dev/null 2>&1 & setsid sleep {tag}2 >/dev/null 2>&1 &"
        f" (sleep {tag}3 >/dev/null &);"
        f' python -c \'import os, time; os.fork() or os.execvp("sleep", ["sleep", "{tag}4"])\' ; echo started'
    )
    out = _run(_ws(kind), command)
    assert "started" in out
    time.sleep(0.2)
    assert _sleepers(tag) == []


@_kinds("bwrap", "unshare")
def test_a_fork_bomb_stops_at_the_process_limit(kind):
    code = (
        "import os, time\n"
        "n = 0\n"
        "for _ in range(500):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError:\n"
        "        break\n"
        "    if pid == 0:\n"
        "        time.sleep(30); os._exit(0)\n"
        "    n += 1\n"
        "print('forked', n)\n"
    )
    ws = _ws(kind, max_processes=16)
    ws.put_file("bomb.py", code.encode())
    t0 = time.monotonic()
    out = _run(ws, "python bomb.py")
    assert time.monotonic() - t0 < 10
    forked = int(out.split("forked ")[1].split()[0])
    assert forked < 16, out


@_kinds("bwrap", "unshare")
def test_a_gigabyte_of_output_is_cut_at_the_cap_with_the_parent_memory_bounded(kind):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.monotonic()
    out = _run(_ws(kind, output_kb=256), "head -c 1000000000 /dev/zero | tr '\\0' x; echo done")
    elapsed = time.monotonic() - t0
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert out.startswith(f"[killed: output over {256 * 1024} bytes]\n") and "done" not in out
    assert elapsed < 10 and grown_mb < 64, (elapsed, grown_mb)


@_kinds("bwrap", "unshare")
def test_big_sparse_and_linked_files_are_not_copied_back_and_later_calls_work(kind):
    ws = _ws(kind, file_size_mb=1)
    ws.put_file("keep.txt", b"original")
    out = _run(
        ws,
        "head -c 3000000 /dev/zero > big.bin; echo big=$?; truncate -s 900K holes.bin;"
        " ln keep.txt twin.txt; ln -s /etc/hostname link.txt; ln /etc/passwd passwd.txt 2>/dev/null; true",
    )
    assert "big.bin" not in ws.files or len(ws.files["big.bin"].data) <= 1 << 20
    for name in ("holes.bin", "twin.txt", "link.txt", "passwd.txt"):
        assert name not in ws.files, (name, out)
    assert ws.files["keep.txt"].data == b"original"
    assert "[not copied back: 'holes.bin': a sparse file]" in out
    assert "[not copied back: 'twin.txt': a hard link]" in out
    assert "[not copied back: 'link.txt': a symbolic link]" in out
    assert _run(ws, "cat keep.txt") == "[exit code 0]\noriginal"


@_kinds("bwrap", "unshare")
def test_names_the_workspace_cannot_hold_are_skipped_with_a_note(kind):
    ws = _ws(kind)
    ws.put_file("a/b.txt", b"b")
    deep = "/".join(["d" * 200] * 6)
    out = _run(
        ws, f"printf x > $'bad\\xff.txt'; mkdir -p {deep} && printf y > {deep}/f; rm -r a; printf z > a"
    )
    assert "[not copied back: 'bad" in out and f"[not copied back: '{deep}/f'" in out
    assert ws.files["a"].data == b"z" and "a/b.txt" not in ws.files
    assert _run(ws, "cat a") == "[exit code 0]\nz"


@_kinds("bwrap", "unshare")
def test_output_is_the_same_on_replay_and_names_no_host_path(kind):
    ws = _ws(kind)
    ws.put_file(
        "scripts/boom.py", b"import os, sys\nprint(os.getcwd(), os.environ['HOME'], sys.prefix)\n1/0\n"
    )
    first = _run(ws.copy(), "pwd; python scripts/boom.py")
    second = _run(ws.copy(), "pwd; python scripts/boom.py")
    assert first == second
    assert "/workspace\n/workspace /home/user /opt/venv\n" in first
    assert 'File "/workspace/scripts/boom.py", line 3' in first and "apex-run-" not in first


@pytest.mark.skipif(
    not (sandbox_works("bwrap") and sandbox_works("unshare")), reason="needs both bwrap and unshare"
)
def test_a_run_forced_onto_the_weak_backend_shows_the_same_text():
    ws = _ws("bwrap")
    ws.put_file("scripts/boom.py", b"import os\nprint(os.getcwd())\nopen('/workspace/missing.txt')\n")
    strong = _run(ws.copy(), "pwd; python scripts/boom.py")
    ws.settings.sandbox = "unshare"
    assert _run(ws.copy(), "pwd; python scripts/boom.py") == strong


@pytest.mark.skipif(not sandbox_works("unshare"), reason="unshare does not start here")
def test_weak_backend_leaves_the_host_filesystem_visible():
    """What ``unshare`` does NOT protect: the host filesystem is visible with the permissions of the user
    the sandbox runs as (nobody when the audit runs as root), so any world-readable file (the checkout, a
    results file) can be read. It still blocks the network and confines output paths (tests above)."""
    # A world-readable host file in a world-traversable directory (the checkout may sit in a closed home).
    host = Path(tempfile.mkdtemp(prefix="evoaudit-host-", dir="/tmp"))
    try:
        host.chmod(0o755)
        (host / "host.txt").write_text("host file\n")
        (host / "host.txt").chmod(0o644)
        out = _run(_ws("unshare"), f"head -c 200 {host / 'host.txt'} >/dev/null && echo READ-HOST")
    finally:
        shutil.rmtree(host)
    assert "READ-HOST" in out, out


@bwrap_only
def test_dev_shm_is_capped_and_dev_is_read_only_while_dev_null_stays_writable():
    out = _run(
        _ws("bwrap", tmp_mb=8),
        "echo x > /dev/null && echo NULL_OK; touch /dev/x && echo DEV_WRITTEN;"
        " head -c 4000000 /dev/zero > /dev/shm/a && echo SHM_SMALL_OK;"
        " head -c 8000000 /dev/zero > /dev/shm/b && echo SHM_OVER_CAP",
    )
    assert "NULL_OK" in out and "SHM_SMALL_OK" in out, out
    assert "DEV_WRITTEN" not in out and "SHM_OVER_CAP" not in out, out


def _zombie_children_or_defunct_bwraps() -> int:
    n = 0
    for pid in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except (OSError, ValueError):
            continue
        comm, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
        if rest[0] == "Z" and (int(rest[1]) == os.getpid() or comm == "bwrap"):
            n += 1
    return n


@_kinds("bwrap", "unshare")
def test_calls_leave_no_zombie_process_behind(kind):
    ws = _ws(kind)
    before = _zombie_children_or_defunct_bwraps()
    for _ in range(3):
        _run(ws, "true; (sleep 0.1 &)")
    time.sleep(0.3)
    assert _zombie_children_or_defunct_bwraps() <= before
