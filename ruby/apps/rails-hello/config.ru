# rails-hello: a minimal Rails app in one file. One route (GET / -> "Hello, world!\n" as
# text/plain) served by a real controller action behind Rails' default middleware stack,
# so that comparing it with rack-hello measures what the framework costs per request.
#
# Production mode: RAILS_ENV (else RACK_ENV, else "production") is read before Rails is
# loaded, because Rails picks some defaults (e.g. config.hosts) from it at load time.
# Classes are eager-loaded, there is no database (only railties, actionpack and
# actionview are loaded) and the log goes to stdout at :warn, so logging stays out of
# the measurement. secret_key_base is inline: this is a benchmark app, not a secret.
#
# Written against Rails 6.1 (Debian bookworm) and meant to boot unchanged on 6.0 and
# 7.x; version-specific points are marked "Rails version:" below.
ENV["RAILS_ENV"] ||= ENV["RACK_ENV"] || "production"

require "rails"
require "action_controller/railtie"

class RailsHello < Rails::Application
  # Rails version: load_defaults accepts the running version's "major.minor" on every
  # release from 5.0 on, so the app gets the defaults a newly generated app would have.
  config.load_defaults Rails::VERSION::STRING.to_f
  # The app root is this directory, whichever directory the server was started from.
  config.root = File.expand_path(__dir__)

  # What config/environments/production.rb of a generated app sets.
  # Rails version: 7.1 added enable_reloading (the inverse); cache_classes still works.
  config.cache_classes = true
  config.eager_load = true
  config.consider_all_requests_local = false
  # No public/ directory: static files would be served by a front server anyway.
  config.public_file_server.enabled = false

  config.logger = ActiveSupport::Logger.new($stdout)
  config.log_level = :warn

  config.secret_key_base = "rubyrace-benchmark-app-not-a-secret-" + "0" * 64

  # Host authorization on, as in a deployed app, allowing the loopback names the lab
  # uses. A request whose Host header is anything else gets 403.
  # Rails version: 6.1 and later accept "host:port" for these entries; 6.0 strips the
  # port before comparing, with the same result.
  config.hosts = ["127.0.0.1", "localhost", IPAddr.new("::1")]
end

class HelloController < ActionController::Base
  BODY = "Hello, world!\n".freeze

  def index
    render plain: BODY
  end
end

RailsHello.initialize!

# Drawn after initialize!: booting (re)loads the routes from config/routes.rb, which
# this app does not have, and would wipe routes drawn before it.
RailsHello.routes.draw do
  root "hello#index"
end

run RailsHello
