# Warnings are on everywhere and kept clean; pcgx_target_warnings() applies them
# to one target so third-party headers keep their own settings.
function(pcgx_target_warnings target)
  # -Wno-restrict: GCC 12 reports "literal" + std::string as overlapping
  # memcpy (GCC bug 105329, a false positive inside libstdc++).
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow=local
                                           -Wno-missing-field-initializers -Wno-restrict)
endfunction()
