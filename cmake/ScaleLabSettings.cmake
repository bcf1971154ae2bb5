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
