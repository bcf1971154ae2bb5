// What the binaries were built from, for reports. Defined in a file generated at build
// time (cmake/BuildInfo.cmake), linked from the scalelab_build_info library.
#pragma once

namespace scalelab::common {

// The short git commit of the source tree, "+local changes" when it had uncommitted edits.
const char *gitCommit();

} // namespace scalelab::common
