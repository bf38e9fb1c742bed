# N threads calling File.mtime in a loop: the reduced form of a real regression report
# ("threads calling File.mtime got much slower on a newer Ruby"). Usage:
#
#   ruby mtime.rb THREADS [CALLS] [GC]
#
#   THREADS  number of threads (1 or more)
#   CALLS    File.mtime calls in all (default 200000), split evenly over the threads
#   GC       off (the default) or on: whether the garbage collector may run in the timed
#            loop. Each call allocates a Time, and the script the report comes from
#            disabled GC "to make sure it doesn't skew results": off does the same
#            (GC.disable from the start line to the last thread's end; 200000 Times are
#            about 8 MB). The second line of the output says how many GCs ran in the loop.
#
# Fixed total work: the number of calls is the same at every thread count, so a perfect
# Ruby would finish in the same time (or faster, where stat(2) overlaps) whatever the
# thread count, and every slowdown as threads are added is overhead of the threads
# themselves (GVL hand-offs, wake-ups, scheduling). Fixed calls per thread would make the
# work grow with the thread count and hide that in a line that rises anyway.
#
# File.mtime releases the GVL around stat(2) on CRuby, so each call is a GVL release and
# reacquire: with several threads that is where they contend. On JRuby the threads run in
# parallel.
#
# The threads are created first and wait at a start line; the clock starts when they are
# released and stops when the last one has finished, so Ruby's boot and thread creation
# are not in calls_per_s (rubyrace's wall time includes them). It checks that every call
# happened and returned the file's mtime; otherwise it exits with status 1. Prints:
#
#   rubyrace-metric calls_per_s=...

threads = Integer(ARGV[0] || "1")
calls = Integer(ARGV[1] || "200000")
gc = ARGV[2] || "off"
if threads < 1 || calls < threads || !%w[off on].include?(gc)
  warn "usage: ruby mtime.rb THREADS [CALLS] [off|on]  (THREADS >= 1, CALLS >= THREADS)"
  exit 2
end
Thread.abort_on_exception = true

path = File.expand_path(__FILE__)
expected = File.mtime(path)
shares = Array.new(threads) { |i| calls / threads + (i < calls % threads ? 1 : 0) }
done = Array.new(threads, 0)
wrong = Array.new(threads, 0)

gate = Thread::Queue.new
workers = shares.each_with_index.map do |n, i|
  Thread.new do
    gate.pop
    k = 0
    bad = 0
    while k < n
      bad += 1 unless File.mtime(path) == expected
      k += 1
    end
    done[i] = k
    wrong[i] = bad
  end
end
Thread.pass until workers.all? { |t| t.status == "sleep" } # all waiting at the gate

gc_before = GC.count
GC.disable if gc == "off"
start = Process.clock_gettime(Process::CLOCK_MONOTONIC)
threads.times { gate << true }
workers.each(&:join)
elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - start
GC.enable
gc_runs = GC.count - gc_before

if done.sum != calls || wrong.sum != 0
  warn "mtime.rb: #{done.sum} of #{calls} calls done, #{wrong.sum} returned another mtime"
  exit 1
end
puts "rubyrace-metric calls_per_s=#{(calls / elapsed).round(1)}"
puts "#{threads} threads, #{calls} File.mtime calls, #{elapsed.round(3)} s, GC #{gc} (#{gc_runs} GC runs in the loop) (#{RUBY_DESCRIPTION})"
