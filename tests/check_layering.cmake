# ctest's `layering` (tests/CMakeLists.txt): the dependency rules a link line cannot enforce
# (docs/architecture.md; gRPC's headers are on the system include path, so linking
# scalelab_proto PRIVATE to scalelab_agents does not keep anyone from including them).
# gRPC is core/agents' own business: the rest reaches agents through AgentClient and asks
# a core::Status what kind of failure it is (isNotFound(), isUnreachable(), ...). So
#   - no file under app/ includes <grpcpp/...> or a *.grpc.pb.h header, and
#   - no file under app/, core/studies or core/reports mentions grpc::Status(Code).
# Each breach is named FILE:LINE.
#   cmake -DSOURCE_DIR=path/to/the/repository -P check_layering.cmake
cmake_minimum_required(VERSION 3.25) # script mode: today's policies (while(TRUE), if(... MATCHES))
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "usage: cmake -DSOURCE_DIR=<the repository> -P check_layering.cmake")
endif()

set(_breaches)

# Appends "FILE:LINE: WHY" to _breaches for each match of REGEX (which must not span lines)
# in the .h and .cpp files under DIRS (relative to SOURCE_DIR).
function(find_breaches dirs regex why)
  set(breaches ${_breaches})
  foreach(dir IN LISTS dirs)
    file(GLOB_RECURSE files RELATIVE "${SOURCE_DIR}" "${SOURCE_DIR}/${dir}/*.h" "${SOURCE_DIR}/${dir}/*.cpp")
    foreach(file IN LISTS files)
      file(READ "${SOURCE_DIR}/${file}" text)
      set(line 1)
      while(TRUE)
        string(REGEX MATCH "${regex}" match "${text}")
        if(match STREQUAL "")
          break()
        endif()
        # The first occurrence of the matched text is where the regex matched.
        string(FIND "${text}" "${match}" at)
        string(SUBSTRING "${text}" 0 ${at} before)
        string(REGEX REPLACE "[^\n]" "" newlines "${before}")
        string(LENGTH "${newlines}" skipped)
        math(EXPR line "${line} + ${skipped}")
        list(APPEND breaches "${file}:${line}: ${why}")
        string(LENGTH "${match}" length)
        math(EXPR rest "${at} + ${length}")
        string(SUBSTRING "${text}" ${rest} -1 text)
      endwhile()
    endforeach()
  endforeach()
  set(_breaches ${breaches} PARENT_SCOPE)
endfunction()

find_breaches("app" "#[ \t]*include[ \t]*<grpcpp/[^>\n]*>"
  "includes gRPC (<grpcpp/...>): reach agents through AgentClient (core/agents/agent_client.h)")
find_breaches("app" "#[ \t]*include[ \t]*[<\"][^>\"\n]*\\.grpc\\.pb\\.h[>\"]"
  "includes a gRPC stub (*.grpc.pb.h): the messages are in *.pb.h, the calls in AgentClient")
find_breaches("app;core/studies;core/reports" "grpc::Status[A-Za-z]*"
  "mentions gRPC's status: ask the core::Status (isNotFound(), isUnreachable(), ...)")

if(_breaches)
  list(LENGTH _breaches _n)
  list(JOIN _breaches "\n  " _list)
  message(FATAL_ERROR "gRPC outside core/agents, ${_n} times (docs/architecture.md):\n  ${_list}")
endif()
message(STATUS "layering: gRPC stays inside core/agents")
