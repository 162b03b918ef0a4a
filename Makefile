# The two commands of the README. Both do all the set-up first (scripts/setup.sh, idempotent).
SHELL := /bin/bash
VENV := .venv
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: run test setup

run: setup
	dvc repro --all-pipelines   # dvc.yaml and leaderboard/dvc.yaml

test: setup
	python -m pytest -n 2 -q --durations=15

setup:
	@bash scripts/setup.sh
