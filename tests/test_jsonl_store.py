"""The append-only record store behind the resumable LLM-built indexes."""

from __future__ import annotations

import pytest

from chunkwise._jsonl import JSONLStore


def _two_records(folder):
    store = JSONLStore(folder, "x.jsonl")
    store.put({"key": "a", "text": "体育消费券"})
    store.put({"key": "b", "text": "体育消费券"})
    return store.path


@pytest.mark.parametrize("cut", [1, 3, 7, 12])  # 1: the newline; 3 and 7: inside a 3-byte character
def test_a_last_line_cut_anywhere_is_dropped_and_the_file_repaired(tmp_path, cut):
    path = _two_records(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[:-cut])
    store = JSONLStore(tmp_path, "x.jsonl")
    if cut == 1:  # only the newline lost: the record is whole, kept, and its newline restored
        assert set(store.records) == {"a", "b"} and path.read_bytes() == data
    else:
        assert set(store.records) == {"a"}
        assert path.read_bytes() == data[: data.index(b"\n") + 1]  # the cut line is gone
    store.put({"key": "c", "text": "续"})
    assert set(JSONLStore(tmp_path, "x.jsonl").records) >= {"a", "c"}


def test_a_damaged_line_before_the_last_names_its_line(tmp_path):
    path = _two_records(tmp_path)
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(lines[0][:-5] + b"\n" + lines[1] + b"\n")
    with pytest.raises(ValueError, match="line 1 is not JSON"):
        JSONLStore(tmp_path, "x.jsonl")
    path.write_bytes(b'{"key": "a", "text": "\xe4\xbd"}\n' + lines[1] + b"\n")
    with pytest.raises(ValueError, match="line 1 is not UTF-8"):
        JSONLStore(tmp_path, "x.jsonl")
