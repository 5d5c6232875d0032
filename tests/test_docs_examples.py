"""The examples of README.md and docs/ run as written: one test per page.

Every fenced block whose info string is `python`, `sh` or `bash` runs, in the order of the page, in
one fresh temporary directory per page (the working directory). It starts with `corpus.txt` (a copy
of `cs336_basics/data/sample.txt`) and `data/TinyStoriesV2-GPT4-train.txt` and `-valid.txt` (small
stand-ins cut from it), and `.venv`, this environment, as a clone has it after its first `uv run`;
any other file a page needs, an earlier block of the page makes.

- The python blocks of a page run in one interpreter, one namespace (`__main__`'s, so what they
  define can go to worker processes), one after the other: a later block may use what an earlier
  one defined. A traceback names the page and its line.
- sh and bash blocks run in `bash -euo pipefail`, where `uv run [--group G] [--extra E] X` runs X
  from this environment (the one running the tests, whose dev group holds every group's packages),
  as `uv run` would after installing them; any other `uv` command is refused.
- `<!-- not run: REASON -->` on the line just before a fence skips the block (a cluster, a
  download, the whole test suite); at most one block in ten may be skipped so.
- `<!-- slow -->` there runs the block only under `--all`; so a later block must not need what a
  slow block makes.
- Output shown to the reader goes in ```` ```text ```` blocks, samples in `json`, `tsv`, ...: never
  run. A fence with no info string, or a spelling that looks runnable but is not one of the three
  (`shell`, `console`, `py`, ...), fails `test_every_fence_says_its_language`, so no example escapes by its spelling.

Pretrained names (`gpt2`, `cl100k_base`, ...) load offline: TIKTOKEN_CACHE_DIR is filled from the
test dependencies. `uv run python tests/test_docs_examples.py` prints how many blocks each page has.
"""

from __future__ import annotations

import functools
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUN = ("python", "sh", "bash")
# Spellings that a reader's eye takes for a runnable example but the runner would not run.
EVASIVE = {"py", "python3", "pycon", "ipython", "shell", "console", "zsh", "shell-session", "bash-session", "sh-session"}
SAMPLE = ROOT / "cs336_basics" / "data" / "sample.txt"
EOT = "<|endoftext|>"
BLOCK_TIMEOUT = 120  # seconds: a block taking longer is stuck (a block meant to take over 2 s is slow)
SLOW_TIMEOUT = 900  # seconds, for a block marked slow
SLOW_HINT = 5.0  # seconds: a block not marked slow that takes longer is named in a warning
SHOWN = 4000  # characters of a failed block's stderr (its end) that the failure shows


def pages() -> list[str]:
    """README.md and every page under docs/, as paths relative to the repository."""
    docs = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md"))
    return ["README.md", *docs]


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # of the first line of code, 1-based (the fence is the line before)
    lang: str  # the info string's first word, lower case; "" for none
    code: str
    mark: str | None = None  # "not run", "slow" or None
    reason: str = ""  # why not run


_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")  # indented in a list, too
_MARK = re.compile(r"^\s*<!--\s*(?P<what>not run|slow)\b\s*:?\s*(?P<reason>.*?)\s*-->\s*$")
_ANY_MARK = re.compile(r"^\s*<!--\s*(not run|slow)\b")


class PageError(ValueError):
    """A page whose markers the runner cannot read: the message says where."""


def parse(text: str, page: str) -> list[Block]:
    """The fenced blocks of a Markdown page, each with the marker on the line before its fence."""
    lines = text.split("\n")
    blocks: list[Block] = []
    pending: tuple[int, str, str] | None = None  # a marker line waiting for its fence
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if pending is not None and (match is None or pending[0] != i - 1):
            raise PageError(f"{page}:{pending[0] + 1}: a <!-- {pending[1]} --> marker must stand on the line just "
                            "before a fence")
        if _ANY_MARK.match(lines[i]):
            mark = _MARK.match(lines[i])
            if mark is None:
                raise PageError(f"{page}:{i + 1}: write the marker as <!-- not run: REASON --> or <!-- slow -->")
            if mark["what"] == "not run" and not mark["reason"]:
                raise PageError(f"{page}:{i + 1}: a block not run needs its reason: <!-- not run: REASON -->")
            pending = (i, mark["what"], mark["reason"])
            i += 1
            continue
        if match is None:
            i += 1
            continue
        fence, indent = match["fence"], len(match["indent"])
        info = match["info"].strip().lstrip("{").lstrip(".")
        lang = info.split()[0].rstrip("}").lower() if info else ""
        close = re.compile(rf"^ *{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            line = lines[j]
            body.append(line[min(indent, len(line) - len(line.lstrip(" "))):])
            j += 1
        mark, reason = (pending[1], pending[2]) if pending is not None else (None, "")
        blocks.append(Block(page, i + 2, lang, "\n".join(body) + "\n", mark, reason))
        pending = None
        i = j + 1
    if pending is not None:
        raise PageError(f"{page}:{pending[0] + 1}: a marker with no fence after it")
    return blocks


def page_blocks(page: str) -> list[Block]:
    return parse((ROOT / page).read_text(encoding="utf-8"), page)


# --- the working directory --------------------------------------------------------------------------


def make_workdir(folder: Path) -> Path:
    """A page's fresh working directory: corpus.txt and the two TinyStories stand-ins, and `.venv`
    (this environment), which the reader's clone has after its first `uv run`."""
    folder.mkdir(parents=True)
    (folder / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    text = SAMPLE.read_text(encoding="utf-8")
    shutil.copyfile(SAMPLE, folder / "corpus.txt")
    documents = text.split(EOT)
    cut = len(documents) * 3 // 4
    (folder / "data").mkdir()
    (folder / "data" / "TinyStoriesV2-GPT4-train.txt").write_text(EOT.join(documents[:cut]) + EOT, encoding="utf-8")
    (folder / "data" / "TinyStoriesV2-GPT4-valid.txt").write_text(EOT.join(documents[cut:]), encoding="utf-8")
    return folder


# `uv run [OPTIONS] X` runs X from the environment running the tests: its dev group holds the
# packages of every group and extra the pages name. Other uv commands would change the environment.
BASH_ENV = r"""
uv() {
  if [ "${1-}" != run ]; then
    echo "the examples runner runs 'uv run ...' only, not 'uv $*': mark the block <!-- not run: REASON -->" >&2
    return 2
  fi
  shift
  while [ $# -gt 0 ]; do
    case "$1" in
      --group|--extra) shift 2 ;;
      --group=*|--extra=*|--all-extras|--all-groups|--quiet|-q|--frozen|--locked|--no-sync|--offline) shift ;;
      -*) echo "the examples runner does not know 'uv run $1'" >&2; return 2 ;;
      *) break ;;
    esac
  done
  # Failing here, not in the function, so that the ERR trap names the page's line and this command.
  "$@" || { _examples_status=$?; _examples_failed="uv run $*"; return $_examples_status; }
}
export -f uv
trap '_examples_status=$?; echo "line $LINENO: exit status $_examples_status from: ${_examples_failed:-$BASH_COMMAND}" >&2; _examples_failed=' ERR
"""

# The interpreter that runs a page's python blocks, told what to run through its stdin, one JSON line
# per block; it answers on its stdout, and the block's own output goes to the files it is given.
DRIVER = r"""
def _drive():
    import json, os, sys, traceback

    answers = os.fdopen(os.dup(1), "w")
    requests = os.fdopen(os.dup(0), "r")
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    namespace = sys.modules["__main__"].__dict__
    for request in requests:
        request = json.loads(request)
        saved = os.dup(1), os.dup(2)
        out = os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        err = os.open(request["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(out, 1)
        os.dup2(err, 2)
        ok = True
        try:
            # Blank lines first, so that a traceback's line numbers are the page's.
            exec(compile("\n" * (request["line"] - 1) + request["code"], request["path"], "exec"), namespace)
        except SystemExit as e:
            ok = e.code in (None, 0)
            if not ok:
                traceback.print_exc()
        except BaseException:
            ok = False
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in (out, err, *saved):
                os.close(fd)
        answers.write(json.dumps({"ok": ok}) + "\n")
        answers.flush()

_drive()
"""


@dataclass
class Failure:
    block: Block
    status: str
    stderr: str
    stdout: str

    def message(self) -> str:
        err = self.stderr[-SHOWN:]
        out = self.stdout[-1000:]
        return (f"{self.block.page}:{self.block.line}: the {self.block.lang} block failed ({self.status})\n"
                f"--- its code ---\n{self.block.code}--- its stderr ---\n{err}"
                + (f"--- its stdout (the end) ---\n{out}" if out.strip() else ""))


class PageRunner:
    """Runs a page's blocks in order in `work`; `run` returns a Failure or None. Each process it
    starts leads a process group of its own, and `close` ends every group: nothing a block started
    (a server in the background, a worker) outlives the page."""

    def __init__(self, work: Path, env: dict[str, str], logs: Path):
        self.work, self.logs = work, logs
        self.python: subprocess.Popen | None = None
        self.groups: list[int] = []
        (logs / "bash_env.sh").write_text(BASH_ENV, encoding="utf-8")
        self.env = {**env, "BASH_ENV": str(logs / "bash_env.sh")}
        self.count = 0

    def run(self, block: Block) -> Failure | None:
        self.count += 1
        timeout = SLOW_TIMEOUT if block.mark == "slow" else BLOCK_TIMEOUT
        if block.lang == "python":
            return self._python(block, timeout)
        script = "\n" * (block.line - 1) + block.code  # `line N` in bash's messages is the page's line
        shell = subprocess.Popen(["bash", "-euo", "pipefail", "-c", script], cwd=self.work, env=self.env,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 start_new_session=True)
        self.groups.append(shell.pid)
        try:
            out, err = shell.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _end_group(shell.pid)
            out, err = shell.communicate()
            return Failure(block, f"still running after {timeout} s", _text(err), _text(out))
        if shell.returncode != 0:
            return Failure(block, f"exit status {shell.returncode}", _text(err), _text(out))
        return None

    def _python(self, block: Block, timeout: float) -> Failure | None:
        if self.python is None:
            self.python = subprocess.Popen([sys.executable, "-c", DRIVER], cwd=self.work, env=self.env,
                                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                           start_new_session=True)
            self.groups.append(self.python.pid)
        out, err = self.logs / f"{self.count}.out", self.logs / f"{self.count}.err"
        request = {"code": block.code, "line": block.line, "path": str(ROOT / block.page),
                   "out": str(out), "err": str(err)}
        self.python.stdin.write(json.dumps(request) + "\n")
        self.python.stdin.flush()
        ready, _, _ = select.select([self.python.stdout], [], [], timeout)
        answer = self.python.stdout.readline() if ready else ""
        read = lambda path: path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""  # noqa: E731
        if not answer:
            _end_group(self.python.pid)
            status = f"python exited with {self.python.wait()}" if ready else f"still running after {timeout} s"
            self.python = None
            return Failure(block, status, read(err), read(out))
        if not json.loads(answer)["ok"]:
            return Failure(block, "an exception", read(err), read(out))
        return None

    def close(self):
        if self.python is not None and self.python.poll() is None:
            self.python.stdin.close()
            try:
                self.python.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.python = None
        for group in self.groups:
            _end_group(group)


def _end_group(group: int) -> None:
    try:
        os.killpg(group, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode("utf-8", errors="replace")


def examples_env(tiktoken_cache: Path) -> dict[str, str]:
    """The environment a page's blocks run in: this environment's programs first on PATH, offline."""
    bin_dir = str(Path(sys.prefix) / "bin")
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "VIRTUAL_ENV": sys.prefix,
           "TIKTOKEN_CACHE_DIR": str(tiktoken_cache), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "NO_MKDOCS_2_WARNING": "1"}
    for name in [n for n in env if n.startswith("PYTEST_") or n == "BASH_ENV"]:
        del env[name]  # a block is run as a reader runs it, not as part of this test
    return env


def run_blocks(blocks: list[Block], work: Path, env: dict[str, str], logs: Path) -> tuple[int, Failure | None]:
    """Run `blocks` in order in `work`; how many ran, and the first failure (the rest are not run)."""
    logs.mkdir(parents=True, exist_ok=True)
    runner = PageRunner(work, env, logs)
    try:
        with open(logs / "seconds.tsv", "w", encoding="utf-8") as seconds:
            for block in blocks:
                started = time.perf_counter()
                failure = runner.run(block)
                seconds.write(f"{block.line}\t{time.perf_counter() - started:.2f}\n")
                if failure is not None:
                    return runner.count, failure
        return runner.count, None
    finally:
        runner.close()


# An example must not reach the network (the tests run offline, and an address in an example, a
# cluster's say, is no machine of ours): where the system lets us, a page runs in a network
# namespace of its own that has only the loopback interface (`unshare`, as root or in a user namespace).
UNSHARE = ["unshare", "--map-root-user", "--net", "--"]


@functools.cache
def can_isolate() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run([*UNSHARE, "true"], capture_output=True)
    return probe.returncode == 0


def loopback_up() -> None:
    """Bring up `lo` in this (new) network namespace, where it starts down."""
    import fcntl
    import socket
    import struct

    siocsifflags, iff_up, iff_loopback, iff_running = 0x8914, 0x1, 0x8, 0x40
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s, siocsifflags, struct.pack("16sH14x", b"lo", iff_up | iff_loopback | iff_running))


def run_page(blocks: list[Block], work: Path, env: dict[str, str], logs: Path) -> tuple[int, Failure | None]:
    """`run_blocks`, in a network namespace of the page's own where the system allows one."""
    if not can_isolate():
        return run_blocks(blocks, work, env, logs)
    logs.mkdir(parents=True, exist_ok=True)
    job = logs / "page.json"
    job.write_text(json.dumps({"blocks": [vars(b) for b in blocks], "work": str(work), "env": env,
                               "logs": str(logs)}), encoding="utf-8")
    done = subprocess.run([*UNSHARE, sys.executable, __file__, "--run-page", str(job)], cwd=ROOT,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise RuntimeError(f"the page runner failed (status {done.returncode}):\n{done.stderr[-SHOWN:]}")
    result = json.loads(job.with_suffix(".result.json").read_text(encoding="utf-8"))
    failure = result["failure"]
    if failure is not None:
        failure = Failure(Block(**failure.pop("block")), **failure)
    return result["ran"], failure


def _run_page_job(job: Path) -> None:
    spec = json.loads(job.read_text(encoding="utf-8"))
    loopback_up()
    ran, failure = run_blocks([Block(**b) for b in spec["blocks"]], Path(spec["work"]), spec["env"],
                              Path(spec["logs"]))
    failure = None if failure is None else {**vars(failure), "block": vars(failure.block)}
    job.with_suffix(".result.json").write_text(json.dumps({"ran": ran, "failure": failure}), encoding="utf-8")


def to_run(blocks: list[Block], *, slow: bool) -> list[Block]:
    return [b for b in blocks if b.lang in RUN and b.mark != "not run" and (slow or b.mark != "slow")]


# --- the tests ----------------------------------------------------------------------------------------


# The guide's pages, whose examples take most of the time, run from a test file of their own
# (tests/test_docs_guide_examples.py): pytest-xdist hands out a file at a time, so the two files share
# the suite's processes.
GUIDE = ["docs/training.md", "docs/encoding.md", "docs/datasets.md", "docs/pretrained.md", "docs/looking-inside.md"]


@pytest.mark.parametrize("page", [page for page in pages() if page not in GUIDE])
def test_page_examples(page, tiktoken_cache, tmp_path, request, record_property):
    run_page_test(page, tiktoken_cache, tmp_path, request, record_property)


def run_page_test(page, tiktoken_cache, tmp_path, request, record_property) -> None:
    """Run `page`'s examples (the slow ones too under --all) and fail naming the first that fails."""
    blocks = to_run(page_blocks(page), slow=request.config.getoption("--all"))
    record_property("blocks_run", len(blocks))
    if not blocks:
        pytest.skip(f"{page} has no example to run")
    started = time.perf_counter()
    ran, failure = run_page(blocks, make_workdir(tmp_path / "work"), examples_env(tiktoken_cache), tmp_path / "logs")
    if failure is not None:
        pytest.fail(failure.message(), pytrace=False)
    assert ran == len(blocks)
    record_property("seconds", round(time.perf_counter() - started, 2))
    marks = {b.line: b.mark for b in blocks}
    for line, seconds in (row.split("\t") for row in (tmp_path / "logs" / "seconds.tsv").read_text().splitlines()):
        if float(seconds) > SLOW_HINT and marks[int(line)] != "slow":
            warnings.warn(f"{page}:{line}: the block took {float(seconds):.1f} s: mark it <!-- slow -->", stacklevel=1)


def counts() -> dict[str, dict[str, int]]:
    """Per page: its python/sh/bash blocks, how many run by default, are slow, are not run."""
    table = {}
    for page in pages():
        blocks = [b for b in page_blocks(page) if b.lang in RUN]
        slow = sum(b.mark == "slow" for b in blocks)
        skipped = sum(b.mark == "not run" for b in blocks)
        table[page] = {"blocks": len(blocks), "default": len(blocks) - slow - skipped, "slow": slow,
                       "not run": skipped}
    return table


def summary(table: dict[str, dict[str, int]]) -> str:
    total = {k: sum(row[k] for row in table.values()) for k in ("blocks", "default", "slow", "not run")}
    lines = [f"{'page':32} {'blocks':>6} {'default':>7} {'slow':>5} {'not run':>7}"]
    for page, row in [*table.items(), ("all", total)]:
        lines.append(f"{page:32} {row['blocks']:6} {row['default']:7} {row['slow']:5} {row['not run']:7}")
    lines.append(f"run by `uv run pytest`: {total['default']}; by `uv run pytest --all`: "
                 f"{total['default'] + total['slow']}; not run: {total['not run']} of {total['blocks']}")
    return "\n".join(lines)


def test_examples_counted(record_property):
    table = counts()
    print(summary(table))
    total = sum(row["blocks"] for row in table.values())
    skipped = sum(row["not run"] for row in table.values())
    record_property("blocks", total)
    record_property("blocks_run_with_all", total - skipped)
    assert total > 0
    assert skipped * 10 <= total, f"{skipped} of {total} blocks are marked not run: at most one in ten may be"


def test_every_fence_says_its_language():
    for page in pages():
        for block in page_blocks(page):
            assert block.lang, f"{page}:{block.line - 1}: a fence without an info string (output: ```text)"
            assert block.lang not in EVASIVE, (
                f"{page}:{block.line - 1}: ```{block.lang} is not run: write ```python, ```sh or ```bash "
                "(output shown to the reader: ```text)")
            assert block.mark is None or block.lang in RUN, f"{page}:{block.line - 1}: a marker on a block never run"


# --- the runner itself, on a scratch page ------------------------------------------------------------

SCRATCH = """\
# Scratch

```python
from pathlib import Path
words = Path("corpus.txt").read_text().split()
```

```sh
echo "$(uv run --group docs python -c 'print(2 + 2)')" > four.txt
uv run bpe --help > /dev/null
```

```python
assert len(words) > 1000 and Path("four.txt").read_text() == "4\\n"
assert Path("data/TinyStoriesV2-GPT4-valid.txt").stat().st_size > 1000
```

<!-- not run: a download -->
```sh
exit 3
```

<!-- slow -->
```python
Path("slow.txt").write_text("ran")
```

```text
not code
```
"""


def test_runner_runs_a_page_in_order(tmp_path, tiktoken_cache):
    blocks = parse(SCRATCH, "scratch.md")
    assert [(b.lang, b.mark) for b in blocks] == [
        ("python", None), ("sh", None), ("python", None), ("sh", "not run"), ("python", "slow"), ("text", None)]
    assert blocks[3].reason == "a download" and blocks[0].line == 4
    work = make_workdir(tmp_path / "work")
    ran, failure = run_page(to_run(blocks, slow=False), work, examples_env(tiktoken_cache), tmp_path / "logs")
    assert failure is None, failure.message()
    assert ran == 3 and not (work / "slow.txt").exists()
    ran, failure = run_page(to_run(blocks, slow=True), make_workdir(tmp_path / "again"),
                              examples_env(tiktoken_cache), tmp_path / "logs2")
    assert (ran, failure) == (4, None) and (tmp_path / "again" / "slow.txt").read_text() == "ran"


@pytest.mark.parametrize("broken, line, said", [
    ("```python\nx = 1\nraise ValueError('planted')\n```\n", 5, "ValueError: planted"),
    ("```python\nimport sys\nsys.exit(4)\n```\n", 5, "SystemExit: 4"),
    ("```sh\necho fine\nfalse_command_that_is_missing --x\necho never\n```\n", 5, "false_command_that_is_missing"),
    ("```bash\nuv run bpe train no-such-file.txt --vocab-size 300 --out out\n```\n", 4,
     "exit status 1 from: uv run bpe train no-such-file.txt"),
    ("```sh\nuv pip install something\n```\n", 4, "runs 'uv run ...' only"),
])
def test_runner_names_the_failing_block(broken, line, said, tmp_path, tiktoken_cache):
    page = "# Scratch\n\n" + broken + "\n```python\nprint('after')\n```\n"
    blocks = to_run(parse(page, "scratch.md"), slow=False)
    ran, failure = run_page(blocks, make_workdir(tmp_path / "work"), examples_env(tiktoken_cache), tmp_path / "logs")
    assert ran == 1 and failure is not None  # the block after a failure does not run
    message = failure.message()
    assert message.startswith(f"scratch.md:{blocks[0].line}: the ") and said in message
    assert f"line {line}" in failure.stderr  # python's traceback and bash's messages give the page's line


ISOLATED = """\
```python
import socket
assert [name for _, name in socket.if_nameindex()] == ["lo"]  # no way out but the loopback
```

```sh
uv run python -m http.server 8765 --bind 127.0.0.1 > server.log 2>&1 &
echo $! > server.pid
```

```python
import time, urllib.request
for _ in range(100):
    try:
        page = urllib.request.urlopen("http://127.0.0.1:8765/corpus.txt", timeout=5).read()
        break
    except OSError:
        time.sleep(0.1)
assert page == open("corpus.txt", "rb").read()
```
"""


def test_runner_keeps_a_page_off_the_network_and_ends_what_it_started(tmp_path, tiktoken_cache):
    if not can_isolate():
        message = "unshare cannot make a network namespace here: pages run on the machine's network"
        if os.environ.get("CI") == "true":  # CI runs as root, where it can
            pytest.fail(message)
        pytest.skip(message)
    work = make_workdir(tmp_path / "work")
    ran, failure = run_page(to_run(parse(ISOLATED, "scratch.md"), slow=False), work, examples_env(tiktoken_cache),
                            tmp_path / "logs")
    assert failure is None, failure.message()
    assert ran == 3
    server = int((work / "server.pid").read_text())
    with pytest.raises(ProcessLookupError):  # the server the page left running was ended with the page
        for _ in range(50):
            os.kill(server, 0)
            time.sleep(0.1)


def test_parse_refuses_stray_markers():
    with pytest.raises(PageError, match="scratch.md:1: a block not run needs its reason"):
        parse("<!-- not run -->\n```sh\nx\n```\n", "scratch.md")
    with pytest.raises(PageError, match="scratch.md:1: a <!-- slow --> marker must stand on the line just before"):
        parse("<!-- slow -->\n\n```sh\nx\n```\n", "scratch.md")
    # Fences of four backticks hold three; indented fences (in a list) lose their indentation.
    page = "````text\n```sh\nx\n```\n````\n\n1. item\n\n    ```sh\n    echo hi\n      indented\n    ```\n"
    blocks = parse(page, "scratch.md")
    assert [(b.lang, b.code) for b in blocks] == [("text", "```sh\nx\n```\n"), ("sh", "echo hi\n  indented\n")]


if __name__ == "__main__":
    if sys.argv[1:2] == ["--run-page"]:  # run_page's child, in its network namespace
        _run_page_job(Path(sys.argv[2]))
        sys.exit(0)
    print(summary(counts()))
    print(textwrap.dedent("""
        Each page's test: uv run pytest tests/test_docs_examples.py -k 'PAGE' (add --all for the slow blocks)."""))
