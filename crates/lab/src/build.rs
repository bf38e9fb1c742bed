//! Ruby builds: CRuby from a release tarball or a git source tree, into a cache directory.
//! (Being written; see issue 5.)
