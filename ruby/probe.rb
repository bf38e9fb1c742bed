# rubyrace's in-process probe: what the running Ruby says about itself.
#
# rubyrace loads this file into every server process with `-r` (through RUBYOPT, so a
# `bundle exec` or a re-exec keeps it) and sets RUBYRACE_PROBE_DIR to a directory of the
# trial. Without that variable the probe does nothing. Each Ruby process, forked workers
# included, keeps one file, `<pid>.json`, in that directory (schema `rubyrace.probe/1`,
# documented in docs/results.md). It is written:
#   * when the process starts (the master when this file loads, a worker right after fork),
#     so rubyrace knows which pids are probed Rubies;
#   * when rubyrace asks, by sending SIGURG after writing the phase name
#     (`measure_start`, `measure_end`) into `<dir>/phase`; rubyrace differences the two
#     snapshots to get GC and JIT figures for the measured requests only;
#   * at exit, when the process exits through Ruby (`exit!` and SIGKILL skip it).
#
# Costs: nothing on the request path. At load it installs a SIGURG handler, a fork hook, an
# at_exit hook and, until Rack::Builder is defined, a TracePoint on class ends (boot only).
# It requires nothing (no json, no etc), so it never activates a gem before Bundler does:
# the JSON below is written by hand.
#
# RUBYRACE_START_GATE (a script's profiled run): wait at load until that file exists; see
# the end of this file.
#
# RUBYRACE_COMPACT:
#   after-boot  GC.compact once in each process right after its app is built (the
#               "compaction initializer"), recorded under "compaction"; with a
#               preloading server (Puma --preload) that is the master, before it forks;
#   auto        GC.auto_compact = true at load.
#
# Boot time: seconds from the process's start (from /proc/self/stat; a worker starts at
# its fork) to its app being built (Rack::Builder#to_app) and to its first request
# answered (a one-shot TracePoint on the app's #call, disabled after it fires).
#
# It must survive any Ruby: 2.7 has no YJIT and no Process._fork, JRuby has no RubyVM
# and no fork, and any feature may be missing. Every probe failure is rescued and
# recorded under "errors"; it never breaks the server.

module RubyraceProbe
  SCHEMA = "rubyrace.probe/1".freeze
  DIR = ENV["RUBYRACE_PROBE_DIR"]
  SIGNAL = "URG".freeze

  class << self
    attr_reader :record

    def start
      @record = new_record(false)
      @app_depth = 0
      install_compaction_mode
      install_signal
      install_fork_hook
      install_builder_hook
      at_exit { snapshot("exit") }
      write
    rescue Exception => e # never break the server
      note_error("start", e)
    end

    # --- the record --------------------------------------------------------------------

    def new_record(forked)
      {
        "schema" => SCHEMA,
        "pid" => Process.pid,
        "ppid" => Process.ppid,
        "forked" => forked,
        "started_at" => process_started_at,
        "ruby_description" => RUBY_DESCRIPTION,
        "ruby_engine" => (defined?(RUBY_ENGINE) ? RUBY_ENGINE : "ruby"),
        "ruby_version" => RUBY_VERSION,
        "mainlibs" => rbconfig("MAINLIBS"),
        "compact_mode" => ENV["RUBYRACE_COMPACT"] || "none",
        "env" => ENV.to_h.select { |k, _| k.start_with?("RUBY") || k == "LD_PRELOAD" || k.start_with?("MALLOC") },
        "app_loaded_after_s" => nil,
        "first_request_after_s" => nil,
        "compaction" => nil,
        "snapshots" => {},
        "errors" => [],
      }
    end

    # Wall-clock time (Unix seconds) when this process started: its age from
    # /proc/self/stat (field 22, in clock ticks since boot) against /proc/uptime. USER_HZ is
    # 100 on every Linux architecture. Elsewhere: the time this file was loaded.
    def process_started_at
      stat = File.read("/proc/self/stat")
      start_ticks = stat[(stat.rindex(")") + 2)..-1].split(" ")[19].to_i
      uptime = File.read("/proc/uptime").split(" ")[0].to_f
      Time.now.to_f - (uptime - start_ticks / 100.0)
    rescue StandardError
      Time.now.to_f
    end

    def rbconfig(key)
      defined?(RbConfig) ? RbConfig::CONFIG[key] : nil
    end

    def since_start
      Time.now.to_f - @record["started_at"]
    end

    def note_error(where, e)
      return unless @record
      @record["errors"] << "#{where}: #{e.class}: #{e.message}"[0, 500]
      write
    rescue Exception # rubocop:disable Lint/SuppressedException
    end

    # --- snapshots -----------------------------------------------------------------------

    def snapshot(phase)
      return unless @record && @record["pid"] == Process.pid
      @record["snapshots"][phase] = take_snapshot
      write
    rescue Exception => e
      note_error("snapshot #{phase}", e)
    end

    def take_snapshot
      snap = { "at" => Time.now.to_f, "jit" => jit_state }
      snap["gc"] = plain(GC.stat) if GC.respond_to?(:stat)
      snap["gc_latest"] = plain(GC.latest_gc_info) if GC.respond_to?(:latest_gc_info)
      snap["gc_latest_compact"] = plain(GC.latest_compact_info) if GC.respond_to?(:latest_compact_info)
      snap["gc_auto_compact"] = GC.auto_compact if GC.respond_to?(:auto_compact)
      if defined?(ObjectSpace) && ObjectSpace.respond_to?(:count_objects)
        snap["objects"] = plain(ObjectSpace.count_objects)
      end
      yjit = yjit_stats
      snap["yjit"] = yjit if yjit
      snap["threads"] = Thread.list.size
      snap["allocator_libraries"] = allocator_libraries
      snap["gems"] = loaded_gems
      snap
    end

    # Which JITs are on in this process, asked of the VM itself.
    def jit_state
      state = {}
      if defined?(RubyVM)
        state["yjit"] = RubyVM::YJIT.enabled? if defined?(RubyVM::YJIT) && RubyVM::YJIT.respond_to?(:enabled?)
        state["mjit"] = RubyVM::MJIT.enabled? if defined?(RubyVM::MJIT) && RubyVM::MJIT.respond_to?(:enabled?)
        state["rjit"] = RubyVM::RJIT.enabled? if defined?(RubyVM::RJIT) && RubyVM::RJIT.respond_to?(:enabled?)
        state["zjit"] = RubyVM::ZJIT.enabled? if defined?(RubyVM::ZJIT) && RubyVM::ZJIT.respond_to?(:enabled?)
      end
      state
    end

    # YJIT's runtime counters (code size always; ratio_in_yjit and invalidations when the
    # Ruby runs with --yjit-stats). Numbers only.
    def yjit_stats
      return nil unless defined?(RubyVM::YJIT) && RubyVM::YJIT.respond_to?(:enabled?) && RubyVM::YJIT.enabled?
      stats = RubyVM::YJIT.runtime_stats
      return {} unless stats.is_a?(Hash)
      stats.each_with_object({}) { |(k, v), out| out[k.to_s] = v if v.is_a?(Numeric) }
    end

    # Allocator libraries mapped into this process (/proc/self/maps): jemalloc, tcmalloc
    # and whatever LD_PRELOAD names.
    def allocator_libraries
      preloaded = (ENV["LD_PRELOAD"] || "").split(/[\s:]+/).reject(&:empty?)
      File.foreach("/proc/self/maps").each_with_object([]) do |line, found|
        path = line.split(" ", 6)[5].to_s.strip
        next if path.empty? || found.include?(path)
        base = File.basename(path)
        found << path if base.start_with?("libjemalloc", "libtcmalloc") || preloaded.include?(path)
      end
    rescue StandardError
      nil
    end

    # Gems activated through RubyGems or Bundler, name => version. Libraries a distribution
    # loads from vendor_ruby without activating a gem (Debian's, on Ruby 2.7 especially) are
    # added from their own VERSION constants when they are loaded.
    def loaded_gems
      gems = {}
      if defined?(Gem) && Gem.respond_to?(:loaded_specs)
        Gem.loaded_specs.each { |name, spec| gems[name] = spec.version.to_s }
      end
      KNOWN_VERSIONS.each do |name, path|
        next if gems.key?(name)
        version = path.reduce(Object) do |scope, const|
          break nil unless scope.is_a?(Module) && scope.const_defined?(const, false)
          scope.const_get(const, false)
        end
        gems[name] = version.to_s if version.is_a?(String)
      end
      gems
    rescue StandardError
      gems || {}
    end

    KNOWN_VERSIONS = {
      "rails" => %i[Rails VERSION STRING], "railties" => %i[Rails VERSION STRING],
      "activerecord" => %i[ActiveRecord VERSION STRING],
      "actionpack" => %i[ActionPack VERSION STRING],
      "activesupport" => %i[ActiveSupport VERSION STRING],
      "puma" => %i[Puma Const PUMA_VERSION], "rack" => %i[Rack RELEASE],
      "sinatra" => %i[Sinatra VERSION], "unicorn" => %i[Unicorn Const UNICORN_VERSION],
      "thin" => %i[Thin VERSION STRING], "sqlite3" => %i[SQLite3 VERSION],
      "nio4r" => %i[NIO VERSION], "webrick" => %i[WEBrick VERSION],
    }.freeze

    # Hash keys as strings, values as JSON-able scalars.
    def plain(hash)
      hash.each_with_object({}) do |(k, v), out|
        out[k.to_s] = case v
                      when Numeric, true, false, nil then v
                      when Hash then plain(v)
                      else v.to_s
                      end
      end
    end

    # --- writing -------------------------------------------------------------------------

    def write
      return unless DIR && @record && @record["pid"] == Process.pid
      path = File.join(DIR, "#{Process.pid}.json")
      tmp = "#{path}.tmp"
      File.open(tmp, "w") { |f| f.write(to_json(@record)) }
      File.rename(tmp, path)
    rescue Exception # a full disk or a removed directory must not break the server
    end

    def to_json(value)
      case value
      when Hash then "{" + value.map { |k, v| "#{to_json(k.to_s)}:#{to_json(v)}" }.join(",") + "}"
      when Array then "[" + value.map { |v| to_json(v) }.join(",") + "]"
      when String then json_string(value)
      when Symbol then json_string(value.to_s)
      when Integer then value.to_s
      when Float then value.finite? ? value.to_s : "null"
      when true then "true"
      when false then "false"
      when nil then "null"
      else json_string(value.to_s)
      end
    end

    def json_string(s)
      s = s.dup.force_encoding(Encoding::UTF_8)
      s = s.encode(Encoding::UTF_8, invalid: :replace, undef: :replace) unless s.valid_encoding?
      '"' + s.gsub(/["\\\u0000-\u001f]/) { |c| format("\\u%04x", c.ord) } + '"'
    end

    # --- hooks ---------------------------------------------------------------------------

    def install_compaction_mode
      return unless @record["compact_mode"] == "auto"
      if GC.respond_to?(:auto_compact=)
        GC.auto_compact = true
      else
        @record["errors"] << "compact: this Ruby has no GC.auto_compact"
      end
    end

    def install_signal
      Signal.trap(SIGNAL) do
        phase = begin
          File.read(File.join(DIR, "phase")).strip
        rescue StandardError
          "unnamed"
        end
        snapshot(phase)
      end
    rescue Exception => e
      note_error("signal", e)
    end

    def after_fork
      @record = new_record(true)
      @app_depth = 0
      write
    rescue Exception => e
      note_error("fork", e)
    end

    module ForkHook # Ruby >= 3.1: every fork goes through Process._fork
      def _fork
        pid = super
        RubyraceProbe.after_fork if pid == 0
        pid
      end
    end

    module LegacyForkHook # Ruby < 3.1: Process.fork and Kernel.fork
      def fork(*args, &block)
        RubyraceProbe.legacy_fork(args, block) { |*a, &b| super(*a, &b) }
      end
    end

    def legacy_fork(args, block, &original)
      if block
        original.call(*args) do
          after_fork
          block.call
        end
      else
        pid = original.call(*args)
        after_fork if pid.nil?
        pid
      end
    end

    def install_fork_hook
      return unless Process.respond_to?(:fork)
      if Process.respond_to?(:_fork)
        Process.singleton_class.prepend(ForkHook)
      else
        Process.singleton_class.prepend(LegacyForkHook)
        Kernel.singleton_class.prepend(LegacyForkHook)
        # Kernel#fork (a bare `fork`): before Ruby 3.0, prepending to Kernel does not reach
        # classes that already include it, so the method itself is wrapped.
        Kernel.module_eval do
          alias_method :rubyrace_probe_fork, :fork
          define_method(:fork) do |*args, &block|
            RubyraceProbe.legacy_fork(args, block) { |*a, &b| rubyrace_probe_fork(*a, &b) }
          end
          private :fork, :rubyrace_probe_fork
        end
      end
    rescue Exception => e
      note_error("fork hook", e)
    end

    module BuilderHook
      def to_app
        RubyraceProbe.entering_to_app
        app = super
        RubyraceProbe.app_built(app)
        app
      ensure
        RubyraceProbe.leaving_to_app
      end
    end

    # Rack::Builder is not loaded yet (loading it here could activate the wrong rack
    # before Bundler): wait for its class body to end, then hook #to_app.
    def install_builder_hook
      return hook_builder if defined?(Rack::Builder)
      return unless defined?(TracePoint)
      @builder_trace = TracePoint.new(:end) do |tp|
        if tp.self.is_a?(Module) && tp.self.name == "Rack::Builder"
          @builder_trace.disable
          hook_builder
        end
      end
      @builder_trace.enable
    rescue Exception => e
      note_error("builder hook", e)
    end

    def hook_builder
      Rack::Builder.prepend(BuilderHook) unless Rack::Builder.ancestors.include?(BuilderHook)
    end

    def entering_to_app
      @app_depth += 1
    end

    def leaving_to_app
      @app_depth -= 1
    end

    # The outermost Rack::Builder#to_app returned: this process's app is built.
    def app_built(app)
      return unless @app_depth == 1 && @record["app_loaded_after_s"].nil?
      @record["app_loaded_after_s"] = since_start
      compact_after_boot if @record["compact_mode"] == "after-boot"
      watch_first_request(app)
      write
    rescue Exception => e
      note_error("app built", e)
    end

    def compact_after_boot
      unless GC.respond_to?(:compact)
        @record["errors"] << "compact: this Ruby has no GC.compact"
        return
      end
      before = Time.now.to_f
      GC.compact
      @record["compaction"] = {
        "ran" => true,
        "seconds" => Time.now.to_f - before,
        "compact_count" => GC.respond_to?(:stat) ? GC.stat[:compact_count] : nil,
        "info" => GC.respond_to?(:latest_compact_info) ? plain(GC.latest_compact_info) : nil,
      }
    end

    # A TracePoint on the app's own #call (a lambda's block, or a method), disabled as soon
    # as the first call returns: no cost on later requests. A Rails application class
    # delegates #call in a way TracePoint cannot target, so its instance's #call is used.
    def watch_first_request(app)
      target, event = first_request_target(app)
      unless target
        @record["errors"] << "first request: no traceable #call on #{app.class}"
        return
      end
      trace = TracePoint.new(event) do
        trace.disable
        @record["first_request_after_s"] = since_start
        write
      end
      trace.enable(target: target)
    rescue Exception => e
      note_error("first request", e)
    end

    def first_request_target(app)
      return [app, :b_return] if app.is_a?(Proc)
      candidates = [app]
      candidates << app.instance if app.respond_to?(:instance)
      candidates.each do |object|
        method = object.method(:call)
        return [method, :return] if method.source_location
      end
      nil
    end
  end
end

RubyraceProbe.start if RubyraceProbe::DIR

# RUBYRACE_START_GATE: a script's profiled run waits here, before any of the script runs,
# until rubyrace has attached its profilers and creates this file (at most 10 s), so that
# perf and rbspy see the script from its first line. The variable is removed, so a Ruby the
# script starts does not wait again.
# How long it waited goes into GATE.waited (seconds), which rubyrace takes off the run's
# wall time before comparing it with the measured runs.
if (gate = ENV.delete("RUBYRACE_START_GATE"))
  arrived = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  deadline = arrived + 10
  sleep 0.002 until File.exist?(gate) || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
  begin
    File.write("#{gate}.waited", (Process.clock_gettime(Process::CLOCK_MONOTONIC) - arrived).to_s)
  rescue SystemCallError
    nil
  end
end
