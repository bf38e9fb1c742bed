# known-effect: a Rack app whose CPU per request is set by the experiment, so that two
# configurations have a true, known difference to find. Each request runs a pure-Ruby loop of
# RUBYRACE_WORK_ITERATIONS iterations (default 8000, about 200 µs on the 2-core development
# VM) of small-integer arithmetic: no object is allocated in the loop, so GC does not add
# noise that depends on the iterations, and the work per request is exactly proportional to
# the iterations. 1.05× the iterations is 5% more CPU per request in the app (the server's
# own per-request work, the same in both, dilutes it a little: see
# examples/known-effect/README.md).
iterations = Integer(ENV.fetch("RUBYRACE_WORK_ITERATIONS", "8000"), 10)
raise ArgumentError, "RUBYRACE_WORK_ITERATIONS must be 0 or more, not #{iterations}" if iterations.negative?

# The loop, in a method so the interpreter and YJIT see the same small, hot code.
module KnownEffect
  def self.work(n)
    x = 0
    i = 0
    while i < n
      x = (x * 31 + i) & 0xFFFF
      i += 1
    end
    x
  end
end

body = "ok\n".freeze
headers = {
  "content-type" => "text/plain",
  "content-length" => body.bytesize.to_s,
  "x-work-iterations" => iterations.to_s
}.freeze
run ->(_env) do
  KnownEffect.work(iterations)
  [200, headers.dup, [body]]
end
