# hmemreg: the one entry point.
#   make            build kmod/hmemreg.ko, libhmemreg, tools and tests
#   make deps       install the Debian packages everything needs
#   make test       every test lane this machine can run, one summary, then the
#                   module's lanes under each of TEST_KERNELS (tests/kernels/run)
#   make test-debug the VM suites under a debug kernel (KASAN, kmemleak, lockdep...;
#                   first run builds it, ~20 min on 2 cores; not part of make test)
#   make test-debug-broken  deliberately broken modules must fail that lane
#   make demo       the end-to-end demo (VM with the module)
#   make check-kmod checkpatch --strict, sparse (C=1) and W=1 on the module
#   make aws-ofi-nccl  aws-ofi-nccl 1.21.1 from ../shared/vendor into /var/cache/hmemreg (once)
#   make libfabric2 libfabric 2.6.0 and its fabtests (CUDA HMEM where a toolkit is)
#                   from ../shared/vendor into /var/cache/hmemreg (once; prints the prefix)
#   make install / dkms-install / dkms-uninstall
#   make deb        Debian packages (debhelper, dh-dkms) in $(BUILD)/deb, lintian-checked
# Knobs: KVER/KDIR (kernel to build for), BUILD (userspace build folder),
# PREFIX/DESTDIR (install).

BUILD   ?= build
PREFIX  ?= /usr/local
DESTDIR ?=
KVER    ?= $(shell $(MAKE) -s -C kmod print-kver)
KDIR    ?= $(shell $(MAKE) -s -C kmod print-kver KVER=$(KVER) >/dev/null; $(MAKE) -s -C kmod print-kdir KVER=$(KVER))
JOBS    ?= $(shell nproc)
# Debian kernels besides the one kmod/ builds for that make test boots the
# module's lanes on (tools/debian-kernel fetches them; docs/kernels.md).
TEST_KERNELS ?= 6.12.118+deb12-amd64

# Debian 12 packages for build, tests and demo.
DEPS := build-essential cmake pkg-config file cpio xz-utils kmod iproute2 \
	linux-headers-amd64 linux-image-amd64 linux-source-6.1 qemu-system-x86 busybox-static \
	libfabric-dev libfabric-bin rdma-core libibverbs-dev ibverbs-utils \
	libnl-3-dev libnl-genl-3-dev libcriterion-dev dkms sparse dwarves e2fsprogs \
	libucx-dev libhwloc-dev libnuma-dev iperf3 perftest \
	flex bison bc libelf-dev libssl-dev \
	nlohmann-json3-dev libcli11-dev jq gnuplot-nox \
	debhelper dh-dkms lintian \
	autoconf automake libtool librdmacm-dev

all: kmod user softroce

kmod:
	$(MAKE) -C kmod KVER=$(KVER) KDIR=$(KDIR)
	$(MAKE) -C tests/kmod/importer KVER=$(KVER) KDIR=$(KDIR)

# Soft-RoCE with dma-buf MRs (rdma_rxe.ko + rdma-core's rxe provider), cached
# in /var/cache/hmemreg: a few minutes the first time, then a key check.
softroce:
	KVER=$(KVER) JOBS=$(JOBS) softroce/build-rxe
	softroce/build-rdma-core

$(BUILD)/Makefile: CMakeLists.txt
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo

user: $(BUILD)/Makefile
	cmake --build $(BUILD) -j $(JOBS)

deps:
	@missing=$$(for p in $(DEPS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -z "$$missing" ]; then echo "deps: all Debian packages present"; \
	elif [ "$$(id -u)" = 0 ]; then \
		echo "deps: installing$$(echo $$missing | tr '\n' ' ')"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; \
	else echo "deps: missing packages; run as root:"; \
		echo "  apt-get update && apt-get install -y --no-install-recommends" $$missing; exit 1; fi

test: deps
	$(MAKE) all
	rc=0; tests/run || rc=1; \
	[ -z "$(TEST_KERNELS)" ] || tests/kernels/run $(TEST_KERNELS) || rc=1; exit $$rc

test-host: all
	tests/run host

test-vm: all
	tests/run vm

test-debug: deps
	$(MAKE) all
	tests/debug/run

# Deliberately broken modules (tests/debug/broken/*.patch) must fail the debug lane.
test-debug-broken: deps
	$(MAKE) all
	tests/debug/catch-broken

test-gpu: all
	tests/run gpu

demo: deps
	@echo "==== demo: building everything"
	$(MAKE) all
	@echo "==== demo: libfabric 2.6.0 for the DMA-BUF step (FI_MR_DMABUF; built once, a few minutes)"
	tools/vendor/build-libfabric >/dev/null
	@echo "==== demo: booting Debian's kernel in qemu (software emulation; about two minutes)"
	HMEMREG_LIBFABRIC2=$$(tools/vendor/build-libfabric) tests/vm/run -t 900 tools/demo/in-vm.sh

check-kmod:
	kmod/check-style $(KVER)

# The peer NCCL plugin for hmemreg_bench nccl --peer-plugin (prints its prefix).
aws-ofi-nccl:
	tools/vendor/build-aws-ofi-nccl

libfabric2:
	tools/vendor/build-libfabric --fabtests

# Userspace install (libraries, the NCCL plugin, headers, pkg-config, tools,
# udev rule, modprobe.d file, man pages), then ldconfig unless DESTDIR is
# set. PREFIX is baked into hmemreg.pc and into where hmemreg_bench looks for
# the plugin, hence the rebuild; DESTDIR stages for packaging. The libraries
# go to GNUInstallDirs' libdir (lib/<multiarch> under PREFIX=/usr).
install: $(BUILD)/Makefile
	cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)
	DESTDIR=$(DESTDIR) cmake --install $(BUILD)

# Debian packages: hmemreg-dkms, libhmemreg0, libhmemreg-dev, hmemreg-tools,
# libnccl-net-hmemreg (tools/make-deb; lintian warnings fail it).
deb:
	tools/make-deb $(BUILD)/deb

clean:
	$(MAKE) -C kmod clean
	$(MAKE) -C tests/kmod/importer clean
	rm -rf $(BUILD)

.PHONY: softroce all kmod user deps test test-host test-vm test-debug test-debug-broken test-gpu demo check-kmod libfabric2 aws-ofi-nccl install deb clean

DKMS_VER := $(shell cat VERSION)
dkms-install:
	tools/dkms-stage $(DESTDIR)/usr/src/hmemreg-$(DKMS_VER)
	dkms add -m hmemreg -v $(DKMS_VER) || true
	dkms build -m hmemreg -v $(DKMS_VER) -k $(KVER)
	dkms install -m hmemreg -v $(DKMS_VER) -k $(KVER)

dkms-uninstall:
	dkms remove -m hmemreg -v $(DKMS_VER) --all || true
	rm -rf /usr/src/hmemreg-$(DKMS_VER)

.PHONY: dkms-install dkms-uninstall
