# A master and N workers exchanging messages over pipes (IO.pipe); the workers run as
# threads, forked processes or fibers. Usage:
#
#   ruby pipes.rb MODEL [--workers N] [--messages M] [--window W]
#
#   MODEL       threads | processes | fibers | reactor
#   --workers   number of workers (default: $PIPES_WORKERS, else 4)
#   --messages  messages in all, split evenly over the workers (default 100000): fixed total
#               work, so the times of different worker counts compare directly
#   --window    messages in flight per worker (default 4)
#
# Each worker has two pipes: requests (master -> worker) and replies (worker -> master). A
# message is one unsigned 64-bit integer (8 bytes); the worker answers x with x * 3 + 1.
# In the first three models the master runs the same event loop (IO.select over the reply
# pipes, read_nonblock, then refill that worker's window); only what runs the workers
# differs, and the worker code is the same method, `work`, in all four:
#
#   threads    one Thread per worker, blocking reads and writes (a thread waiting on its
#              pipe has released the GVL);
#   processes  one fork per worker (the master is the parent);
#   fibers     one Fiber per worker, all in a single extra thread, run by the minimal
#              Fiber::Scheduler below (Ruby 3.1 defines the interface but ships no
#              scheduler; the `async` gem would be the usual one). A fiber's read that
#              would block goes to the scheduler's io_wait, and its IO.select loop resumes
#              the fiber when the pipe is readable, as in any fiber scheduler.
#   reactor    fibers and a single reactor: the workers' fibers and the master run in the
#              main thread under one scheduler, with no other thread. The master is one
#              fiber per worker that reads that worker's replies (a read that would block
#              goes to the scheduler) and refills its window; the answers are checked and
#              the windows refilled by the same code as the other models' master (`take`).
#              Ruby 3.1's scheduler has no hook for IO.select (3.2 added io_select), so the
#              master's IO.select loop cannot itself be a fiber there. The source of this
#              study found this layout ("just fibers and a single reactor") doubled the
#              speed of fibers beside a master in another thread.
#
# At most `window` messages (8 bytes each) are in flight per worker, far below a pipe's
# buffer (64 KiB on Linux), so no write ever blocks and the exchange cannot deadlock.
#
# Correctness first: the master checks every answer against the message it answers (in
# order, per worker), that each worker answered exactly its share, and that the sum of all
# answers is the expected one; forked workers check their own count and the master checks
# their exit status. Any mismatch or error exits with a non-zero status. On success:
#
#   rubyrace-metric messages_per_s=...
#
# timed from the moment every worker is running (threads and fibers started, children
# forked) to the last answer, so Ruby's boot is excluded; rubyrace's wall time includes it.

MODELS = %w[threads processes fibers reactor].freeze
USAGE = "usage: ruby pipes.rb {#{MODELS.join('|')}} [--workers N] [--messages M] [--window W]".freeze
model = ARGV.shift
abort USAGE unless MODELS.include?(model)
options = { "--workers" => ENV["PIPES_WORKERS"] || "4", "--messages" => "100000", "--window" => "4" }
until ARGV.empty?
  key = ARGV.shift
  abort USAGE unless options.key?(key) && !ARGV.empty?
  options[key] = ARGV.shift
end
WORKERS = Integer(options["--workers"])
MESSAGES = Integer(options["--messages"])
WINDOW = Integer(options["--window"])
if WORKERS < 1 || MESSAGES < WORKERS || WINDOW < 1 || WINDOW > 512
  abort "pipes.rb: need workers >= 1, messages >= workers, 1 <= window <= 512"
end

# A worker thread that raises must stop the script, not leave the master waiting for it.
Thread.abort_on_exception = true
Thread.report_on_exception = false

SIZE = 8
STALL = 30 # seconds without any answer: a lost message, fail rather than hang
PACK = "Q<".freeze

def answer(x)
  x * 3 + 1
end

# The worker: read a message, answer it, until the master closes the request pipe.
# Returns how many messages it answered. Blocking calls: under the fiber scheduler the
# waits become io_wait calls.
def work(requests, replies)
  count = 0
  while (data = requests.read(SIZE))
    raise "short read: #{data.bytesize} bytes" if data.bytesize != SIZE
    replies.write([answer(data.unpack1(PACK))].pack(PACK))
    count += 1
  end
  count
end

# A minimal Fiber::Scheduler (the Ruby 3.1 interface): enough for fibers that wait on
# pipes. Fibers are resumed from the run loop when IO.select says their IO is ready.
class MiniScheduler
  def initialize
    @readable = {} # io => fiber
    @writable = {}
    @ready = [] # fibers unblocked (by another fiber or thread)
    @lock = Thread::Mutex.new
    @closed = false
  end

  def fiber(&block)
    f = Fiber.new(blocking: false, &block)
    f.resume
    f
  end

  def io_wait(io, events, _timeout)
    f = Fiber.current
    @readable[io] = f if events & IO::READABLE != 0
    @writable[io] = f if events & IO::WRITABLE != 0
    Fiber.yield
  end

  def kernel_sleep(duration = nil)
    raise NotImplementedError, "MiniScheduler cannot sleep" if duration.nil?
    Kernel.sleep(duration) # blocks the whole thread: not needed by this script
  end

  def block(_blocker, _timeout = nil)
    raise NotImplementedError, "MiniScheduler does not implement block (Mutex, Queue, join)"
  end

  def unblock(_blocker, fiber)
    @lock.synchronize { @ready << fiber }
  end

  def close
    return if @closed
    run
    @closed = true
  end

  def run
    until @readable.empty? && @writable.empty? && @ready.empty?
      ready = @lock.synchronize { @ready.slice!(0..) }
      ready.each(&:resume)
      next if @readable.empty? && @writable.empty?
      r, w = IO.select(@readable.keys, @writable.keys)
      r.each { |io| resume_waiting(@readable, @writable, io, IO::READABLE) }
      w.each { |io| resume_waiting(@writable, @readable, io, IO::WRITABLE) }
    end
  end

  private

  def resume_waiting(table, other, io, event)
    fiber = table.delete(io) or return
    other.delete(io) if other[io].equal?(fiber)
    fiber.resume(event)
  end
end

shares = Array.new(WORKERS) { |i| MESSAGES / WORKERS + (i < MESSAGES % WORKERS ? 1 : 0) }
pipes = Array.new(WORKERS) { [IO.pipe, IO.pipe] } # [[req_r, req_w], [rep_r, rep_w]]

# Start the workers.
counts = nil
fiber_counts = Array.new(WORKERS) # what each worker fiber answered
case model
when "threads"
  runners = pipes.map { |(req_r, _), (_, rep_w)| Thread.new { work(req_r, rep_w) } }
  counts = -> { runners.map(&:value) }
when "processes"
  pids = pipes.each_with_index.map do |((req_r, req_w), (rep_r, rep_w)), i|
    fork do
      pipes.each_with_index do |((a, b), (c, d)), j|
        [b, c].each(&:close)
        [a, d].each(&:close) unless j == i
      end
      n = work(req_r, rep_w)
      exit!(n == shares[i] ? 0 : 3)
    end
  end
  # The parent keeps only its own ends, so a worker sees EOF when the master closes.
  pipes.each { |(req_r, _), (_, rep_w)| req_r.close; rep_w.close }
  counts = lambda do
    pids.each_with_index.map do |pid, i|
      _, status = Process.wait2(pid)
      raise "worker #{i} (pid #{pid}) exited with #{status.inspect}" unless status.success?
      shares[i]
    end
  end
when "reactor"
  counts = -> { fiber_counts } # the fibers start below, with the master's
when "fibers"
  runner = Thread.new do
    Fiber.set_scheduler(MiniScheduler.new)
    pipes.each_with_index do |((req_r, _), (_, rep_w)), i|
      Fiber.schedule { fiber_counts[i] = work(req_r, rep_w) }
    end
    # The scheduler runs every fiber to its end when the thread finishes (close).
  end
  counts = -> { runner.join; fiber_counts }
end

# The master: keep WINDOW messages in flight per worker; check every answer.
start = Process.clock_gettime(Process::CLOCK_MONOTONIC)
next_x = Array.new(WORKERS) { |i| shares[0...i].sum } # each worker's next message
last_x = Array.new(WORKERS) { |i| next_x[i] + shares[i] }
expect = next_x.dup # the next answer each worker owes, in order
sent = Array.new(WORKERS, 0)
received = Array.new(WORKERS, 0)
buffers = Array.new(WORKERS) { +"" }
sum = 0
reply_of = {}
pipes.each_with_index { |(_, (rep_r, _)), i| reply_of[rep_r] = i }

send = lambda do |i, n|
  n = [n, last_x[i] - next_x[i]].min
  return if n <= 0
  batch = (next_x[i]...(next_x[i] + n)).to_a.pack("#{PACK}*")
  written = pipes[i][0][1].write_nonblock(batch)
  raise "short write to worker #{i}" if written != batch.bytesize
  next_x[i] += n
  sent[i] += n
  pipes[i][0][1].close if next_x[i] == last_x[i] # all sent: the worker will see EOF
end

# Takes bytes of worker i's replies: checks every whole answer, and sends as many new
# messages as answers came back. True once the worker has answered its share.
take = lambda do |i, data|
  buf = buffers[i] << data
  whole = buf.bytesize / SIZE
  buf.slice!(0, whole * SIZE).unpack("#{PACK}*").each do |y|
    want = answer(expect[i])
    raise "worker #{i}: answer #{y} for message #{expect[i]}, expected #{want}" if y != want
    expect[i] += 1
    sum += y
  end
  received[i] += whole
  send.call(i, whole)
  received[i] == shares[i]
end

if model == "reactor"
  # One scheduler in this thread runs the workers and, for each worker, the master's fiber.
  scheduler = MiniScheduler.new
  Fiber.set_scheduler(scheduler)
  pipes.each_with_index do |((req_r, _), (rep_r, rep_w)), i|
    Fiber.schedule { fiber_counts[i] = work(req_r, rep_w) }
    Fiber.schedule do
      send.call(i, WINDOW)
      # readpartial waits through the scheduler; EOF before the share is a lost worker.
      nil until take.call(i, rep_r.readpartial(WINDOW * SIZE))
    end
  end
  scheduler.run # until every fiber has ended
  Fiber.set_scheduler(nil)
else
  WORKERS.times { |i| send.call(i, WINDOW) }
  open = reply_of.keys
  until open.empty?
    readable, = IO.select(open, nil, nil, STALL)
    unless readable
      abort "pipes.rb: #{model}: no answer for #{STALL} s; received #{received.inspect} of #{shares.inspect}"
    end
    readable.each do |io|
      i = reply_of[io]
      data = io.read_nonblock(WINDOW * SIZE, exception: false)
      if data == :wait_readable
        next
      elsif data.nil? # EOF: the worker closed its reply pipe (it ended)
        open.delete(io)
        next
      end
      open.delete(io) if take.call(i, data)
    end
  end
end
elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - start

answered = counts.call
expected_sum = (0...MESSAGES).sum { |x| answer(x) }
problems = []
problems << "sent #{sent.sum} of #{MESSAGES}" if sent.sum != MESSAGES
problems << "received #{received.sum} of #{MESSAGES}" if received.sum != MESSAGES
problems << "workers answered #{answered.inspect}, expected #{shares.inspect}" if answered != shares
problems << "checksum #{sum}, expected #{expected_sum}" if sum != expected_sum
problems << "leftover bytes from #{buffers.count { |b| !b.empty? }} workers" if buffers.any? { |b| !b.empty? }
unless problems.empty?
  warn "pipes.rb: #{model} #{WORKERS} workers: #{problems.join('; ')}"
  exit 1
end
puts "rubyrace-metric messages_per_s=#{(MESSAGES / elapsed).round(1)}"
puts "#{model}: #{MESSAGES} messages, #{WORKERS} workers, window #{WINDOW}, #{elapsed.round(3)} s, checksum #{sum} ok (#{RUBY_DESCRIPTION})"
