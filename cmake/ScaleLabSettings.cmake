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
