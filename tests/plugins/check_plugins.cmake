# Pass plugins beyond their golden output (ctest test plugins/cache-and-symbols):
# - ssmc exports the ssm:: symbols plugins call (and not the LLVM it links statically), and the
#   example plugin leaves them undefined, to be resolved against ssmc when it is loaded;
# - the compile cache: a build with a plugin is cached, and a plugin whose contents change while its
#   size and modification time do not misses; a pipeline with a pass that prints is never cached;
# - dependency-graph writes to $SSMC_DEPENDENCY_GRAPH, and runs under `ssmc check --passes=`;
# - `ssmc passes --load-pass=` lists the plugins' passes.
# Usage: cmake -DSSMC=... -DSOURCE=<repo> -DWORK=<scratch> -DNM=llvm-nm -DDEPENDENCY_GRAPH=<.so>
#              -DSQUARE_TO_MUL=<.so> -P check_plugins.cmake
set(work ${WORK}/plugin-test)
file(REMOVE_RECURSE ${work})
file(MAKE_DIRECTORY ${work})

function(run_checked)
  cmake_parse_arguments(R "" "" "ENV;COMMAND" ${ARGN})
  execute_process(COMMAND ${CMAKE_COMMAND} -E env SSMC_CACHE_DIR=${work}/cache ${R_ENV} ${R_COMMAND}
                  WORKING_DIRECTORY ${SOURCE} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${R_COMMAND}\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)
endfunction()

# --- symbols
run_checked(COMMAND ${NM} --dynamic --defined-only --demangle ${SSMC})
set(exported "${out}")
# (Names only: functions returning std::string carry an [abi:cxx11] tag.)
foreach(symbol "ssm::passes::register_pass(" "ssm::passes::create_pass("
               "ssm::passes::registered_passes" "ssm::ir::print[" "ssm::ir::print_relation_target"
               "ssm::ir::verify" "ssm::ir::result_shape(" "ssm::ir::compact("
               "ssm::ir::replace_and_compact(" "ssm::ir::evaluate(" "ssm::ir::dist_info("
               "ssm::ir::block_name(" "ssm::ir::Model::var_name" "ssm::ir::Shape::str"
               "typeinfo for ssm::passes::Pass")
  string(FIND "${exported}" "${symbol}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "ssmc does not export ${symbol}, which plugins may call")
  endif()
endforeach()
if(exported MATCHES "[0-9a-f]+ [A-Za-z] llvm::")
  message(FATAL_ERROR "ssmc exports LLVM symbols to plugins")
endif()
run_checked(COMMAND ${NM} --dynamic --demangle ${DEPENDENCY_GRAPH})
if(NOT out MATCHES " U ssm::passes::register_pass\\(" OR
   NOT out MATCHES " U ssm::ir::print_relation_target")
  message(FATAL_ERROR
          "the example plugin does not take register_pass and the printer from ssmc:\n${out}")
endif()
if(NOT out MATCHES " T ssmc_register_passes\n" OR NOT out MATCHES " R ssmc_plugin_abi\n")
  message(FATAL_ERROR "the example plugin does not export its entry point:\n${out}")
endif()

# --- `ssmc passes` lists the plugins' passes with the built-in ones
run_checked(COMMAND ${SSMC} passes --load-pass=${DEPENDENCY_GRAPH} --load-pass=${SQUARE_TO_MUL})
if(NOT out MATCHES "\ncse  .*\ndependency-graph  .*\nsquare-to-mul  ")
  message(FATAL_ERROR "ssmc passes does not list the plugins' passes:\n${out}")
endif()

# --- the compile cache
file(COPY_FILE ${SQUARE_TO_MUL} ${work}/plugin.so)
file(COPY_FILE ${SQUARE_TO_MUL} ${work}/reference.so) # keeps the modification time for touch -r
function(build_gordon out expect_hit)
  run_checked(COMMAND ${SSMC} build examples/gordon.ssm -o ${work}/${out} --time-passes
                      --load-pass=${work}/plugin.so --passes=constant-fold,square-to-mul,cse)
  string(FIND "${err}" "cache hit" hit)
  if(expect_hit AND hit EQUAL -1)
    message(FATAL_ERROR "build ${out}: expected a cache hit\n${err}")
  elseif(NOT expect_hit AND NOT hit EQUAL -1)
    message(FATAL_ERROR "build ${out}: expected a cache miss\n${err}")
  endif()
endfunction()
build_gordon(first FALSE)
build_gordon(second TRUE)
run_checked(COMMAND ${work}/second simulate --T 3 --seed 1)
# One byte of the plugin's .comment section (the compiler's name, not loaded) changes; the size
# and the modification time stay.
file(READ ${work}/plugin.so hex HEX)
string(FIND "${hex}" "4743433a" at) # "GCC:"
if(at EQUAL -1)
  message(FATAL_ERROR "no .comment string found in the plugin")
endif()
math(EXPR offset "${at} / 2")
run_checked(COMMAND sh -c "printf X | dd of='${work}/plugin.so' bs=1 seek=${offset} \
conv=notrunc status=none && touch -r '${work}/reference.so' '${work}/plugin.so'")
build_gordon(edited FALSE)
build_gordon(edited-again TRUE)

# A pass that prints runs on every build: no cache.
foreach(i 1 2)
  run_checked(COMMAND ${SSMC} build examples/sv.ssm -o ${work}/sv --time-passes
                      --load-pass=${DEPENDENCY_GRAPH} --passes=constant-fold,cse,dependency-graph)
  if(NOT out MATCHES "^digraph \"sv\" {\n" OR err MATCHES "cache hit")
    message(FATAL_ERROR "build ${i} with dependency-graph: no graph printed\n${out}\n${err}")
  endif()
endforeach()

# --- dependency-graph to a file, and under `ssmc check`
run_checked(ENV SSMC_DEPENDENCY_GRAPH=${work}/nile.dot
            COMMAND ${SSMC} build examples/nile.ssm --load-pass=${DEPENDENCY_GRAPH}
                    --passes=dependency-graph --emit=ir -o /dev/null)
file(READ ${work}/nile.dot dot)
set(edge "\"transition:level\\[t-1\\]\" -> \"transition:level\\[t\\]\";")
if(NOT dot MATCHES "^digraph \"nile\" {\n.*${edge}\n.*}\n$")
  message(FATAL_ERROR "unexpected graph in $SSMC_DEPENDENCY_GRAPH:\n${dot}")
endif()
if(NOT out STREQUAL "")
  message(FATAL_ERROR "the graph went to standard output too:\n${out}")
endif()
run_checked(COMMAND ${SSMC} check examples/nile.ssm --load-pass=${DEPENDENCY_GRAPH}
                    --passes=constant-fold,dependency-graph)
if(NOT out MATCHES "^digraph \"nile\" {\n.*\nexamples/nile.ssm: no errors\n")
  message(FATAL_ERROR "unexpected output of ssmc check with the plugin:\n${out}")
endif()
file(REMOVE_RECURSE ${work})
