# One INTERFACE target carries the compile settings every ScaleLab target shares.
add_library(scalelab_settings INTERFACE)
add_library(ScaleLab::settings ALIAS scalelab_settings)
target_compile_features(scalelab_settings INTERFACE cxx_std_20)
target_compile_options(scalelab_settings INTERFACE
  $<$<CXX_COMPILER_ID:GNU,Clang>:-Wall -Wextra -Wpedantic -Wshadow=local -Wnon-virtual-dtor -Wcast-qual>)
target_compile_definitions(scalelab_settings INTERFACE
  # torch uses the identifier `slots`; Qt code spells Q_SLOTS / Q_SIGNALS / Q_EMIT.
  QT_NO_KEYWORDS
  QT_NO_CONTEXTLESS_CONNECT
  QT_NO_FOREACH
  SCALELAB_VERSION="${PROJECT_VERSION}")

# scalelab::gitCommit(): the commit the binaries were built from, for reports. Regenerated
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
