# CMake package of an installed ssmc, for building pass plugins (docs/passes.md):
#   find_package(ssmc REQUIRED)
#   add_library(my_pass MODULE my_pass.cpp)
#   target_link_libraries(my_pass PRIVATE ssmc::plugin)
# Defines the target ssmc::plugin (the plugin headers, C++20) and SSMC_EXECUTABLE (bin/ssmc).
include(${CMAKE_CURRENT_LIST_DIR}/ssmcTargets.cmake)
get_filename_component(SSMC_PREFIX "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
set(SSMC_EXECUTABLE ${SSMC_PREFIX}/bin/ssmc)
