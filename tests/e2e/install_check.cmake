# `cmake --install` check (ctest test `install`): installs the build tree to a temporary prefix,
# moves the prefix elsewhere (so no absolute path recorded at build or install time can be what
# makes it work), then builds an example with the installed ssmc and runs the executable.
# Usage: cmake -DBUILD_DIR=<build> -DWORK_DIR=<scratch> -DEXAMPLE=<examples/sv.ssm>
#              -DLIBRARIES=<the runtime's libraries, comma-separated> -P this
foreach(var BUILD_DIR WORK_DIR EXAMPLE LIBRARIES)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "install_check.cmake: ${var} is not set")
  endif()
endforeach()

function(run_checked what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n$ ${ARGN}\n${out}\n${err}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
set(moved ${WORK_DIR}/moved-prefix)

run_checked("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
file(RENAME ${prefix} ${moved})
set(installed bin/ssmc lib/ssmc/kernel_lib.bc)
string(REPLACE "," ";" LIBRARIES "${LIBRARIES}")
foreach(lib ${LIBRARIES})
  list(APPEND installed lib/ssmc/lib${lib}.a)
endforeach()
foreach(f ${installed})
  if(NOT EXISTS ${moved}/${f})
    message(FATAL_ERROR "the installed tree lacks ${f}")
  endif()
endforeach()

run_checked("building ${EXAMPLE} with the installed ssmc"
            ${moved}/bin/ssmc build ${EXAMPLE} -o ${WORK_DIR}/sv)
run_checked("the executable built by the installed ssmc" ${WORK_DIR}/sv simulate --T 5 --seed 1)
string(REGEX MATCHALL "[^\n]+" lines "${run_output}")
list(LENGTH lines n)
list(GET lines 0 header)
if(NOT n EQUAL 6 OR NOT header STREQUAL "t,x,y")
  message(FATAL_ERROR "unexpected output of 'sv simulate --T 5':\n${run_output}")
endif()
message(STATUS "installed ssmc (moved to ${moved}) built a working sv")
file(REMOVE_RECURSE ${WORK_DIR})
