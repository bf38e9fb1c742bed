# rails-mixed: a mid-sized Rails app in one directory, for load that looks like simulated
# users rather than one hello route: ERB pages with a layout and partials, JSON, writes to a
# SQLite database through Active Record, a CPU-bound route and a syscall-bound route. Its URL
# mix is urls.txt next to this file (rubyrace load --urls ruby/apps/rails-mixed/urls.txt).
#
# Routes (every one answers 2xx for the seeded data, given a loopback Host header):
#   GET  /                     "rails-mixed: ok\n" as text/plain; no database. The readiness path.
#   GET  /posts                HTML: layout + posts/index + one posts/_post partial per post
#                              (collection rendering) + posts/_author; the 20 most recent
#                              posts, authors preloaded (includes: 2 queries, no N+1).
#   GET  /posts/:id            HTML: one post (body through simple_format, so it is
#                              sanitized), its author, and its 50 most recent comments through
#                              comments/_comment (collection rendering). 404 for an unknown id.
#   POST /posts/:id/comments   Inserts a comment with server-generated text (no request body
#                              needed) and bumps posts.comments_count (counter cache), in one
#                              transaction. 201 with a small JSON body.
#   POST /posts/:id/like       UPDATE posts SET likes = likes + 1 (increment!). 200 JSON.
#   GET  /api/posts            JSON (also /api/posts.json): the 20 most recent posts with their
#                              authors' names, from an ActionController::API controller.
#   GET  /cpu                  Deterministic Ruby CPU work (primes below 3000 by trial
#                              division, then FNV-1a over their decimal text): about 1.5 ms on
#                              top of the 1.7 ms of GET / (Ruby 3.1, 2-core Debian 12 VM, no
#                              YJIT). text/plain.
#   GET  /files                File.mtime on 200 Rails source files (chosen at boot from
#                              $LOADED_FEATURES): 200 stat(2) calls. Returns the newest mtime.
# The two POST routes skip CSRF protection (an API a client posts to without a form); the HTML
# pages have no form and no csrf_meta_tags, so no request touches the session or sets a cookie.
# The POSTs need no body (rubyrace sends Content-Length: 0; WEBrick answers 411 without it).
#
# Data: SQLite, a real file. Seeded at boot, deterministically (Random.new(42), fixed
# timestamps from 2024-01-01 UTC): 50 authors, 500 posts (ids 1-500; a title, 3-5 paragraphs,
# a like count; post N is created N*4 hours after the epoch, so /posts lists 500 down to 481),
# 2000 comments spread over the posts at random (0 to 12 per post). Writes from the URL mix
# grow the comments table; /posts/:id caps what it renders at 50 comments, and urls.txt posts
# comments to posts it does not show, so the work per request stays the same during a run.
#
# Where the database lives, and who creates and removes it (RailsMixedDB below):
# * $RAILS_MIXED_DB if set (created and seeded if missing or empty, never removed); else
#   <tmpdir>/rubyrace-rails-mixed-<process group id>.sqlite3. rubyrace starts each server in
#   its own process group, so a Puma or Unicorn master and its workers share one file (with
#   or without preloading: workers compute the same name) and two servers never share one.
# * <db>.lock is held exclusively (flock) around creating, seeding and removing the file, so
#   forked workers booting together seed once. <db>.users is held shared by every process
#   using the database, for its whole life.
# * Removal: last one out. At exit, each process that holds its own share of <db>.users
#   drops it and tries to take it exclusively without waiting; only the last user gets it,
#   and it removes the database, its -wal/-shm files and both lock files. That works in
#   single mode, in cluster mode with or without preloading, with Unicorn and Thin. It does
#   not run when processes die without running at_exit: SIGKILL, and Unicorn workers, which
#   exit! on SIGTERM. For those, every boot removes files of process groups that no longer
#   exist (and whose locks are free), and a boot that finds <db>.users free treats the file
#   at its own path as stale (a reused group id) and starts from a fresh seed.
#
# SQLite settings, the same on every Rails version (see RailsMixedSQLite below): WAL journal,
# synchronous=NORMAL and the other pragmas Rails 7.2 sets by default, and a busy handler that
# waits up to 5 s (database.yml's timeout) for a lock by sleeping in Ruby, so that a thread
# waiting for the write lock releases the GVL to the thread of the same process that holds it.
# The connection pool is max(RAILS_MAX_THREADS, 100) (config/database.yml): connections are
# opened on first use, so the size is only a cap, and it must cover the server's threads,
# which rubyrace sets with server flags (puma -t, thin --threadpool-size), not
# RAILS_MAX_THREADS, and WEBrick runs up to 100.
#
# Production mode, as rails-hello: RAILS_ENV (else RACK_ENV, else "production") is set
# before Rails is loaded; classes are eager-loaded; the log goes to stdout at :warn (SQL is
# logged at :debug, so not at all); secret_key_base is inline: this is a benchmark app, not a
# secret. Loaded: railties, actionpack, actionview and activerecord (with the sqlite3 gem);
# no sprockets, active storage, action cable, mailers or jobs. No Gemfile: the Ruby's
# installed gems are used.
#
# Written against Rails 6.1 (Debian bookworm: Ruby 3.1, sqlite3 gem 1.4) and meant to boot
# unchanged on Rails 6.0 (bullseye, Ruby 2.7) and 7.2 (trixie, Ruby 3.3); version-specific
# points are marked "Rails version:" below. Ruby syntax stays within 2.7 (no hash shorthand,
# no endless methods).
ENV["RAILS_ENV"] ||= ENV["RACK_ENV"] || "production"
# DATABASE_URL would be merged over config/database.yml; this app has exactly one database.
ENV.delete("DATABASE_URL")

require "json"
require "tmpdir"
require "rails"
require "active_record/railtie"
require "action_controller/railtie"
require "action_view/railtie"

# The database file, its locks, and its lifecycle (see the header). Read by
# config/database.yml (ERB) for the path and the pool size.
module RailsMixedDB
  EXPLICIT = !ENV["RAILS_MIXED_DB"].to_s.empty?
  PATH =
    if EXPLICIT
      File.expand_path(ENV["RAILS_MIXED_DB"])
    else
      File.join(Dir.tmpdir, "rubyrace-rails-mixed-#{Process.getpgrp}.sqlite3")
    end
  POOL = [ENV["RAILS_MAX_THREADS"].to_i, 100].max
  TIMEOUT_MS = 5000
  LOCK = "#{PATH}.lock"
  USERS = "#{PATH}.users"
  STALE_PREFIX = "rubyrace-rails-mixed-"

  @mutex = Mutex.new
  @users = nil     # this process's File on USERS, holding a shared flock
  @users_pid = nil # the pid that took it (a forked worker inherits the File, not the role)

  class << self
    # At boot, in every process that loads this file (the server in single mode, the master
    # when preloading, each worker otherwise). Leaves no database connection open, so a
    # preloading master forks none.
    def prepare!
      sweep_dead_groups unless EXPLICIT
      mutex = lock(LOCK, File::LOCK_EX)
      begin
        users = lock(USERS, File::LOCK_EX | File::LOCK_NB)
        if users
          # Nobody else uses the database: a file at this path is stale (an earlier server
          # whose group id was reused, or a crash), unless the user named it.
          remove_files(db_files(PATH)) unless EXPLICIT
        else
          # Others use it, and they seeded it under LOCK before taking their share. Only a
          # holder of LOCK takes USERS exclusively, so this does not wait.
          users = lock(USERS, File::LOCK_SH)
        end
        @users = users
        @users_pid = Process.pid
        create_and_seed
        users.flock(File::LOCK_SH)
      ensure
        mutex.close
      end
      ActiveRecord::Base.connection_pool.disconnect!
      at_exit { release! }
    end

    # From every new SQLite connection: a preloaded worker's first connection takes the
    # worker's own share of USERS (the inherited one is the master's).
    def hold!
      return if @users_pid == Process.pid
      @mutex.synchronize do
        return if @users_pid == Process.pid
        @users = lock(USERS, File::LOCK_SH)
        @users_pid = Process.pid
      end
    end

    # At exit: the last user removes the database (see the header).
    def release!
      return unless @users && @users_pid == Process.pid
      begin
        ActiveRecord::Base.connection_pool.disconnect!
      rescue StandardError
        nil
      end
      mutex = lock(LOCK, File::LOCK_EX)
      begin
        @users.flock(File::LOCK_UN)
        if !EXPLICIT && @users.flock(File::LOCK_EX | File::LOCK_NB) && same_file?(@users, USERS)
          remove_files(db_files(PATH) + [USERS, LOCK])
        end
      ensure
        @users.close
        @users = nil
        mutex.close
      end
    end

    private

    def create_and_seed
      ActiveRecord::Base.connection_pool.with_connection do |conn|
        conn.transaction do
          # Rails version: table_exists? checks tables only from 5.1 on; same on 6.0 to 7.2.
          RailsMixedSeed.create_schema(conn) unless conn.table_exists?(:comments)
          RailsMixedSeed.insert_rows unless Post.exists?
        end
      end
    end

    # Opens path and flocks it. Returns the File; nil when mode has LOCK_NB and the lock is
    # taken, or when create is false and the file does not exist. A file removed or replaced
    # while we waited for its lock is reopened, so that two processes never both "hold" a
    # lock, one of them on a deleted file.
    def lock(path, mode, create: true)
      loop do
        flags = File::RDWR | (create ? File::CREAT : 0)
        file =
          begin
            File.open(path, flags, 0o644)
          rescue Errno::ENOENT
            return nil
          end
        unless file.flock(mode)
          file.close
          return nil
        end
        return file if same_file?(file, path)
        file.close
      end
    end

    def same_file?(file, path)
      on_disk = File.stat(path)
      open = file.stat
      on_disk.ino == open.ino && on_disk.dev == open.dev
    rescue Errno::ENOENT
      false
    end

    def db_files(db)
      [db, "#{db}-wal", "#{db}-shm", "#{db}-journal"]
    end

    def remove_files(paths)
      paths.each do |path|
        begin
          File.delete(path)
        rescue SystemCallError # missing, or another user's file in a sticky /tmp
          nil
        end
      end
    end

    # Files of servers whose process group is gone and whose locks are free: left by SIGKILL
    # or by Unicorn workers, which exit! on SIGTERM without running at_exit.
    def sweep_dead_groups
      own = Process.getpgrp
      Dir.glob(File.join(Dir.tmpdir, "#{STALE_PREFIX}*.sqlite3")).each do |db|
        pgid = db[/-(\d+)\.sqlite3\z/, 1].to_i
        next if pgid <= 0 || pgid == own || group_alive?(pgid)
        locks = []
        begin
          free = ["#{db}.lock", "#{db}.users"].all? do |path|
            file = lock(path, File::LOCK_EX | File::LOCK_NB, create: false)
            locks << file if file
            file || !File.exist?(path)
          end
          remove_files(db_files(db) + ["#{db}.users", "#{db}.lock"]) if free
        ensure
          locks.each(&:close)
        end
      end
    end

    def group_alive?(pgid)
      Process.kill(0, -pgid)
      true
    rescue Errno::ESRCH
      false
    rescue Errno::EPERM # someone else's group
      true
    end
  end
end

# Every SQLite connection, whatever the Rails version, gets the same settings.
module RailsMixedSQLite
  # Rails version: 7.2 sets these by default (its DEFAULT_PRAGMAS, added during 7.1's
  # development); 6.x leaves SQLite's defaults (journal_mode=delete, synchronous=full, no
  # mmap). Setting them here makes the database behave the same under every Rails.
  # journal_mode=WAL is stored in the file; the others are per connection.
  PRAGMAS = [
    ["journal_mode", "WAL"],
    ["synchronous", "NORMAL"],
    ["mmap_size", 134_217_728],
    ["journal_size_limit", 67_108_864],
    ["cache_size", 2000],
  ].freeze

  private

  # Rails version: configure_connection is the adapter's private per-connection setup on
  # 6.0, 6.1 and 7.x (7.1+ also calls it after a reconnect). The SQLite3::Database is
  # @connection up to 7.0 and @raw_connection from 7.1 on.
  def configure_connection
    super
    db = @raw_connection || @connection
    # Rails version: 6.0 to 7.2 pass `timeout` to SQLite's busy_timeout, which sleeps in C
    # while holding the GVL: a thread waiting for the write lock then stops the thread of the
    # same process that holds it, until the timeout, and the request fails with "database is
    # locked" (sqlite3-ruby issue 261, rails PR 50370). Rails 8.0 with sqlite3 2.x waits in
    # Ruby instead (busy_handler_timeout=, rails PR 51958). This does that on every version,
    # replacing whatever handler Rails installed.
    deadline = nil
    limit = RailsMixedDB::TIMEOUT_MS / 1000.0
    db.busy_handler do |count|
      now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      deadline = now + limit if count.zero?
      if now < deadline
        sleep 0.001
        true
      else
        false # exactly false: sqlite3 1.4 retries on any other value, nil included
      end
    end
    PRAGMAS.each { |name, value| db.execute("PRAGMA #{name} = #{value}") }
    RailsMixedDB.hold!
  end
end

class RailsMixed < Rails::Application
  # Rails version: load_defaults accepts the running version's "major.minor" on every
  # release from 5.0 on, so the app gets the defaults a newly generated app would have.
  config.load_defaults Rails::VERSION::STRING.to_f
  # The app root is this directory (app/views, config/database.yml), whichever directory
  # the server was started from.
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

  # Rails version: 7.1 and 7.2 log "You are running SQLite in production" once per process
  # at :warn unless this is off. The setting does not exist on 6.x (it would be passed on
  # to ActiveRecord::Base, which has no such attribute, and fail) nor from 8.0 on; 7.0 is
  # left alone too, as whether it has it is not verified (at worst, one warning line).
  if Rails.gem_version >= Gem::Version.new("7.1") && Rails::VERSION::MAJOR < 8
    config.active_record.sqlite3_production_warning = false
  end
end

RailsMixed.initialize!

# Rails version: the adapter is loaded by initialize! (eager loading connects Active Record
# to database.yml's config); requiring it again is a no-op on every version.
require "active_record/connection_adapters/sqlite3_adapter"
ActiveRecord::ConnectionAdapters::SQLite3Adapter.prepend(RailsMixedSQLite)

# Models, controllers and routes are defined after initialize!, like the routes of
# rails-hello: some framework settings are applied when Active Record and Action Controller
# load (e.g. belongs_to_required_by_default is read by belongs_to itself), and
# initialize! is where load_defaults' values are applied.
class ApplicationRecord < ActiveRecord::Base
  self.abstract_class = true
end

class Author < ApplicationRecord
  has_many :posts, inverse_of: :author
end

class Post < ApplicationRecord
  belongs_to :author, inverse_of: :posts
  has_many :comments, inverse_of: :post

  # posts.created_at is indexed.
  scope :recent, -> { order(created_at: :desc).limit(20) }
end

class Comment < ApplicationRecord
  # counter_cache: creating a comment also runs UPDATE posts SET comments_count = ... in the
  # same transaction. inverse_of: the required-belongs_to validation uses the post the
  # comment was built from, without a SELECT inside the write transaction.
  belongs_to :post, counter_cache: true, inverse_of: :comments
  validates :author_name, :body, presence: true
end

# The deterministic seed (see the header). Text is lorem-like words, names are computing
# pioneers.
module RailsMixedSeed
  AUTHORS = 50
  POSTS = 500
  COMMENTS = 2000
  EPOCH = Time.utc(2024, 1, 1)
  POST_SPACING = 4 * 3600 # seconds between consecutive posts

  WORDS = %w[
    lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt
    ut labore et dolore magna aliqua enim ad minim veniam quis nostrud exercitation ullamco
    laboris nisi aliquip ex ea commodo consequat duis aute irure in reprehenderit voluptate
    velit esse cillum fugiat nulla pariatur excepteur sint occaecat cupidatat non proident
    sunt culpa qui officia deserunt mollit anim id est laborum ruby rails request response
    thread process worker fork socket kernel cache memory allocator garbage collector heap
    page latency throughput benchmark server client queue lock database index query
    transaction template partial layout router controller model view record schema column
  ].freeze
  FIRST = %w[
    Ada Alan Barbara Claude Donald Edsger Frances Grace Hedy John
    Katherine Ken Leslie Linus Margaret Niklaus Radia Ruth Tim Yukihiro
  ].freeze
  LAST = %w[
    Lovelace Turing Liskov Shannon Knuth Dijkstra Allen Hopper Lamarr Backus
    Johnson Thompson Lamport Torvalds Hamilton Wirth Perlman Teitelbaum Berners-Lee Matsumoto
  ].freeze

  class << self
    def create_schema(conn)
      conn.create_table :authors do |t|
        t.string :name, null: false
        t.string :email, null: false
        t.text :bio
        t.timestamps
      end
      # No foreign-key constraints: Rails' support for them on SQLite changed between 6.0 and
      # 7.2, and the app never deletes anything.
      conn.create_table :posts do |t|
        t.references :author, null: false, index: true
        t.string :title, null: false
        t.text :body, null: false
        t.integer :likes, null: false, default: 0
        t.integer :comments_count, null: false, default: 0
        t.timestamps
      end
      conn.add_index :posts, :created_at
      conn.create_table :comments do |t|
        t.references :post, null: false, index: true
        t.string :author_name, null: false
        t.text :body, null: false
        t.timestamps
      end
    end

    # Rails version: insert_all! is 6.0+. Timestamps are given explicitly: 6.x's insert_all
    # does not set them, 7.x's sets only those not given.
    def insert_rows
      rng = Random.new(42)
      authors = (1..AUTHORS).map do |id|
        first = FIRST[rng.rand(FIRST.size)]
        last = LAST[rng.rand(LAST.size)]
        {
          id: id, name: "#{first} #{last}", email: "#{first}.#{last}.#{id}@example.com".downcase,
          bio: sentence(rng), created_at: EPOCH, updated_at: EPOCH
        }
      end
      posts = (1..POSTS).map do |id|
        at = post_time(id)
        {
          id: id, author_id: rng.rand(1..AUTHORS), title: title(rng),
          body: Array.new(rng.rand(3..5)) { paragraph(rng) }.join("\n\n"),
          likes: rng.rand(0..250), comments_count: 0, created_at: at, updated_at: at
        }
      end
      comments = (1..COMMENTS).map do |id|
        post_id = rng.rand(1..POSTS)
        posts[post_id - 1][:comments_count] += 1
        at = post_time(post_id) + rng.rand(60..3 * 86_400)
        {
          id: id, post_id: post_id, author_name: "#{FIRST[rng.rand(FIRST.size)]} #{LAST[rng.rand(LAST.size)]}",
          body: Array.new(rng.rand(1..3)) { sentence(rng) }.join(" "), created_at: at, updated_at: at
        }
      end
      # Slices keep each INSERT well under SQLite's 1 MB statement limit.
      authors.each_slice(100) { |rows| Author.insert_all!(rows) }
      posts.each_slice(100) { |rows| Post.insert_all!(rows) }
      comments.each_slice(250) { |rows| Comment.insert_all!(rows) }
    end

    def post_time(id)
      EPOCH + id * POST_SPACING
    end

    def sentence(rng)
      words = Array.new(rng.rand(6..14)) { WORDS[rng.rand(WORDS.size)] }
      words[0] = words[0].capitalize
      words.join(" ") + "."
    end

    def paragraph(rng)
      Array.new(rng.rand(3..6)) { sentence(rng) }.join(" ")
    end

    def title(rng)
      Array.new(rng.rand(3..7)) { WORDS[rng.rand(WORDS.size)] }.join(" ").capitalize
    end
  end
end

# Work for /cpu and /files, kept out of the controller so it reads as what it measures.
module RailsMixedWork
  PRIME_LIMIT = 3000

  # Rails' own source files among those loaded at boot, sorted, 200 of them evenly spread:
  # the same set whichever server loaded the app (servers' own files are left out).
  RAILS_FILE = %r{/lib/(?:active_support|active_model|active_record|action_dispatch|action_controller|action_view|abstract_controller|rails)/}.freeze
  FILES = begin
    all = $LOADED_FEATURES.grep(RAILS_FILE).grep(/\.rb\z/).uniq.sort.select { |f| File.file?(f) }
    all.size <= 200 ? all : Array.new(200) { |i| all[i * all.size / 200] }
  end.freeze

  class << self
    # Trial division, then 32-bit FNV-1a over the primes' decimal text: integer arithmetic,
    # blocks, array growth and string building, no allocation-free shortcut.
    def cpu
      primes = [2]
      n = 3
      while n < PRIME_LIMIT
        prime = true
        primes.each do |p|
          break if p * p > n
          if (n % p).zero?
            prime = false
            break
          end
        end
        primes << n if prime
        n += 2
      end
      hash = 0x811c9dc5
      primes.each_slice(16) do |slice|
        slice.join(",").each_byte { |b| hash = ((hash ^ b) * 0x01000193) & 0xffffffff }
      end
      "#{primes.size} primes below #{PRIME_LIMIT}, fnv1a #{format("%08x", hash)}\n"
    end

    def files
      newest = nil
      FILES.each do |path|
        mtime = File.mtime(path)
        newest = mtime if newest.nil? || mtime > newest
      end
      "#{FILES.size} files, newest mtime #{newest&.utc&.iso8601 || "none"}\n"
    end
  end
end

class ApplicationController < ActionController::Base
end

class HealthController < ApplicationController
  BODY = "rails-mixed: ok\n".freeze

  def show
    render plain: BODY
  end
end

class PostsController < ApplicationController
  # POST /posts/:id/like is called by API clients, without a form's CSRF token.
  # Rails version: skip_forgery_protection is 5.2+.
  skip_forgery_protection only: :like

  # Renders app/views/posts/index.html.erb in layouts/application.
  def index
    @posts = Post.recent.includes(:author)
  end

  def show
    @post = Post.includes(:author).find(params[:id])
    @comments = @post.comments.order(created_at: :desc, id: :desc).limit(50)
  end

  def like
    post = Post.find(params[:id])
    post.increment!(:likes)
    render json: { id: post.id, likes: post.likes }
  end
end

class CommentsController < ApplicationController
  skip_forgery_protection

  # Server-generated content: the load tool sends no body.
  NAMES = RailsMixedSeed::FIRST.product(RailsMixedSeed::LAST).map { |f, l| "#{f} #{l}" }.freeze
  BODIES = [
    "Great post, thanks for writing it up.",
    "I measured the same thing on my machine and got similar numbers.",
    "Could you say more about the allocator settings you used?",
    "This matches what we saw in production after the upgrade.",
  ].freeze

  def create
    post = Post.find(params[:post_id])
    comment = post.comments.create!(author_name: NAMES.sample, body: BODIES.sample)
    render json: { id: comment.id, post_id: post.id, created_at: comment.created_at }, status: :created
  end
end

module Api
  # ActionController::API: no views, no CSRF, fewer modules than Base.
  class PostsController < ActionController::API
    def index
      posts = Post.recent.includes(:author).map do |post|
        {
          id: post.id, title: post.title, author: post.author.name, likes: post.likes,
          comments_count: post.comments_count, created_at: post.created_at
        }
      end
      render json: { posts: posts }
    end
  end
end

class WorkController < ApplicationController
  def cpu
    render plain: RailsMixedWork.cpu
  end

  def files
    render plain: RailsMixedWork.files
  end
end

# Drawn after initialize!: booting (re)loads the routes from config/routes.rb, which
# this app does not have, and would wipe routes drawn before it.
RailsMixed.routes.draw do
  root "health#show"
  resources :posts, only: [:index, :show] do
    member { post(:like) } # parentheses: a method call even if the server script has a local named post
    resources :comments, only: [:create]
  end
  namespace :api, defaults: { format: :json } do
    resources :posts, only: [:index]
  end
  get "cpu", to: "work#cpu"
  get "files", to: "work#files"
end

RailsMixedDB.prepare!

run RailsMixed
