"""Training and encoding on a real Dask cluster: a `LocalCluster` of two worker processes, started
once for this module. Merges and token arrays must equal those of local processes, and a worker
that dies or a file that goes must end the run with a clear error and no output."""

import importlib.util
import os
import socket
import time

import numpy as np
import pytest

from cs336_basics.bpe import train_bpe
from cs336_basics.cli import main
from cs336_basics.corpora.executors import dask_executor
from cs336_basics.errors import WorkerError
from tests.test_sources import DOCS, EOT, VOCAB, TEXT, WRITERS, FaultyExecutor, write_jsonl

# Imported in the fixture, not here: importing distributed takes seconds, which every collection of
# the suite would pay.
pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("distributed") is None, reason="needs dask[distributed]"),
    pytest.mark.slow,
]


@pytest.fixture(scope="module")
def client():
    import dask
    import distributed

    # A task whose worker dies is not retried, so that test fails at once instead of after retries.
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
            memory_limit="1GiB", silence_logs=40,
        )
        client = distributed.Client(cluster, timeout=60)
        client.wait_for_workers(2, timeout=60)
        yield client
        client.close()
        cluster.close()


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dask-shards")
    kinds = ["parquet", "jsonl.gz", "txt", "jsonl", "parquet"]
    for i, kind in enumerate(kinds):
        WRITERS[f"corpus.{kind}"](folder / f"shard-{i}.{kind}", DOCS[i * 12 : (i + 1) * 12])
    return folder


@pytest.fixture(scope="module")
def local_result(shards):
    return train_bpe(shards, VOCAB, [EOT], num_workers=2, piece_size=400)


def test_training_on_dask_equals_local_processes(client, shards, local_result):
    assert train_bpe(shards, VOCAB, [EOT], executor=client.get_executor(), piece_size=400) == local_result


def test_encoding_on_dask_equals_local_processes(client, tmp_path, shards, local_result):
    from cs336_basics.bpe import Tokenizer

    tokenizer = Tokenizer(*local_result, [EOT])
    local, remote = tmp_path / "local.npy", tmp_path / "dask.npy"
    tokenizer.encode_file(shards, local, num_workers=2, piece_size=300)
    tokenizer.encode_file(shards, remote, executor=client.get_executor(), piece_size=300)
    assert np.load(remote).tolist() == np.load(local).tolist() == tokenizer.encode(TEXT)


def test_encoding_on_dask_with_the_tiktoken_engine(client, tmp_path, shards, local_result):
    """The engine travels with each unit (pickled, ranks and all) and each Dask worker builds its
    tiktoken Encoding once."""
    from cs336_basics.bpe import Tokenizer

    tokenizer = Tokenizer(*local_result, [EOT])
    remote = tmp_path / "dask.npy"
    tokenizer.encode_file(shards, remote, executor=client.get_executor(), piece_size=300, engine="tiktoken")
    assert np.load(remote).tolist() == tokenizer.encode(TEXT)


def test_bpe_command_on_the_cluster(client, tmp_path, shards, local_result, capsys):
    address = client.scheduler.address
    out = tmp_path / "tok"
    argv = ["train", str(shards), "--vocab-size", str(VOCAB), "--out", str(out), "--dask-scheduler", address, "--quiet"]
    assert main(argv) == 0
    assert (out / "merges.txt").read_bytes()
    from cs336_basics.bpe import Tokenizer

    trained = Tokenizer.from_files(out / "vocab.json", out / "merges.txt", [EOT])
    assert (trained.vocab, trained.merges) == local_result
    ids = tmp_path / "ids.npy"
    assert main(["encode", "--tokenizer", str(out), str(shards), "--out", str(ids), "--dask-scheduler", address,
                 "--quiet"]) == 0
    assert np.load(ids).tolist() == trained.encode(TEXT)
    assert "on the Dask cluster" in capsys.readouterr().out


def test_a_file_that_disappears_on_the_cluster(client, tmp_path, local_result):
    from cs336_basics.bpe import Tokenizer

    for i in range(3):
        write_jsonl(tmp_path / f"s{i}.jsonl", DOCS[i::3])
    out = tmp_path / "out" / "ids.npy"
    out.parent.mkdir()
    executor = FaultyExecutor(client.get_executor(), 2, fault=(tmp_path / "s2.jsonl").unlink)
    with pytest.raises(FileNotFoundError, match="s2.jsonl"):
        Tokenizer(*local_result, [EOT]).encode_file(tmp_path, out, executor=executor, piece_size=10)
    assert os.listdir(out.parent) == []


def test_a_worker_that_dies_on_the_cluster(client, tmp_path, shards, local_result):
    from cs336_basics.bpe import Tokenizer

    out = tmp_path / "ids.npy"
    with pytest.raises(WorkerError, match="Dask cluster failed a task: KilledWorker"):
        Tokenizer(*local_result, [EOT]).encode_file(
            shards, out, executor=FaultyExecutor(client.get_executor(), 2, kill=True), piece_size=300
        )
    assert not out.exists()


def test_a_closed_port_is_refused_at_once():
    """Dask retries a refused connection until its connect timeout (30 s); nothing listens there, so say so."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.perf_counter()
    with pytest.raises(WorkerError, match=f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}"):
        with dask_executor(f"tcp://127.0.0.1:{port}"):
            pass
    assert time.perf_counter() - started < 10


def test_a_dataset_directory_on_the_cluster_resumes_to_the_same_bytes(client, tmp_path, shards, local_result):
    """A run on the cluster, to a URL, that loses a worker part way, run again on the cluster, gives
    the bytes of an uninterrupted run with local processes."""
    from cs336_basics.bpe import Tokenizer
    from tests.test_dataset_writer import files_of

    tokenizer = Tokenizer(*local_result, [EOT])
    tokenizer.encode_dataset(shards, tmp_path / "local", shard_size=300, num_workers=2)
    out = f"file://{tmp_path}/dask"  # a URL, as a cluster's workers would write to an object store
    with pytest.raises(WorkerError, match="KilledWorker"):
        tokenizer.encode_dataset(shards, out, shard_size=300,
                                 executor=FaultyExecutor(client.get_executor(), 12, kill=True))
    assert not (tmp_path / "dask" / "manifest.json").exists()
    written = tokenizer.encode_dataset(shards, out, shard_size=300, executor=client.get_executor())
    assert written.reused_bytes > 0
    assert files_of(tmp_path / "dask") == files_of(tmp_path / "local")
