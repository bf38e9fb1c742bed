# Loaded by rubyrace's check before a run (RUBYOPT=-r.../server_check.rb) into
# `<ruby> <flags> -S bundle exec <server> --version`, the trial's own command with the
# app's bundle: when the Ruby that runs the server's executable exits, it says which JITs
# are on in it and which version of each gem it loaded. `bundle exec` may load the
# executable in its own process or exec a new Ruby (a shebang that is not Gem.ruby's);
# either way the answer comes from the Ruby that would serve. Requires nothing.
at_exit do
  on = []
  if defined?(RubyVM)
    { "yjit" => :YJIT, "mjit" => :MJIT, "rjit" => :RJIT, "zjit" => :ZJIT }.each do |name, const|
      next unless RubyVM.const_defined?(const)
      jit = RubyVM.const_get(const)
      on << name if jit.respond_to?(:enabled?) && jit.enabled?
    end
  end
  gems = defined?(Gem) && Gem.respond_to?(:loaded_specs) ? Gem.loaded_specs.map { |n, s| "#{n}:#{s.version}" } : []
  $stdout.print "\n__rubyrace_ruby__\n", "jits_enabled=", on.join(","), "\n", "gems=", gems.join(","), "\n"
  $stdout.flush
end
