# benchd_precompile_api_headers(TARGET [TESTS]): the headers nearly every
# torch-free file includes, precompiled once per target. The generated
# bench.pb.h with gRPC's, Abseil's and nlohmann's headers are ~90% of such a
# file's compile time (server/jobs/job_manager.cc: 4.3 s whole, 4.0 s for these
# headers alone), in the main build and again in the sanitizer build. Only
# for targets of many files (each PCH costs one such compile). TESTS adds
# GoogleTest's headers. -DBENCHD_PCH=OFF compiles without (to check that
# every file includes what it uses).
option(BENCHD_PCH "Precompile the common headers of the torch-free targets" ON)
function(benchd_precompile_api_headers target)
  if(NOT BENCHD_PCH)
    return()
  endif()
  set(headers <algorithm> <chrono> <functional> <map> <memory> <mutex> <optional> <string>
              <vector> "${PROJECT_BINARY_DIR}/proto/benchd/v1/bench.pb.h"
              <grpcpp/grpcpp.h> <absl/status/statusor.h> <absl/strings/str_cat.h>
              <nlohmann/json.hpp>)
  if("TESTS" IN_LIST ARGN)
    list(APPEND headers <gtest/gtest.h> <gmock/gmock.h>)
  endif()
  target_precompile_headers(${target} PRIVATE ${headers})
endfunction()
