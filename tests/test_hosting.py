"""Splitting, precompressed siblings, the files table and the host configs, on small folders."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from pathlib import Path

import brotli
import pytest

from bundler.bundle.codec import to_json
from bundler.bundle.options import load_options
from bundler.errors import ConfigError
from bundler.hosting import publish as publish_module
from bundler.hosting.headers import IMMUTABLE, REVALIDATE
from bundler.hosting.publish import HostingOptions, prepare
from bundler.hosting.sizes import parse_size
from tests.test_build import tree


def _folder(root: Path) -> Path:
    (root / "models").mkdir(parents=True)
    (root / "runtime").mkdir()
    (root / "index.html").write_text("<!doctype html>" + "<p>hello</p>" * 200)
    (root / "models" / "big.onnx").write_bytes(b"\x08\x08" + bytes(range(256)) * 40)  # 10 KB
    (root / "runtime" / "noise.wasm").write_bytes(b"\0asm" + os.urandom(3000))
    hashed = b"stable content of a hashed file"
    name = f"lib.{hashlib.sha256(hashed).hexdigest()[:8]}.mjs"
    (root / "runtime" / name).write_bytes(hashed)
    return root


def test_parts_siblings_and_files_table(tmp_path):
    root = _folder(tmp_path / "dist")
    original = (root / "models" / "big.onnx").read_bytes()
    entries = {entry["path"]: entry
               for entry in to_json(prepare(root, HostingOptions(max_file_size=4096)))}
    big = entries["models/big.onnx"]
    assert not (root / "models" / "big.onnx").exists()
    assert [part["path"] for part in big["parts"]] == [f"models/big.onnx.part{i}"
                                                       for i in range(3)]
    assert b"".join((root / p["path"]).read_bytes() for p in big["parts"]) == original
    assert big["bytes"] == len(original) and big["sha256"] == hashlib.sha256(original).hexdigest()
    for part in big["parts"]:
        data = (root / part["path"]).read_bytes()
        assert part["bytes"] == len(data) <= 4096
        assert part["sha256"] == hashlib.sha256(data).hexdigest()
        assert brotli.decompress((root / part["encodings"]["br"]["path"]).read_bytes()) == data
        gz = (root / part["encodings"]["gzip"]["path"]).read_bytes()
        assert gzip.decompress(gz) == data
        assert gz[3] == 0 and gz[4:8] == b"\0\0\0\0"  # no file name, mtime 0
    assert "encodings" not in entries["runtime/noise.wasm"]  # random bytes do not shrink
    assert not (root / "runtime" / "noise.wasm.br").exists()
    assert entries["index.html"]["encodings"]["br"]["bytes"] < 200
    assert all(not path.endswith((".br", ".gz")) for path in entries)


def test_the_same_folder_gives_the_same_bytes(tmp_path):
    trees = []
    for name in ("a", "b"):
        root = _folder(tmp_path / name)
        (root / "runtime" / "noise.wasm").write_bytes(b"\0asm" + bytes(3000))
        files = to_json(prepare(root, HostingOptions(max_file_size=4096)))
        (root / "bundle.json").write_text(json.dumps(files))
        trees.append(tree(root))
    assert trees[0] == trees[1]


def test_host_configs_set_isolation_and_cache_per_name(tmp_path):
    root = _folder(tmp_path / "dist")
    prepare(root, HostingOptions(max_file_size=4096))
    headers = (root / "_headers").read_text()
    assert "/*\n  Cross-Origin-Opener-Policy: same-origin\n  Cross-Origin-Embedder-Policy:" \
           " require-corp" in headers
    hashed = next(p.name for p in (root / "runtime").iterdir() if p.name.startswith("lib."))
    assert f"/runtime/{hashed}\n  Cache-Control: {IMMUTABLE}\n" in headers
    assert f"/models/big.onnx.part0\n  Cache-Control: {REVALIDATE}\n" in headers
    assert "/models/big.onnx.part0.br\n  Cache-Control: no-cache\n  Content-Type:" \
           " application/octet-stream\n  Content-Encoding: br" in headers
    vercel = json.loads((root / "vercel.json").read_text())
    assert vercel["headers"][0]["source"] == "/(.*)"
    assert {"key": "Cache-Control", "value": IMMUTABLE} in next(
        rule["headers"] for rule in vercel["headers"] if rule["source"] == f"/runtime/{hashed}")
    nginx = (root / "nginx.conf").read_text()
    assert "try_files $uri =404;" in nginx and "gzip_static on;" in nginx
    assert f"location = /runtime/{hashed} {{" in nginx
    script = (root / "s3-upload.sh").read_text()
    assert ("aws s3 cp index.html.gz \"$target\"/index.html --content-type 'text/html;"
            " charset=utf-8' --cache-control no-cache --content-encoding gzip") in script
    assert (root / ".nojekyll").is_file()


def test_one_host_writes_only_its_file(tmp_path):
    root = _folder(tmp_path / "dist")
    prepare(root, HostingOptions(hosts=("vercel",)))
    assert (root / "vercel.json").is_file()
    assert not any((root / name).exists() for name in ("_headers", "nginx.conf", ".nojekyll",
                                                       "s3-upload.sh"))


def test_a_big_file_that_cannot_be_split_is_one_clear_error(tmp_path):
    root = _folder(tmp_path / "dist")
    with pytest.raises(ConfigError, match="index.html is .* over --max-file-size 2048"):
        prepare(root, HostingOptions(max_file_size=2048))


def test_sizes_and_hosts_from_flags_and_bundle_toml(tmp_path):
    assert parse_size("25MiB") == 25 * 1024 * 1024
    assert parse_size("10 MB") == 10_000_000 and parse_size(4096) == 4096
    for bad in ("big", "10 parsecs", 12, True):
        with pytest.raises(ValueError):
            parse_size(bad)
    (tmp_path / "bundle.toml").write_text('max_file_size = "2MiB"\nhosts = "all"\n'
                                          "coi_worker = false\n")
    options = load_options(None, {"hosts": "netlify"}, cwd=tmp_path)
    assert (options.max_file_size, options.hosts, options.coi_worker) == (
        2 * 1024 * 1024, ("netlify",), False)
    with pytest.raises(ConfigError, match="--max-file-size: expected a size"):
        load_options(None, {"max_file_size": "huge"}, cwd=tmp_path)
    with pytest.raises(ConfigError, match="--host: unknown 'heroku'"):
        load_options(None, {"hosts": "heroku"}, cwd=tmp_path)


def test_model_files_over_a_mebibyte_are_brotlid_at_quality_9_the_rest_at_11(tmp_path):
    """Quality 11 took 2-3 s of CPU per MB of weights to save under 1 % of their bytes."""
    root = _folder(tmp_path / "dist")
    weights = b"".join(hashlib.sha256(bytes([i % 256, i // 256])).digest()[:16] + bytes(16)
                       for i in range(40000))  # 1.28 MB, half of it compressible
    (root / "models" / "weights.onnx").write_bytes(weights)
    (root / "runtime" / "glue.wasm").write_bytes(weights)
    entries = {entry["path"]: entry for entry in to_json(prepare(root, HostingOptions()))}
    for path, quality in (("models/weights.onnx", 9), ("runtime/glue.wasm", 11),
                          ("models/big.onnx", 11)):
        data = (root / path).read_bytes()
        assert (root / entries[path]["encodings"]["br"]["path"]).read_bytes() == brotli.compress(
            data, quality=quality), path


def test_a_build_splits_and_compresses_each_file_once(build_bundle, monkeypatch):
    # The real publisher runs; the test only counts the files it describes (split, compressed,
    # hashed) and the writes of the host configs. A build used to publish the folder, render
    # the pages, then publish everything but the models and runtime again.
    described: list[str] = []
    configs: list[tuple[str, ...]] = []
    describe, write_configs = publish_module._describe, publish_module.write_host_configs
    monkeypatch.setattr(publish_module, "_describe", lambda directory, paths, options: (
        described.extend(path.relative_to(directory).as_posix() for path in paths)
        or describe(directory, paths, options)))
    monkeypatch.setattr(publish_module, "write_host_configs", lambda directory, files, hosts: (
        configs.append(tuple(hosts)) or write_configs(directory, files, hosts)))
    directory, manifest = build_bundle(None, variants=("fp32", "int8"), max_file_size=200_000)
    listed = [entry["path"] for entry in manifest["files"]]
    assert sorted(described) == sorted(listed) and len(set(listed)) == len(listed)
    assert any(entry.get("parts") for entry in manifest["files"])  # the runtime .wasm is split
    assert {"index.html", "bundle.mjs", "bundle.d.ts"} <= set(described)
    assert len(configs) == 1 and (directory / "_headers").is_file()


def test_the_compression_cache_keeps_the_most_recently_used_within_its_bound(tmp_path,
                                                                              monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    cache = tmp_path / "cache" / "onnx-bundler" / "compressed"
    prepare(_folder(tmp_path / "a"), HostingOptions())
    everything = {path.name: path.stat().st_size for path in cache.iterdir()}
    assert len(everything) >= 4  # a .br and a .gz of the page, the model, the module
    # a second folder of other content, built later: its siblings are the recent ones
    other = tmp_path / "b"
    other.mkdir()
    (other / "index.html").write_text("<!doctype html>" + "<p>other</p>" * 300)
    bound = sum(everything.values())
    monkeypatch.setenv(publish_module.CACHE_ENV, str(bound))
    prepare(other, HostingOptions())
    kept = {path.name: path.stat().st_size for path in cache.iterdir()}
    assert sum(kept.values()) <= bound
    newest = set(kept) - set(everything)
    assert len(newest) == 2  # the new page's .br and .gz stay; the oldest went
    assert set(everything) - set(kept)
    monkeypatch.setenv(publish_module.CACHE_ENV, "0")
    prepare(other, HostingOptions())
    assert list(cache.iterdir()) == []
    monkeypatch.setenv(publish_module.CACHE_ENV, "lots")
    with pytest.raises(ConfigError, match="BUNDLER_COMPRESSED_CACHE_BYTES is 'lots'"):
        prepare(other, HostingOptions())
