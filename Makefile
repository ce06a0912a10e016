# Two commands a newcomer needs: `make reproduce` (the main job) and `make test`.
# Both create .venv on first use. `make reproduce` installs the package alone (numpy, scipy, pandas,
# pyarrow, matplotlib, tqdm: the paper's numbers need nothing else); `make test` adds, in the same
# .venv, the CPU build of torch and everything the tests run against (TRL, verl, AReaL, Ray, the docs).
# Each step has its stamp: .venv/.installed-core, .venv/.installed-test.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# The torch we test with, from PyTorch's index of CPU wheels (the registry's torch is the multi-GB
# CUDA build). A GPU user picks a CUDA index, e.g. TORCH_INDEX=https://download.pytorch.org/whl/cu126;
# TORCH_INDEX= (empty) takes torch from pip's own configuration. See docs/install.md ("GPU").
TORCH  ?= torch==2.13.0
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
# verl 0.9.1 without its GPU stack: the modules its legacy trainer (verl.trainer.ppo.ray_trainer) and
# its default V1 trainer (verl.trainer.ppo.v1, on TransferQueue) import, which the tests run (their
# rollout dumps, batch balancing and DAPO replay buffer) on the CPU.
VERL   ?= verl==0.9.1 torchdata==0.11.0 transferqueue==0.1.11
VERL_DEPS ?= tensordict==0.10.0 omegaconf==2.4.0 codetiming==1.4.0 orjson==3.13.0 pillow==13.0.0 peft==0.21.2 \
             cachetools==8.0.2 uvicorn==0.54.0 fastapi==0.165.0 aiohttp==3.14.5 msgspec==0.23.0 \
             prometheus_client==0.26.0 pyzmq==27.3.0
# AReaL 1.0.4 without its GPU stack: what its rollout loop and dump (areal.infra.workflow_executor,
# areal.workflow.rlvr, areal.utils.stats_logger) import beyond VERL_DEPS (aiohttp), which the tests
# run on the CPU. hydra-core 1.3.8 asks for omegaconf < 2.4 but runs with verl's 2.4.0: installed --no-deps.
# (SkyRL is not installed: skyrl 0.4.0 and skyrl-train 0.3.1 require Python 3.12.)
AREAL  ?= areal==1.0.4 hydra-core==1.3.8 antlr4-python3-runtime==4.9.3
AREAL_DEPS ?= aiofiles==25.1.0 blinker==1.9.0 \
             boto3==1.44.8 botocore==1.44.8 colorlog==6.12.0 einops==0.8.2 Flask==3.1.3 \
             gradio_client==2.7.2 httpx2==2.16.2 itsdangerous==2.2.0 jiter==0.19.0 jmespath==1.1.0 lark==1.3.1 \
             llvmlite==0.50.0 numba==0.68.1 nvidia-ml-py==13.615.71 openai==3.57.0 \
             prettytable==3.19.0 pyecharts==2.1.0 s3transfer==0.19.3 simplejson==4.3.0 \
             sniffio==1.3.1 swanlab==0.6.12 tenacity==9.2.1 tensorboardX==2.6.5 trackio==0.43.0 uvloop==0.23.0 \
             wandb==0.31.0 Werkzeug==3.1.9 wrapt==2.5.2

# trl-cgrpo 0.2.0 (a GRPOTrainer subclass that pads its groups), whose log the tests read: it declares
# trl < 1.15 but runs on TRL 1.16.0 unchanged, so installed --no-deps (its other needs are TRL's).
TRL_CGRPO ?= trl-cgrpo==0.2.0

# setuptools warns on every editable install of a package with a mapped folder (gsd._data is data/)
# that a folder named like the package could shadow it: 10 lines that read as a failed install. That
# one warning, by its message, is silenced; every other warning of the build still prints.
EDITABLE = PYTHONWARNINGS="ignore:Editable installation"

.PHONY: install install-core test docs reproduce figures bench clean

# The main job's environment: the package and its six dependencies (about 600 MB), no torch.
$(VENV)/.installed-core: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(EDITABLE) $(PY) -m pip install -q -e .
	touch $@

# The test job's: torch alone from TORCH_INDEX (its dependencies, from the ordinary index, with the
# extras next), then verl and AReaL without their GPU stacks. Their own dependencies come first,
# verl and AReaL last with --no-deps: installed earlier, each later `pip install` would re-check
# their full requirements (hydra-core, vllm, ...) and print pip's red resolver warning.
$(VENV)/.installed-test: $(VENV)/.installed-core
	$(PY) -m pip install -q --no-deps $(TORCH) $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(EDITABLE) $(PY) -m pip install -q -e ".[test,bench,docs,trl,torch]" tensorboard==2.21.0
	$(PY) -m pip install -q $(VERL_DEPS)
	$(PY) -m pip install -q --no-deps $(VERL) $(AREAL) $(AREAL_DEPS)
	$(PY) -m pip install -q --no-deps $(TRL_CGRPO)
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@

install-core: $(VENV)/.installed-core

install: $(VENV)/.installed-test

test: $(VENV)/.installed-test
	$(PY) -m pytest -q

# The documentation site, warnings as errors; notebooks run in their fast mode (cached between builds).
docs: $(VENV)/.installed-test
	$(PY) -m sphinx -b html -E -W --keep-going docs docs/_build/html
	@echo "open docs/_build/html/index.html"

# The paper's evidence into reports/latest (report.md, its figures in reports/latest/figures): no
# tracked file changes. The stages beyond the paper (the allocation comparison: torch; TRL on a tiny
# transformer: the trl extra) run when their extras are installed (after `make test`), and the report
# names the extra otherwise.
reproduce: $(VENV)/.installed-core
	$(VENV)/bin/gsd reproduce --out reports/latest

# The committed figures/, regenerated on purpose (then committed): the reproduction's, every stage
# included (the loss-geometry figures, the campaign's, the allocation comparison's).
figures: $(VENV)/.installed-test
	$(VENV)/bin/gsd reproduce --out reports/latest --figures figures

bench: $(VENV)/.installed-test
	$(PY) benchmarks/bench_core.py
	$(PY) benchmarks/bench_simulator.py --out runs/bench_simulator.json
	$(PY) benchmarks/bench_sweep.py
	$(PY) benchmarks/bench_diagnose.py
	$(PY) benchmarks/bench_allocation.py --out runs/bench_allocation.json
	$(PY) benchmarks/bench_trl_tracker.py --out runs/bench_trl_tracker.json

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .hypothesis docs/_build docs/api/generated
