"""The Lambda bundle's pieces that need no pip run: dropping the distributions the AWS path never imports."""

from __future__ import annotations

from pathlib import Path

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
