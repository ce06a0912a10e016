# Two commands a newcomer needs: `make reproduce` (the main job) and `make test`.
# Both create .venv on first use and install the package with everything it needs.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# The CPU build of torch we test with. For CUDA see README ("GPU").
TORCH  ?= torch==2.13.0
# verl 0.9.1 without its GPU stack: the modules its legacy trainer (verl.trainer.ppo.ray_trainer) and
# its default V1 trainer (verl.trainer.ppo.v1, on TransferQueue) import, which the tests run (their
# rollout dumps, batch balancing and DAPO replay buffer) on the CPU.
VERL   ?= verl==0.9.1 torchdata==0.11.0 transferqueue==0.1.11
VERL_DEPS ?= tensordict==0.10.0 omegaconf==2.4.0 codetiming==1.4.0 orjson==3.13.0 pillow==13.0.0 peft==0.21.2 \
             cachetools==8.0.2 uvicorn==0.54.0 fastapi==0.165.0 aiohttp==3.14.5 msgspec==0.23.0 hydra-core==1.3.8 \
             prometheus_client==0.26.0 pyzmq==27.3.0

.PHONY: install test docs reproduce figures bench clean

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH)
	$(PY) -m pip install -q -e ".[test,bench,docs,trl]"
	$(PY) -m pip install -q --no-deps $(VERL)
	$(PY) -m pip install -q $(VERL_DEPS)
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@

install: $(VENV)/.installed

test: $(VENV)/.installed
	$(PY) -m pytest -q

# The documentation site, warnings as errors; notebooks run in their fast mode (cached between builds).
docs: $(VENV)/.installed
	$(PY) -m sphinx -b html -E -W --keep-going docs docs/_build/html
	@echo "open docs/_build/html/index.html"

reproduce: $(VENV)/.installed
	$(VENV)/bin/gsd reproduce --out reports/latest --figures figures

figures: $(VENV)/.installed
	$(VENV)/bin/gsd figures --out figures

bench: $(VENV)/.installed
	$(PY) benchmarks/bench_core.py
	$(PY) benchmarks/bench_simulator.py --out runs/bench_simulator.json
	$(PY) benchmarks/bench_sweep.py
	$(PY) benchmarks/bench_diagnose.py
	$(PY) benchmarks/bench_allocation.py --out runs/bench_allocation.json
	$(PY) benchmarks/bench_trl_tracker.py --out runs/bench_trl_tracker.json

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .hypothesis docs/_build docs/api/generated
