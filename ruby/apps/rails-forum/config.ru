# rails-forum (see app.rb): the server's entry point. The database must have been set up by
# db/setup.rb; rubyrace's experiments run it as `setup`.
require_relative "app"
run RailsForum
