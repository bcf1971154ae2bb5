# One INTERFACE target carries the compile settings every ScaleLab target shares.
add_library(scalelab_settings INTERFACE)
add_library(ScaleLab::settings ALIAS scalelab_settings)
target_compile_features(scalelab_settings INTERFACE cxx_std_20)
target_compile_options(scalelab_settings INTERFACE
  $<$<CXX_COMPILER_ID:GNU,Clang>:-Wall -Wextra -Wpedantic -Wnon-virtual-dtor -Wcast-qual>
  $<$<CXX_COMPILER_ID:GNU>:-Wshadow=local>) # clang has no -Wshadow=local
target_compile_definitions(scalelab_settings INTERFACE
  # torch uses the identifier `slots`; Qt code spells Q_SLOTS / Q_SIGNALS / Q_EMIT.
  QT_NO_KEYWORDS
  QT_NO_CONTEXTLESS_CONNECT
  QT_NO_FOREACH
  SCALELAB_VERSION="${PROJECT_VERSION}")
# Debug information in RelWithDebInfo (the default build): line tables and function names
# (-g1), what backtraces, sanitizer reports and profilers use, at a fraction of the compile
# and link time of full -g (docs/testing.md, "How long it takes"). Code generation is the same.
# ON: full -g, for a debugger's view of variables (or configure a Debug build).
option(SCALELAB_FULL_DEBUG_INFO "RelWithDebInfo with full debug information (-g), not line tables (-g1)" OFF)
if(NOT SCALELAB_FULL_DEBUG_INFO)
  target_compile_options(scalelab_settings INTERFACE
    $<$<AND:$<CONFIG:RelWithDebInfo>,$<CXX_COMPILER_ID:GNU,Clang>>:-g1>)
endif()

# The linker: lld when it is installed (Debian's `lld`). It links a full build's 45 programs
# in 14 core-seconds where GNU ld takes 66 (docs/testing.md, "Side by side"); the programs
# are the same. -DSCALELAB_LINKER=default keeps the compiler's own linker.
set(SCALELAB_LINKER "lld" CACHE STRING "lld (when the compiler can use it) or default (the compiler's own linker)")
set_property(CACHE SCALELAB_LINKER PROPERTY STRINGS lld default)
if(SCALELAB_LINKER STREQUAL "lld")
  include(CheckLinkerFlag)
  check_linker_flag(CXX -fuse-ld=lld SCALELAB_HAVE_LLD)
  if(SCALELAB_HAVE_LLD)
    add_link_options(-fuse-ld=lld)
  else()
    message(STATUS "lld not found: linking with the compiler's own linker (apt-get install lld links ~4x faster)")
  endif()
elseif(NOT SCALELAB_LINKER STREQUAL "default")
  message(FATAL_ERROR "SCALELAB_LINKER is '${SCALELAB_LINKER}': use lld or default")
endif()

# scalelab::common::gitCommit(): the commit the binaries were built from, for reports. Regenerated
# at every build; only its one file recompiles when the commit changes.
set(_build_info ${CMAKE_BINARY_DIR}/generated/build_info.cpp)
add_custom_target(scalelab_build_info_gen
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${CMAKE_SOURCE_DIR} -DOUTPUT=${_build_info}
          -P ${CMAKE_CURRENT_LIST_DIR}/BuildInfo.cmake
  BYPRODUCTS ${_build_info}
  COMMENT "build info (git commit)")
add_library(scalelab_build_info STATIC ${_build_info})
add_dependencies(scalelab_build_info scalelab_build_info_gen)
set_target_properties(scalelab_build_info PROPERTIES POSITION_INDEPENDENT_CODE ON)
target_include_directories(scalelab_build_info PUBLIC ${CMAKE_SOURCE_DIR}/proto/rules)

# Checking builds. Set through scalelab_settings, so every ScaleLab target (libraries
# included) is compiled and linked the same way; Qt, gRPC and protobuf stay uninstrumented.
#  - SCALELAB_SANITIZE: ASan + UBSan (gcc or clang); a report stops the process.
#  - SCALELAB_FUZZ: the same with clang's libFuzzer coverage (tests/fuzz links -fsanitize=fuzzer).
if(SCALELAB_FUZZ OR SCALELAB_SANITIZE)
  set(_scalelab_sanitizers -fsanitize=address,undefined)
  if(SCALELAB_FUZZ)
    if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
      message(FATAL_ERROR "SCALELAB_FUZZ needs clang (libFuzzer), not ${CMAKE_CXX_COMPILER_ID}: configure "
        "with CC=clang CXX=clang++ (Debian: apt-get install clang libclang-rt-14-dev libfuzzer-14-dev), or run scripts/fuzz.sh")
    endif()
    set(_scalelab_sanitizers -fsanitize=fuzzer-no-link,address,undefined)
  endif()
  # UBSan's vptr check is left out: it inspects objects of classes from the system's Qt,
  # protobuf and gRPC, which are not built with it. -fno-sanitize-recover: a report is fatal.
  target_compile_options(scalelab_settings INTERFACE ${_scalelab_sanitizers} -fno-sanitize=vptr
    -fno-sanitize-recover=all -fno-omit-frame-pointer)
  target_link_options(scalelab_settings INTERFACE -fsanitize=address,undefined -fno-sanitize=vptr)
endif()

# Precompiled headers for the libraries with many translation units: the Qt, protobuf and
# gRPC headers nearly every file of the target includes, parsed once per target instead of
# once per file (the build on 2 cores is the developer's loop and a part of CI's time).
# Only headers the target's own includes already pull in, so nothing new is linked.
set(SCALELAB_PCH_QT_CORE <QString> <QStringList> <QList> <QMap> <QObject> <QJsonObject> <QJsonArray>
  <QJsonDocument> <QDateTime> <QFile> <QDir> <QFileInfo> <algorithm> <cmath> <functional> <memory>
  <optional> <vector> <map>)
function(scalelab_precompile target)
  target_precompile_headers(${target} PRIVATE ${SCALELAB_PCH_QT_CORE} ${ARGN})
endfunction()
