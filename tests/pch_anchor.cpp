// The source of scalelab_test_pch, the target that builds the tests' shared precompiled
// header (tests/CMakeLists.txt); it compiles nothing of its own.
