# sinatra-hello: the "hello, world" app on Sinatra. One route (GET / -> "Hello, world!\n"
# as text/plain) through Sinatra's routing and its default middleware (Rack::Protection),
# between rack-hello (no framework) and rails-hello (a full framework stack).
#
# Production mode: APP_ENV, else RACK_ENV, else "production", read before Sinatra is
# loaded (Sinatra picks its environment at load time). Modular style (Sinatra::Base), so
# there is no request logging: Sinatra::Base does not log, the classic style would.
ENV["APP_ENV"] ||= ENV["RACK_ENV"] || "production"

require "sinatra/base"

class SinatraHello < Sinatra::Base
  BODY = "Hello, world!\n".freeze

  get "/" do
    content_type :text
    BODY
  end
end

run SinatraHello
