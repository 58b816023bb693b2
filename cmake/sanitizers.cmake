# scripts/test.sh --sanitize builds everything (into build-sanitize/) with
# AddressSanitizer and UndefinedBehaviorSanitizer; undefined behaviour is
# fatal, so a test that meets it fails.
option(PCGX_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
if(PCGX_SANITIZE)
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined;-fno-sanitize-recover=undefined;-fno-omit-frame-pointer>")
  add_link_options("$<$<LINK_LANGUAGE:CXX>:-fsanitize=address,undefined>")
endif()

# scripts/fuzz.sh: clang, libFuzzer's coverage on every library, and the
# same sanitizers (fuzz/CMakeLists.txt adds the fuzz targets).
option(PCGX_FUZZ "Build the libFuzzer targets in fuzz/ (clang only)" OFF)
if(PCGX_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "PCGX_FUZZ needs clang (CXX=clang++): libFuzzer is part of clang")
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link,address,undefined;-fno-sanitize-recover=undefined;-fno-omit-frame-pointer>")
  add_link_options("$<$<LINK_LANGUAGE:CXX>:-fsanitize=address,undefined>")
endif()
