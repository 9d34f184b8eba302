# Two commands: `make run` and `make test`. Both set up what they need themselves.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
SAMPLE := app/resources/models/digits_cnn.onnx
OUT := out
# The MLPerf Tiny models, float and int8, `make bench` times against onnxruntime and LiteRT
# (their .tflite twins in ../shared/models/tflite).
SHARED_ONNX := ../shared/models/onnx
KILN_BENCH_MODELS := ad01_fp32 kws_ref_model_float32 pretrainedResnet vww_96_float \
  ad01_int8 kws_ref_model pretrainedResnet_quant vww_96_int8
# The int8 .tflite files, timed under TFLite's requantization rule against LiteRT; and the
# int8 models again at the AVX2 level (x86-64-v3), which every x86 machine the bench runs on
# has, so an AVX-512 machine times the kernels an AVX2-only one would use.
SHARED_TFLITE := ../shared/models/tflite
KILN_BENCH_TFLITE := ad01_int8 kws_ref_model pretrainedResnet_quant vww_96_int8

# Debian libraries Qt needs offscreen and on a real (or Xvfb) display, and a font for text.
DEBIAN_PACKAGES := libgl1 libegl1 libxkbcommon0 libxkbcommon-x11-0 libfontconfig1 libdbus-1-3 \
  libglib2.0-0 fonts-dejavu-core libxcb-icccm4 libxcb-keysyms1 libxcb-cursor0 libxcb-image0 \
  libxcb-render-util0 libxcb-shape0 libxcb-randr0 libxcb-xinerama0 desktop-file-utils \
  shared-mime-info
# `make package` bundles the shared libpython, which Debian's own Python keeps in a package of
# its own.
DEBIAN_PACKAGES += $(shell $(PYTHON) -c 'import sys; print("libpython%d.%d" % \
  sys.version_info[:2] if sys.base_prefix == "/usr" else "")' 2>/dev/null)
# Cross compiler, newlib (semihosting libc) and QEMU for the Cortex-M firmware tests, the host
# C compiler (host bundles, QEMU's instruction-counting plugin), and lld with qemu-user for
# running AArch64 and RISC-V 32 objects; installed without recommends (qemu-system-arm would
# otherwise pull in hundreds of desktop libraries).
ARM_PACKAGES := gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm gcc lld-14 qemu-user
# Headless Chromium and its WebDriver: the browser that checks exported SVG pictures (through
# Selenium), also installed without recommends.
BROWSER_PACKAGES := chromium chromium-driver

.PHONY: setup system-packages run test lint bench docs clean dist package install-desktop

# As root, install the Debian packages that are missing (nothing happens when all are there).
# A package removed but not purged still has a status: only "install ok installed" counts.
INSTALLED = dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed"
system-packages:
	@missing=$$(for p in $(DEBIAN_PACKAGES); do $(INSTALLED) || echo $$p; done); \
	arm=$$(for p in $(ARM_PACKAGES) $(BROWSER_PACKAGES); do $(INSTALLED) || echo $$p; done); \
	if [ -n "$$missing$$arm" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && \
	    { [ -z "$$missing" ] || apt-get install -y -qq $$missing; } && \
	    { [ -z "$$arm" ] || apt-get install -y -qq --no-install-recommends $$arm; }; \
	  else echo "note: missing Debian packages (install them as root):" $$missing $$arm; fi; \
	fi

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Kiln needs Python 3.11 or newer"'
	test -x $(PY) || $(PYTHON) -m venv $(VENV) || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq python3-venv; \
	  $(PYTHON) -m venv $(VENV); else echo "install python3-venv first"; exit 1; fi; }
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,package,explore]'
	touch $(STAMP)

setup: system-packages $(STAMP)

# Start the workbench on the bundled sample model. With no display it runs the main flow
# offscreen and says where it wrote the screenshots.
run: setup
	$(VENV)/bin/kiln --output $(OUT)

# The wheel (`pip install dist/kiln-*.whl` gives a working `kiln`, sample model inside).
dist: setup
	rm -f dist/kiln-*.whl
	$(PY) -m pip wheel -q --no-deps -w dist .

# The standalone Linux build (PyInstaller, packaging/kiln.spec): the folder kiln/ holding the
# `kiln` executable with its own Python, Qt and every resource, and the same as a .tar.gz.
PACKAGE_DIR ?= dist/package
PACKAGE_WORK ?= build/package
package: setup
	@start=$$(date +%s); \
	rm -rf $(PACKAGE_DIR) $(PACKAGE_WORK) && \
	$(VENV)/bin/pyinstaller --noconfirm --log-level ERROR --distpath $(abspath $(PACKAGE_DIR)) \
	  --workpath $(abspath $(PACKAGE_WORK)) packaging/kiln.spec && \
	name=kiln-$$($(PY) -c 'from importlib.metadata import version; print(version("kiln"))')-linux-$$(uname -m) && \
	tar -C $(PACKAGE_DIR) -czf $(PACKAGE_DIR)/$$name.tar.gz kiln && \
	echo "built $(PACKAGE_DIR)/kiln ($$(du -sm $(PACKAGE_DIR)/kiln | cut -f1) MB) and" \
	  "$(PACKAGE_DIR)/$$name.tar.gz ($$(du -sm $(PACKAGE_DIR)/$$name.tar.gz | cut -f1) MB) in" \
	  "$$(( $$(date +%s) - start )) s; start it with $(PACKAGE_DIR)/kiln/kiln"

# The desktop entry, icon and MIME types, for this user.
DATA_HOME := $(or $(XDG_DATA_HOME),$(HOME)/.local/share)
install-desktop:
	install -D -m 644 packaging/kiln.desktop $(DATA_HOME)/applications/kiln.desktop
	install -D -m 644 packaging/kiln.svg $(DATA_HOME)/icons/hicolor/scalable/apps/kiln.svg
	install -D -m 644 packaging/kiln-mime.xml $(DATA_HOME)/mime/packages/kiln.xml
	-command -v update-mime-database >/dev/null && update-mime-database $(DATA_HOME)/mime
	-command -v update-desktop-database >/dev/null && \
	  update-desktop-database $(DATA_HOME)/applications

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

# Two workers; each takes the queued tests of the other when it runs out (worksteal), so the
# long tests, which tests/conftest.py starts first, never leave one core idle at the end.
# Bytecode is kept (in the venv, not beside the sources) even where the environment says not
# to: otherwise both workers compile every module and rewrite every test's asserts again, and
# so does every Python process the tests start.
test: setup lint
	PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX=$(CURDIR)/$(VENV)/pycache \
	  QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q -n 2 --dist worksteal --durations=10

bench: setup
	$(PY) -m pip install -q -e '.[bench]'
	@status=0; \
	$(PY) tests/bench/bench_reference.py || status=1; \
	$(PY) tests/bench/bench_passes.py || status=1; \
	$(PY) tests/bench/bench_memory.py || status=1; \
	$(PY) tests/bench/bench_hostile.py || status=1; \
	$(PY) tests/bench/bench_cortex_m.py || status=1; \
	$(PY) tests/bench/bench_tuning.py || status=1; \
	$(PY) tests/bench/bench_quantizer.py || status=1; \
	$(PY) tests/bench/bench_nncf.py || status=1; \
	$(PY) tests/bench/bench_profiling.py || status=1; \
	$(PY) tests/bench/bench_explore.py || status=1; \
	QT_QPA_PLATFORM=offscreen $(PY) tests/bench/bench_workbench.py || status=1; \
	QT_QPA_PLATFORM=offscreen $(PY) tests/bench/bench_layout.py || status=1; \
	for m in $(KILN_BENCH_MODELS); do \
	  if [ -f $(SHARED_ONNX)/$$m.onnx ]; then $(VENV)/bin/kiln bench $(SHARED_ONNX)/$$m.onnx || status=1; \
	  else echo "note: $(SHARED_ONNX)/$$m.onnx not found, skipped"; fi; \
	done; \
	for m in $(KILN_BENCH_TFLITE); do \
	  if [ -f $(SHARED_TFLITE)/$$m.tflite ]; then $(VENV)/bin/kiln bench $(SHARED_TFLITE)/$$m.tflite || status=1; \
	  else echo "note: $(SHARED_TFLITE)/$$m.tflite not found, skipped"; fi; \
	done; \
	if [ "$$(uname -m)" = x86_64 ] && grep -qw avx2 /proc/cpuinfo; then for m in $(KILN_BENCH_TFLITE); do \
	  if [ -f $(SHARED_ONNX)/$$m.onnx ] && [ -f $(SHARED_TFLITE)/$$m.tflite ]; then \
	    $(VENV)/bin/kiln bench $(SHARED_ONNX)/$$m.onnx --target x86-64-v3 || status=1; \
	    $(VENV)/bin/kiln bench $(SHARED_TFLITE)/$$m.tflite --target x86-64-v3 || status=1; fi; \
	done; fi; \
	$(VENV)/bin/kiln bench $(SAMPLE) || status=1; \
	if [ $$status != 0 ]; then echo "make bench: a benchmark missed its goal or failed (see above)"; fi; \
	exit $$status

docs: setup
	$(PY) -m compiler.opdoc > docs/operators.md
	$(PY) -m compiler.passes.doc > docs/passes.md

clean:
	rm -rf $(VENV) $(OUT) dist build .pytest_cache .ruff_cache
