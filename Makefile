# The two commands of the README. Both do all the set-up first (scripts/setup.sh, idempotent).
SHELL := /bin/bash
VENV := .venv
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: run test setup litert-torch-env

run: setup
	dvc repro --all-pipelines   # dvc.yaml and leaderboard/dvc.yaml

# worksteal: each worker takes a contiguous half of the files and steals from the other's end,
# so a module's fixtures are mostly built by one worker, not by both as --dist load does;
# the litert-torch environment lets the conformance sample take the pytorchcv -> TFLite route
test: setup litert-torch-env
	python -m pytest -n 2 --dist worksteal -q --durations=15

setup:
	@bash scripts/setup.sh

litert-torch-env:
	@bash scripts/setup-litert-torch-env.sh
