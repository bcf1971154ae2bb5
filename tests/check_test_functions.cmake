# ctest's NAME.functions for a test registered with SPLIT (tests/CMakeLists.txt): the Qt Test
# executable TEST must have exactly the functions EXPECTED (a list), so that a function added
# to it and not to SPLIT fails here instead of never running.
#   cmake -DTEST=path/to/tst_x "-DEXPECTED=a;b;c" -P check_test_functions.cmake
execute_process(COMMAND ${TEST} -functions OUTPUT_VARIABLE _out RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "${TEST} -functions failed (exit ${_rc})")
endif()
string(REGEX REPLACE "\\(\\)" "" _out "${_out}")
string(REGEX REPLACE "\n+$" "" _out "${_out}")
string(REPLACE "\n" ";" _actual "${_out}")
set(_missing ${_actual})
list(REMOVE_ITEM _missing ${EXPECTED})
set(_stale ${EXPECTED})
list(REMOVE_ITEM _stale ${_actual})
if(_missing OR _stale)
  message(FATAL_ERROR "${TEST}: the functions registered with ctest (SPLIT in tests/CMakeLists.txt) "
    "are not the executable's.\n  not registered, so never run: ${_missing}\n"
    "  registered but not in the executable: ${_stale}\nList every function of the executable in SPLIT.")
endif()
list(LENGTH _actual _n)
message(STATUS "${TEST}: all ${_n} functions are registered")
