# All dependencies are Debian packages (scripts/install_deps.sh installs them);
# nothing is vendored or downloaded at build time.
find_package(Eigen3 3.4 REQUIRED NO_MODULE)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(TBB REQUIRED)
# The search builds and drops many small graphs on every core; glibc's
# malloc spent up to 40% of it in its locks and free lists (perf,
# inception-v3 on 192 devices: 78 s -> 42 s with TBB's scalable
# allocator). Executables that search replace malloc with it; the proxy
# exports no symbol they use, hence --no-as-needed.
# (Not under the sanitizers: AddressSanitizer replaces malloc itself.)
function(pcgx_scalable_malloc target)
  if(TARGET TBB::tbbmalloc_proxy AND NOT PCGX_SANITIZE)
    target_link_libraries(${target} PRIVATE "-Wl,--push-state,--no-as-needed" TBB::tbbmalloc_proxy "-Wl,--pop-state")
  endif()
endfunction()
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(CLI11 REQUIRED)
find_package(Threads REQUIRED)

# Debian's libz3-dev ships no CMake package: find the header and library.
find_path(Z3_INCLUDE_DIR z3++.h)
find_library(Z3_LIBRARY z3)
if(NOT Z3_INCLUDE_DIR OR NOT Z3_LIBRARY)
  message(FATAL_ERROR "Z3 not found: install libz3-dev (scripts/install_deps.sh does)")
endif()
add_library(pcgx_z3 INTERFACE)
target_include_directories(pcgx_z3 SYSTEM INTERFACE ${Z3_INCLUDE_DIR})
target_link_libraries(pcgx_z3 INTERFACE ${Z3_LIBRARY})

# CUDA is optional: detected, never required.
set(PCGX_HAVE_CUDA OFF)
if(NOT PCGX_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(PCGX_HAVE_CUDA ON)
  elseif(PCGX_CUDA STREQUAL "ON")
    message(FATAL_ERROR "PCGX_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
message(STATUS "pcgx: CUDA backend ${PCGX_HAVE_CUDA}")
