"""The object cache: a module compiled before comes back byte for byte without LLVM."""

from __future__ import annotations

import pytest

from compiler import cache
from compiler.codegen import llvm
from compiler.codegen.targets import get_target
from tests.codegen.test_targets import axpy_module


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("KILN_NO_CACHE", raising=False)
    return tmp_path / "kiln" / "objects"


def test_a_second_compile_reads_the_cache(empty_cache, monkeypatch):
    target = get_target("host")
    first = llvm.emit_object(axpy_module(target), target)
    assert len(list(empty_cache.glob("*.o"))) == 1

    def no_llvm(*args):
        raise AssertionError("compiled again")

    monkeypatch.setattr(llvm, "_emit_object", no_llvm)
    assert llvm.emit_object(axpy_module(target), target) == first
    with pytest.raises(AssertionError, match="compiled again"):  # another level is another key
        llvm.emit_object(axpy_module(target), target, level=2)


def test_targets_do_not_share_entries(empty_cache):
    host, mcu = get_target("host"), get_target("cortex-m7")
    a = llvm.emit_object(axpy_module(host), host)
    b = llvm.emit_object(axpy_module(mcu), mcu)
    assert a != b and len(list(empty_cache.glob("*.o"))) == 2


def test_the_oldest_objects_go_past_the_limit(empty_cache, monkeypatch):
    monkeypatch.setattr(cache, "OBJECT_CACHE_LIMIT", 250)
    for i in range(5):
        cache.cached_object("k", f"module {i}", lambda: b"x" * 100)
    assert len(list(empty_cache.glob("*.o"))) == 2  # 200 bytes fit, 300 would not


def test_no_cache_when_switched_off(empty_cache, monkeypatch):
    monkeypatch.setenv("KILN_NO_CACHE", "1")
    target = get_target("host")
    llvm.emit_object(axpy_module(target), target)
    assert not empty_cache.exists()


def test_an_unwritable_cache_only_costs_time(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    monkeypatch.delenv("KILN_NO_CACHE", raising=False)
    target = get_target("host")
    assert llvm.emit_object(axpy_module(target), target)[:4] == b"\x7fELF"
