# The two commands a newcomer needs: `make demo` and `make test`. Both set up first.
export PATH := $(HOME)/.cargo/bin:$(PATH)

CARGO ?= cargo
RUBYRACE := target/release/rubyrace

.PHONY: setup build demo test bench clean

setup:
	@scripts/setup

build: setup
	$(CARGO) build --release --locked

demo: build
	scripts/demo

test: setup
	$(CARGO) build --release --locked
	$(CARGO) test --workspace --locked

bench: build
	bench/loadgen

clean:
	$(CARGO) clean
