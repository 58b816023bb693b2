# Warnings are on everywhere and kept clean; pcgx_target_warnings() applies them
# to one target so third-party headers keep their own settings.
function(pcgx_target_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wno-missing-field-initializers)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # -Wno-restrict: GCC 12 reports "literal" + std::string as overlapping
    # memcpy (GCC bug 105329, a false positive inside libstdc++).
    target_compile_options(${target} PRIVATE -Wshadow=local -Wno-restrict)
  endif()
endfunction()
