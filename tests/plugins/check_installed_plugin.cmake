# A plugin built against an installed ssmc (ctest test plugins/installed), as docs/passes.md tells
# plugin authors to: `cmake --install` to a prefix, configure examples/plugins/dependency-graph on
# its own with CMAKE_PREFIX_PATH=prefix (find_package(ssmc), target ssmc::plugin), build it, and
# load it into the installed ssmc.
# Usage: cmake -DBUILD_DIR=<build> -DSOURCE=<repo> -DWORK_DIR=<scratch> -DGENERATOR=<generator>
#              -DCXX=<compiler> -P check_installed_plugin.cmake
function(run_checked what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n$ ${ARGN}\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run_checked("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(f include/ssmc/passes/plugin.h include/ssmc/passes/pass.h include/ssmc/ir/ir.h
          lib/cmake/ssmc/ssmcConfig.cmake)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "the installed tree lacks ${f}")
  endif()
endforeach()
run_checked("configuring the plugin against the installed ssmc"
            ${CMAKE_COMMAND} -S ${SOURCE}/examples/plugins/dependency-graph -B ${WORK_DIR}/plugin
            -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Release
            -DCMAKE_PREFIX_PATH=${prefix})
run_checked("building the plugin" ${CMAKE_COMMAND} --build ${WORK_DIR}/plugin)
run_checked("the installed ssmc with the plugin"
            ${CMAKE_COMMAND} -E env SSMC_CACHE=0
            ${prefix}/bin/ssmc check ${SOURCE}/examples/sv.ssm
            --load-pass=${WORK_DIR}/plugin/libdependency-graph.so --passes=dependency-graph)
if(NOT out MATCHES "^digraph \"sv\" {\n")
  message(FATAL_ERROR "the plugin built against the installed ssmc did not run:\n${out}")
endif()
file(REMOVE_RECURSE ${WORK_DIR})
