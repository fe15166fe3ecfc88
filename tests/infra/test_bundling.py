"""The Lambda bundle's pieces that need no pip run: dropping the distributions the AWS path never imports, and
the bytecode the bundle carries."""

from __future__ import annotations

from pathlib import Path

import pytest
from infra.bundling import EXCLUDED_DISTRIBUTIONS, PipBundling, drop_distributions


def _install(root: Path, dist: str, version: str, files: list[str]) -> None:
    info = root / f"{dist}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Name: {dist}\n")
    for name in files:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    record = [f"{name},sha256=x,1" for name in files] + [f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(record) + "\n")


def test_given_a_target_folder_when_dropping_grpc_and_protobuf_then_only_their_files_go(
    tmp_path: Path,
) -> None:
    _install(tmp_path, "grpcio", "1.85.3", ["grpc/__init__.py", "grpc/_cython/cygrpc.so"])
    _install(tmp_path, "protobuf", "7.36.2", ["google/protobuf/__init__.py"])
    _install(tmp_path, "opensearch_protobufs", "1.2.0", ["opensearch/protobufs/__init__.py"])
    _install(tmp_path, "opensearch_py", "3.2.0", ["opensearchpy/__init__.py"])
    (tmp_path / "google" / "other").mkdir(parents=True)  # another distribution's part of the namespace

    removed = drop_distributions(tmp_path)

    assert sorted(removed) == sorted(EXCLUDED_DISTRIBUTIONS)
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    assert left == [
        "google",
        "google/other",
        "opensearch_py-3.2.0.dist-info",
        "opensearch_py-3.2.0.dist-info/METADATA",
        "opensearch_py-3.2.0.dist-info/RECORD",
        "opensearchpy",
        "opensearchpy/__init__.py",
    ]


def test_given_a_function_when_bundled_then_memstack_comes_without_the_framework_integrations(
    tmp_path: Path,
) -> None:
    from infra.bundling import REPO

    PipBundling(REPO / "functions" / "api").try_bundle(str(tmp_path), image=None)  # type: ignore[arg-type]

    assert (tmp_path / "memstack" / "memory.py").is_file() and (tmp_path / "app.py").is_file()
    assert not (tmp_path / "memstack" / "integrations").exists()


def _pyc_header(path: Path) -> tuple[bytes, int]:
    data = path.read_bytes()
    return data[:4], int.from_bytes(data[4:8], "little")


def test_given_a_function_when_bundled_then_each_module_has_unchecked_hash_bytecode_for_the_runtime(
    tmp_path: Path,
) -> None:
    import subprocess

    from infra.bundling import PYTHON_VERSION, REPO, bytecode_python

    python = bytecode_python()
    assert python is not None, f"no CPython {PYTHON_VERSION} to compile the bundle's bytecode with"
    magic = subprocess.run(
        [python, "-c", "import importlib.util, sys; sys.stdout.buffer.write(importlib.util.MAGIC_NUMBER)"],
        capture_output=True,
        check=True,
    ).stdout

    PipBundling(REPO / "functions" / "context").try_bundle(str(tmp_path), image=None)  # type: ignore[arg-type]

    tag = f"cpython-{PYTHON_VERSION.replace('.', '')}"
    modules = sorted(tmp_path.rglob("*.py"))
    missing = [
        str(m.relative_to(tmp_path))
        for m in modules
        if not (m.parent / "__pycache__" / f"{m.stem}.{tag}.pyc").is_file()
    ]
    assert modules and not missing, f"modules bundled without {tag} bytecode: {missing[:5]}"
    headers = {_pyc_header(p) for p in tmp_path.rglob(f"*.{tag}.pyc")}
    assert headers == {(magic, 0b01)}, (
        "bytecode not of the runtime's version, or not hash-based unchecked (PEP 552)"
    )


def test_given_the_bundle_bytecode_when_the_source_timestamp_changes_then_python_still_loads_the_bytecode(
    tmp_path: Path,
) -> None:
    import os
    import subprocess

    from infra.bundling import bytecode_python, compile_bytecode

    python = bytecode_python()
    assert python is not None
    (tmp_path / "probe.py").write_text("VALUE = 'compiled'\n")
    assert compile_bytecode(tmp_path, python)
    (tmp_path / "probe.py").write_text("VALUE = 'source'\n")  # a zip's 2-second timestamps: mtime differs
    os.utime(tmp_path / "probe.py", (1, 1))

    out = subprocess.run(
        [python, "-B", "-c", "import probe; print(probe.VALUE)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)},
    ).stdout.strip()

    assert out == "compiled", "the bytecode was checked against the source (not unchecked-hash)"


def test_given_no_runtime_interpreter_when_bundled_then_the_bundle_ships_sources_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import infra.bundling as bundling

    monkeypatch.setattr(bundling, "bytecode_python", lambda: None)

    PipBundling(bundling.REPO / "functions" / "context").try_bundle(str(tmp_path), image=None)  # type: ignore[arg-type]

    assert (tmp_path / "app.py").is_file() and not list(tmp_path.rglob("*.pyc"))
    assert "without bytecode" in capsys.readouterr().err


def test_given_bytecode_or_not_then_the_code_and_layer_asset_hashes_differ(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import infra.bundling as bundling

    function = bundling.REPO / "functions" / "context"
    with_bytecode = (bundling.code_hash(function), bundling.dependencies_key(bytecode=True))
    monkeypatch.setattr(bundling, "bytecode_python", lambda: None)

    assert bundling.code_hash(function) != with_bytecode[0], "a bundle gaining bytecode would not be uploaded"
    assert bundling.dependencies_key(bytecode=False) != with_bytecode[1]
