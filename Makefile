# The two commands a newcomer needs: `make demo` and `make test`. Both set up first.
export PATH := $(HOME)/.cargo/bin:$(PATH)

CARGO ?= cargo
RUBYRACE := target/release/rubyrace

.PHONY: setup build demo gem deb check-deb lint test bench soak check-rubies check-builds check-bisect-ruby clean

setup:
	@scripts/setup

build: setup
	$(CARGO) build --release --locked

demo: build
	scripts/demo

# The platform gem pkg/rubyrace-VERSION-ARCH-linux.gem (scripts/gem; docs/install.md).
gem: build
	scripts/gem

# The Debian package pkg/rubyrace_VERSION_ARCH.deb (scripts/deb; docs/install.md).
deb: build
	scripts/deb

# The package installed into a fresh Debian root by apt, the demo's smoke run there, and
# removed without a file left (scripts/check-deb: minutes, and Debian's mirror).
check-deb: build
	scripts/check-deb

lint: setup
	CARGO=$(CARGO) scripts/lint

# Setup, the test tools, lint, the release build, the checks (cargo-deny, the MSRV build,
# cargo doc, the fuzz smoke) and every test by cargo-nextest, each phase timed
# (scripts/test; the times and the slowest tests in target/nextest/TESTS.md).
test:
	CARGO=$(CARGO) scripts/test

bench: build
	bench/loadgen

# An hour of runs under seeded random faults (docs/RELIABILITY.md, "The soak"); a
# three-minute version is part of `make test`. RUBYRACE_SOAK_SECONDS and RUBYRACE_SOAK_SEED
# change its length and plan.
soak: setup
	$(CARGO) test --locked -p rubyrace-cli --test it -- --ignored --nocapture soak::an_hour_long_soak

# Slow checks outside `make test`: every app on Debian's Ruby 3.1, 3.3 and 2.7; real CRuby
# builds (with and without jemalloc) run through experiments; a bisection of a CRuby history
# (four builds) that finds a planted slowdown in File.mtime.
check-rubies: setup
	scripts/check-other-rubies

check-builds: setup
	scripts/check-ruby-builds

check-bisect-ruby: setup
	scripts/check-bisect-ruby

clean:
	$(CARGO) clean
