# `cmake --install`: the pcgx executable, the libraries and their public
# headers, the shipped files (axioms, rulesets and opsets, machines, cost
# tables, plans, schedules) under share/pcgx, where an installed pcgx
# looks for them (pcg/resources.h), and a CMake package:
#
#   find_package(pcgx REQUIRED)
#   target_link_libraries(my_tool PRIVATE pcgx::search)        # a library
#   pcgx_add_plugin(my_ops my_ops.cpp)                         # a plugin
#
# Targets: pcgx::pcg, pcgx::generator, pcgx::rulesets, pcgx::verifier,
# pcgx::rulegen, pcgx::search, pcgx::runtime, pcgx::runner, pcgx::importer
# (static libraries, each with its dependencies), pcgx::plugin (headers
# only: what a plugin compiles against; the pcgx executable that loads it
# provides the code), and pcgx::pcgx, the executable.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(PCGX_INSTALLED_LIBRARIES pcgx_pcg pcgx_generator pcgx_rulesets pcgx_verifier pcgx_rulegen pcgx_search pcgx_runtime pcgx_runner
                             pcgx_importer pcgx_z3)
if(TARGET pcgx_runtime_cuda)
  list(APPEND PCGX_INSTALLED_LIBRARIES pcgx_runtime_cuda)
endif()
foreach(lib IN LISTS PCGX_INSTALLED_LIBRARIES)
  string(REPLACE "pcgx_" "" short ${lib})
  set_target_properties(${lib} PROPERTIES EXPORT_NAME ${short})
endforeach()

# A plugin's compile interface: pcg's headers (the registry, OpDef, Num<T>
# and the operator helpers), and the header-only libraries they include.
add_library(pcgx_plugin INTERFACE)
target_include_directories(pcgx_plugin INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/pcg/include>)
target_link_libraries(pcgx_plugin INTERFACE Eigen3::Eigen nlohmann_json::nlohmann_json)
target_compile_features(pcgx_plugin INTERFACE cxx_std_20)
set_target_properties(pcgx_plugin PROPERTIES EXPORT_NAME plugin)

install(TARGETS pcgx EXPORT pcgxTargets RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS ${PCGX_INSTALLED_LIBRARIES} pcgx_plugin EXPORT pcgxTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
foreach(dir pcg generator rulesets verifier rulegen search runtime runner importer)
  install(DIRECTORY ${dir}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endforeach()
if(TARGET pcgx_runtime_cuda)
  install(DIRECTORY runtime/cuda/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endif()

set(PCGX_SHARE ${CMAKE_INSTALL_DATADIR}/pcgx)
install(DIRECTORY axioms/ DESTINATION ${PCGX_SHARE}/axioms FILES_MATCHING PATTERN "*.smt2")
install(DIRECTORY rulesets/ DESTINATION ${PCGX_SHARE}/rulesets FILES_MATCHING PATTERN "*.json" PATTERN "*.unproved.txt"
        PATTERN "include" EXCLUDE PATTERN "src" EXCLUDE)
foreach(dir machines cost plans schedules)
  install(DIRECTORY data/${dir} DESTINATION ${PCGX_SHARE}/data)
endforeach()

install(EXPORT pcgxTargets NAMESPACE pcgx:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pcgx)
set(PCGX_CONFIG_ONNX ${ONNX_FOUND})
set(PCGX_CONFIG_CUDA ${PCGX_HAVE_CUDA})
configure_package_config_file(cmake/pcgxConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/pcgxConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pcgx PATH_VARS PCGX_SHARE)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/pcgxConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/pcgxConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/pcgxConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pcgx)
