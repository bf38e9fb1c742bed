# frozen_string_literal: true

# The platform gem of rubyrace (scripts/gem builds it; docs/install.md): the native binary
# in libexec/, rubyrace's Ruby side (the probe, the bundled apps) in share/rubyrace/ruby,
# where the binary looks for it beside itself, and a Ruby shim in exe/ that execs the
# binary. RUBYRACE_GEM_VERSION and RUBYRACE_GEM_PLATFORM come from scripts/gem.
Gem::Specification.new do |spec|
  spec.name = "rubyrace"
  spec.version = ENV.fetch("RUBYRACE_GEM_VERSION")
  spec.platform = ENV.fetch("RUBYRACE_GEM_PLATFORM")
  spec.authors = ["The rubyrace developers"]
  spec.summary = "A benchmarking lab for Ruby web stacks"
  spec.description = <<~TEXT
    rubyrace answers which Ruby, JIT, allocator, GC setting, app server and concurrency
    makes an app faster, by how much, at what memory cost, and how sure we are: experiments
    in randomized interleaved blocks on real servers, confidence intervals paired by block,
    a CI gate on a slowdown (`rubyrace check`) and a bisection of the commit that made an
    app slower (`rubyrace bisect`). This gem carries the native binary for its platform.
  TEXT
  spec.licenses = ["MIT", "Apache-2.0"]
  spec.required_ruby_version = ">= 2.7"
  spec.files = Dir["exe/rubyrace", "libexec/rubyrace", "share/rubyrace/**/*",
                   "README.md", "CHANGELOG.md", "LICENSE-MIT", "LICENSE-APACHE"]
  spec.bindir = "exe"
  spec.executables = ["rubyrace"]
end
