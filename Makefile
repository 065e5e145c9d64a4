.PHONY: install example test lint bench bench-quick

install:
	python -m pip install -e '.[tensorflow,dev]'

example: install
	tfdoctor profile examples/naive_loop.py

test:
	bash scripts/test.sh

lint:
	ruff check . && ruff format --check .

bench:
	bash benchmarks/run_all.sh

bench-quick:
	bash benchmarks/run_all.sh --quick
