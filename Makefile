# cursorkit: the commands the README names. Every target creates the venv by itself on first use.
#
#   make test    everything CI runs: Rust fmt/clippy/tests, ruff, mypy, stubtest, pytest (benches once)
#   make demo    release build, then `cursorkit demo`: generate a topic, rebuild it on local Spark, verify
#   make demo-cluster  the Spark guide's cluster recipe (wheel, packed env, spark-submit, S3 in and out)
#                against a standalone cluster and an S3 server started on 127.0.0.1
#   make tour    release build, then the guided tour of the library (python -m cursorkit.tour)
#   make bench   release build, then `cursorkit bench` (JSON in .benchmarks/) and the issue benchmarks
#   make fuzz    release build, then the model and fuzz suites at their long counts (an hour or more)
#   make lint    static checks only (no build): cargo fmt/clippy, ruff, mypy
#   make fmt     rewrite Rust and Python sources in the house style
#   make docs    the API reference and guides in site/ (and the Rust crate's docs), warnings as errors
#   make wheel   abi3 release wheels (manylinux2014 x86_64/aarch64, musllinux_1_2 x86_64) + sdist in dist/
#   make proto   regenerate python/cursorkit/proto/*_pb2.py[i] from the .proto sources
#   make clean   build outputs and tool caches; `make distclean` also removes the venv

PYTHON ?= python3
VENV ?= .venv

BIN := $(VENV)/bin
PY := $(BIN)/python
# Written after pip has installed requirements-dev.txt; newer than that file = nothing to install.
STAMP := $(VENV)/.stamp-requirements-dev
PY_DIRS := python tests benches scripts

# Every cargo and maturin run builds pyo3 against the venv's interpreter; keeping this one value
# for all of them stops pyo3's build script from rerunning (and everything above it rebuilding).
export PYO3_PYTHON := $(abspath $(PY))

# maturin builds in a target directory of its own: it sets PYO3_BUILD_EXTENSION_MODULE and
# PYO3_CONFIG_FILE for pyo3's build scripts, plain cargo does not, so one shared target/ would rebuild
# pyo3, numpy and the binding at every switch between cargo and maturin.
# tests/product/test_wheels_and_sdist.py uses it too.
MATURIN := CARGO_TARGET_DIR=$(abspath target/ext) $(BIN)/maturin

.NOTPARALLEL:
.PHONY: test demo demo-cluster tour bench fuzz lint fmt wheel docs proto clean distclean venv develop develop-release \
	rust-lint rust-test python-lint typecheck stubtest pytest

test: lint rust-test develop stubtest docs pytest

demo: develop-release
	$(PY) -m cursorkit.pipeline.cli demo --dir cursorkit-demo

demo-cluster: wheel develop
	$(PY) scripts/demo_cluster.py --wheel-dir dist --dir cursorkit-demo-cluster

tour: develop-release
	$(PY) -m cursorkit.tour

bench: develop-release
	$(PY) -m cursorkit.cli bench --json .benchmarks/cursorkit-bench.json
	$(PY) -m pytest benches --benchmark-enable --benchmark-only -s

# The same model/fuzz tests CI runs at a bounded count, here at their long counts; Rust's randomised
# decoder tests likewise (CURSORKIT_FUZZ=long raises their case counts).
fuzz: develop-release
	CURSORKIT_FUZZ=long cargo test --workspace --exclude cursorkit-py --locked --release
	CURSORKIT_FUZZ=long $(PY) -m pytest tests -m fuzz

lint: rust-lint python-lint typecheck

fmt: venv
	cargo fmt --all
	$(BIN)/ruff check --fix $(PY_DIRS)
	$(BIN)/ruff format $(PY_DIRS)

wheel: venv
	$(PY) scripts/build_wheels.py --out dist

# The API reference and guides (mkdocs-material + mkdocstrings) into site/, warnings as errors, and the
# Rust crate's docs (every public item documented: #![deny(missing_docs)]).
docs: develop
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet
	RUSTDOCFLAGS="-D warnings" cargo doc -p cursorkit-core --no-deps --locked --quiet

proto: venv
	$(PY) -m grpc_tools.protoc -Ipython --python_out=python --pyi_out=python python/cursorkit/proto/*.proto

clean:
	cargo clean
	rm -rf dist site .pytest_cache .hypothesis .benchmarks .ruff_cache .mypy_cache
	find python tests benches -name __pycache__ -type d -prune -exec rm -rf {} +
	find python -name '*.so' -type f -exec rm -f {} +

distclean: clean
	rm -rf $(VENV)

# --- the venv -------------------------------------------------------------------------------------

venv: $(STAMP)

$(STAMP): requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check --quiet -r requirements-dev.txt
	cp requirements-dev.txt $@

# --- build the extension into the venv (editable: python/ is on the path, _core*.so lands there) ---

# Dev profile: our crates unoptimised, dependencies at opt-level 2 (workspace Cargo.toml).
develop: venv
	VIRTUAL_ENV=$(abspath $(VENV)) $(MATURIN) develop

develop-release: venv
	VIRTUAL_ENV=$(abspath $(VENV)) $(MATURIN) develop --release

# --- the steps of `make test` -----------------------------------------------------------------------

rust-lint: venv
	cargo fmt --all --check
	cargo clippy --workspace --all-targets --locked -- -D warnings
	cargo package -p cursorkit-core --locked --allow-dirty --quiet

# The binding (cursorkit-py) holds no Rust tests: pytest tests it through the extension `develop` builds,
# and clippy --all-targets checks it. Testing it here would only build pyo3, numpy and ndarray once more
# (at opt-level 2, in target/debug) and link an empty test binary against libpython.
rust-test: venv
	cargo test --workspace --exclude cursorkit-py --locked

python-lint: venv
	$(BIN)/ruff check $(PY_DIRS)
	$(BIN)/ruff format --check $(PY_DIRS)

typecheck: venv
	$(PY) -m mypy

stubtest: develop
	$(PY) -m mypy.stubtest cursorkit._core --mypy-config-file pyproject.toml --allowlist stubtest-allowlist.txt

pytest: develop
	$(PY) -m pytest --durations=20  # the slowest tests: make test should stay near 20 minutes
