# rails-forum's setup: the schema and a deterministic seed, into DATABASE_URL's database.
# rubyrace runs it as the experiment's `setup` (["{ruby}", "{app}/db/setup.rb"]) before the
# first trial; with reset = "template" every trial then starts from exactly this data.
#
# Seed (Random.new(42), timestamps from 2024-01-01 UTC): 50 users, user1@example.com to
# user50@example.com, password "secret" (bcrypt, cost FORUM_BCRYPT_COST, 10 by default; one
# digest shared by all, so the setup takes no longer at a high cost); 100 topics with 5 to 40
# posts each (about 2250), and likes on about a third of the posts. Existing tables are
# dropped first: the setup always leaves the same data.
require_relative "../app"

started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
ActiveRecord::Schema.verbose = false
ActiveRecord::Schema.define do
  create_table :users, force: :cascade do |t|
    t.string :name, null: false
    t.string :email, null: false, index: { unique: true }
    t.string :password_digest, null: false
    t.timestamps
  end
  create_table :topics, force: :cascade do |t|
    t.references :user, null: false, foreign_key: true
    t.string :title, null: false
    t.integer :posts_count, null: false, default: 0
    t.datetime :last_posted_at, null: false, index: true
    t.timestamps
  end
  create_table :posts, force: :cascade do |t|
    t.references :topic, null: false, foreign_key: true, index: false
    t.references :user, null: false, foreign_key: true
    t.text :body, null: false
    t.integer :likes_count, null: false, default: 0
    t.timestamps
    t.index %i[topic_id id]
  end
  create_table :likes, force: :cascade do |t|
    t.references :post, null: false, foreign_key: true, index: false
    t.references :user, null: false, foreign_key: true
    t.timestamps
    t.index %i[post_id user_id], unique: true
  end
end

WORDS = %w[
  ruby rails puma thread fiber fork worker heap garbage collector allocator jemalloc yjit
  cache index query join latency throughput request response cookie session token route
  controller model view partial layout template record migration schema column postgres
  redis queue lock mutex socket kernel syscall benchmark profile flame graph median interval
].freeze
rng = Random.new(42)
words = ->(n) { Array.new(n) { WORDS[rng.rand(WORDS.size)] }.join(" ") }
epoch = Time.utc(2024, 1, 1)
digest = BCrypt::Password.create("secret", cost: Rails.configuration.x.bcrypt_cost).to_s

users = (1..50).map do |i|
  { id: i, name: "User #{i}", email: "user#{i}@example.com", password_digest: digest,
    created_at: epoch, updated_at: epoch }
end
User.insert_all!(users)

topics = []
posts = []
likes = []
post_id = 0
(1..100).each do |t|
  count = 5 + rng.rand(36)
  first = epoch + t * 3600
  (0...count).each do |k|
    post_id += 1
    at = first + k * 600
    posts << { id: post_id, topic_id: t, user_id: 1 + rng.rand(50),
               body: words.call(20 + rng.rand(60)).capitalize + ".",
               likes_count: 0, created_at: at, updated_at: at }
    next unless rng.rand(3).zero?
    likers = (1..50).to_a.sample(1 + rng.rand(5), random: rng)
    likers.each { |u| likes << { post_id: post_id, user_id: u, created_at: at, updated_at: at } }
    posts.last[:likes_count] = likers.size
  end
  last = first + (count - 1) * 600
  topics << { id: t, user_id: 1 + rng.rand(50), title: words.call(3 + rng.rand(6)).capitalize,
              posts_count: count, last_posted_at: last, created_at: first, updated_at: last }
end
Topic.insert_all!(topics)
Post.insert_all!(posts)
Like.insert_all!(likes)
# The sequences go on after the seeded ids.
%w[users topics posts likes].each do |table|
  ActiveRecord::Base.connection.execute(
    "SELECT setval(pg_get_serial_sequence('#{table}', 'id'), (SELECT MAX(id) FROM #{table}))"
  )
end
ActiveRecord::Base.connection.execute("ANALYZE")

took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
puts format("rails-forum: %d users, %d topics, %d posts, %d likes in %s (%.2f s, Rails %s)",
            User.count, Topic.count, Post.count, Like.count,
            ActiveRecord::Base.connection.current_database, took, Rails.version)
