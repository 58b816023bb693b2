# Warnings are on everywhere and kept clean; pcgx_target_warnings() applies them
# to one target so third-party headers keep their own settings.
function(pcgx_target_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow=local
                                           -Wno-missing-field-initializers)
endfunction()
