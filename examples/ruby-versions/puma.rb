# Puma's configuration for examples/ruby-versions (named by the files' server_argv).
# `queue_requests false`: no reactor, so Puma never loads nio4r, whose C part cannot be
# built for the 3.4 build here (Debian ships no source for it) and whose pure-Ruby selector
# (NIO4R_PURE) spins on Linux: it "clears" its wakeup pipe with read(pipe.stat.size),
# which is read(0). Every Ruby runs Puma this way, so the four servers serve alike: each
# of the 4 threads owns a connection and reads its next request itself.
queue_requests false
