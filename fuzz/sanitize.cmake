# The sanitizer build (scripts/setup.sh makes it in build-fuzz/ with clang):
#   BENCHD_SANITIZE  every target with ASan + UBSan (UBSan fatal), so the
#                    torch-free unit tests run under both
#   BENCHD_FUZZ      also the libFuzzer targets of fuzz/ and their ctest
#                    entries (fuzz.*); needs clang, implies BENCHD_SANITIZE
# The worker (LibTorch) is not built here: see DEVELOPERS.md.
option(BENCHD_SANITIZE "Build every target with ASan and UBSan" OFF)
option(BENCHD_FUZZ "Build the libFuzzer targets in fuzz/ (clang; implies BENCHD_SANITIZE)" OFF)
if(BENCHD_FUZZ AND NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "BENCHD_FUZZ needs clang (libFuzzer): configure with "
                      "-DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang")
endif()
if(BENCHD_FUZZ AND BENCHD_BUILD_WORKER)
  message(FATAL_ERROR "BENCHD_FUZZ: configure with -DBENCHD_BUILD_WORKER=OFF (LibTorch is not "
                      "sanitized; see DEVELOPERS.md)")
endif()
if(BENCHD_SANITIZE OR BENCHD_FUZZ)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
# benchd_not_in_sanitizer_build(TARGET...): programs no test of the sanitizer
# build runs (its ctest runs the unit tests and the fuzzers only) stay out of
# its default build; `ninja -C build-fuzz benchd` still builds them.
function(benchd_not_in_sanitizer_build)
  if(BENCHD_SANITIZE OR BENCHD_FUZZ)
    set_target_properties(${ARGN} PROPERTIES EXCLUDE_FROM_ALL ON)
  endif()
endfunction()
