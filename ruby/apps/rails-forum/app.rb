# rails-forum: a forum in the spirit of Discourse (which Rails Ruby Bench runs), small
# enough to read in one sitting: PostgreSQL through Active Record (DATABASE_URL, the pg
# gem), users with has_secure_password (bcrypt), log in and out with a cookie session,
# topics, posts with pagination, replies, likes, a layout with partials, and CSRF
# protection on every form, as a generated Rails app has it.
#
# Loaded by config.ru (the server) and by db/setup.rb (the setup: schema and a
# deterministic seed). Both need DATABASE_URL; rubyrace's [services.postgres] gives it.
#
# Routes (HTML unless said otherwise):
#   GET  /health                 "ok", text/plain, no database: the readiness path.
#   GET  /                       the topics, 20 per page (?page=N), most recently active
#   GET  /topics                 first; topics/_topic per topic, with its author.
#   GET  /topics/:id             a topic and 10 of its posts per page (?page=N), oldest
#                                first; posts/_post per post (author, likes, a like button
#                                and, for a member, a reply form). 404 for an unknown topic.
#   GET  /login                  the login form (sessions/new).
#   POST /login                  email + password: 302 to /topics and a new session (the
#                                session is reset, so the CSRF token changes), or 422.
#   DELETE /logout               (a form's POST with _method=delete) 302 to /topics.
#   POST /topics/:id/posts       a reply (members only): 302 to the topic's last page.
#   POST /posts/:id/like         a like (members only; once per member and post, a second
#                                like is a no-op): 302 back to the post's page.
# A request without a valid CSRF token on a POST gets 422 (ActionController::InvalidAuthenticityToken).
# Members' pages are the same as visitors' plus forms; nothing is cached.
#
# With REDIS_URL (rubyrace's [services.redis] gives it), topic views are counted in Redis, as
# Discourse keeps its counters there: INCR for every topic page shown, MGET for the views of
# a page of topics (the redis gem: Debian's ruby-redis). Without it, no views are shown.
#
# Written against Rails 6.1 (Debian bookworm, Ruby 3.1) and 7.2 (trixie, Ruby 3.3); Ruby
# syntax within 2.7. Production mode; secret_key_base inline (a benchmark app).
ENV["RAILS_ENV"] ||= ENV["RACK_ENV"] || "production"
abort "rails-forum needs DATABASE_URL (PostgreSQL)" if ENV["DATABASE_URL"].to_s.empty?

require "rails"
require "active_record/railtie"
require "action_controller/railtie"
require "action_view/railtie"
require "bcrypt"
unless ENV["REDIS_URL"].to_s.empty?
  begin
    require "redis"
  rescue LoadError
    abort "rails-forum: REDIS_URL is set, but the redis gem is missing (Debian: apt-get install ruby-redis)"
  end
end

class RailsForum < Rails::Application
  config.load_defaults Rails::VERSION::STRING.to_f
  config.root = File.expand_path(__dir__)
  config.cache_classes = true
  config.eager_load = true
  config.consider_all_requests_local = false
  config.public_file_server.enabled = false
  config.logger = ActiveSupport::Logger.new($stdout)
  config.log_level = :warn
  config.secret_key_base = "rubyrace-benchmark-app-not-a-secret-" + "1" * 64
  config.hosts = ["127.0.0.1", "localhost", IPAddr.new("::1")]
  config.session_store :cookie_store, key: "_forum_session"
  # The cost of the seeded passwords, so of every login: BCrypt's default is 12 (about 0.25 s
  # of CPU per login); FORUM_BCRYPT_COST at setup changes it. 10 by default.
  config.x.bcrypt_cost = Integer(ENV.fetch("FORUM_BCRYPT_COST", "10"))
end

RailsForum.initialize!

class ApplicationRecord < ActiveRecord::Base
  self.abstract_class = true
end

class User < ApplicationRecord
  has_secure_password
  has_many :posts
end

class Topic < ApplicationRecord
  belongs_to :user
  has_many :posts
  PER_PAGE = 20
end

class Post < ApplicationRecord
  belongs_to :topic, counter_cache: true, touch: :last_posted_at
  belongs_to :user
  has_many :likes
  PER_PAGE = 10
end

class Like < ApplicationRecord
  belongs_to :post, counter_cache: true
  belongs_to :user
end

# Topic views in Redis (REDIS_URL), one connection per process: a forked Puma worker opens
# its own rather than sharing its parent's socket.
module Views
  KEY = "forum:topic:%d:views"
  @lock = Mutex.new

  def self.redis
    return nil if ENV["REDIS_URL"].to_s.empty?
    @lock.synchronize do
      if @pid != Process.pid
        @redis = Redis.new(url: ENV["REDIS_URL"])
        @pid = Process.pid
      end
      @redis
    end
  end

  # Counts a view of `topic`; its views so far, or nil without Redis.
  def self.count(topic)
    redis&.incr(format(KEY, topic.id))
  end

  # Topic id => views, for a page of topics; empty without Redis.
  def self.of(topics)
    r = redis
    return {} if r.nil? || topics.empty?
    counts = r.mget(*topics.map { |t| format(KEY, t.id) })
    topics.map(&:id).zip(counts.map(&:to_i)).to_h
  end
end

RailsForum.routes.draw do
  get "/health", to: proc { [200, { "content-type" => "text/plain" }, ["ok\n"]] }
  root "topics#index"
  resources :topics, only: %i[index show] do
    resources :posts, only: :create
  end
  post "/posts/:id/like", to: "likes#create", as: :like_post
  get "/login", to: "sessions#new", as: :login
  post "/login", to: "sessions#create"
  delete "/logout", to: "sessions#destroy", as: :logout
end

class ApplicationController < ActionController::Base
  protect_from_forgery with: :exception
  helper_method :current_user

  private

  def current_user
    return @current_user if defined?(@current_user)
    @current_user = session[:user_id] && User.find_by(id: session[:user_id])
  end

  def require_member
    redirect_to login_url unless current_user
  end

  def page
    [params[:page].to_i, 1].max
  end
end

class TopicsController < ApplicationController
  def index
    @page = page
    @topics = Topic.includes(:user).order(last_posted_at: :desc, id: :desc)
                   .offset((@page - 1) * Topic::PER_PAGE).limit(Topic::PER_PAGE)
    @pages = (Topic.count + Topic::PER_PAGE - 1) / Topic::PER_PAGE
    @views = Views.of(@topics.to_a)
  end

  def show
    @topic = Topic.find(params[:id])
    @views = Views.count(@topic)
    @page = page
    @pages = [(@topic.posts_count + Post::PER_PAGE - 1) / Post::PER_PAGE, 1].max
    @posts = @topic.posts.includes(:user).order(:id)
                   .offset((@page - 1) * Post::PER_PAGE).limit(Post::PER_PAGE)
    @liked = current_user ? Like.where(user: current_user, post_id: @posts.map(&:id)).pluck(:post_id) : []
  end
end

class PostsController < ApplicationController
  before_action :require_member

  def create
    topic = Topic.find(params[:topic_id])
    post = topic.posts.create!(user: current_user, body: params.require(:body))
    last = (topic.reload.posts_count + Post::PER_PAGE - 1) / Post::PER_PAGE
    redirect_to topic_url(topic, page: last, anchor: "post-#{post.id}")
  end
end

class LikesController < ApplicationController
  before_action :require_member

  def create
    post = Post.find(params[:id])
    begin
      Like.create!(post: post, user: current_user) unless Like.exists?(post: post, user: current_user)
    rescue ActiveRecord::RecordNotUnique
      # The same member liked it from another session at the same moment (virtual users
      # draw their member at random): liked once, as a second like is a no-op.
      nil
    end
    index = post.topic.posts.where("id <= ?", post.id).count
    redirect_to topic_url(post.topic_id, page: (index + Post::PER_PAGE - 1) / Post::PER_PAGE)
  end
end

class SessionsController < ApplicationController
  def new; end

  def create
    user = User.find_by(email: params[:email].to_s.downcase)
    if user&.authenticate(params[:password].to_s)
      reset_session # a new session, and a new CSRF token, at login
      session[:user_id] = user.id
      redirect_to topics_url
    else
      flash.now[:alert] = "Wrong email or password."
      render :new, status: :unprocessable_entity
    end
  end

  def destroy
    reset_session
    redirect_to topics_url
  end
end
