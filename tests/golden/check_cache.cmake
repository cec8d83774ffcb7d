# The compile cache: an unchanged model is served from the cache, byte-identical; a changed source
# misses; --no-cache and SSMC_CACHE=0 compile anyway.
set(cache ${WORK}/cache-test)
file(REMOVE_RECURSE ${cache})
file(MAKE_DIRECTORY ${cache})
file(READ ${SOURCE}/examples/sv.ssm model)
file(WRITE ${cache}/m.ssm "${model}")

# build(OUTPUT EXPECT_HIT [ENV VAR=VALUE...] [FLAGS flag...])
function(build out expect_hit)
  cmake_parse_arguments(B "" "" "ENV;FLAGS" ${ARGN})
  execute_process(COMMAND ${CMAKE_COMMAND} -E env SSMC_CACHE_DIR=${cache}/entries ${B_ENV}
                          ${SSMC} build ${cache}/m.ssm -o ${cache}/${out} --time-passes ${B_FLAGS}
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "build ${out} failed: ${err}")
  endif()
  string(FIND "${err}" "cache hit" hit)
  if(expect_hit AND hit EQUAL -1)
    message(FATAL_ERROR "build ${out}: expected a cache hit\n${err}")
  elseif(NOT expect_hit AND NOT hit EQUAL -1)
    message(FATAL_ERROR "build ${out}: expected a cache miss\n${err}")
  endif()
  set(err "${err}" PARENT_SCOPE)
endfunction()

build(first FALSE)
build(second TRUE)
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${cache}/first ${cache}/second
                RESULT_VARIABLE differ)
if(differ)
  message(FATAL_ERROR "the cached executable differs from the compiled one")
endif()
build(flag FALSE FLAGS --no-cache)
build(env FALSE ENV SSMC_CACHE=0)
build(other-pipeline FALSE FLAGS --passes=cse)

file(APPEND ${cache}/m.ssm "// an edit\n")
build(edited FALSE)
build(edited-again TRUE)

# A cache hit prints the warnings of the compilation it replaces.
string(REPLACE "model sv {" "model sv {\n  param unused_one = 1;" warned "${model}")
file(WRITE ${cache}/m.ssm "${warned}")
build(warned FALSE)
set(first_err "${err}")
build(warned-again TRUE)
foreach(run first_err err)
  string(FIND "${${run}}" "parameter 'unused_one' is never used" found)
  if(found EQUAL -1)
    message(FATAL_ERROR "expected the unused-parameter warning (${run}):\n${${run}}")
  endif()
endforeach()

# A module imported through another module is part of the key: editing it misses.
file(WRITE ${cache}/m.ssm "model m {
  import \"outer\";
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ normal(step(x[t-1]), 1);
  y[t] ~ normal(x[t], 1);
}
")
file(WRITE ${cache}/outer.ssm "module outer {\n  import \"inner\";\n  fn step(x : real) -> real = inner_step(x);\n}\n")
file(WRITE ${cache}/inner.ssm "module inner {\n  fn inner_step(x : real) -> real = 0.9 * x;\n}\n")
build(imports FALSE)
build(imports-again TRUE)
file(WRITE ${cache}/inner.ssm "module inner {\n  fn inner_step(x : real) -> real = 0.8 * x;\n}\n")
build(inner-edited FALSE)
build(inner-edited-again TRUE)

# The size cap (SSMC_CACHE_SIZE): a store past it evicts the least recently used entries, and a
# hit counts as a use. Three variants of one model; the cap holds two of them.
set(lru ${cache}/lru)
function(lru_build name expect_hit)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env SSMC_CACHE_DIR=${lru} SSMC_CACHE_SIZE=${cap}
                          ${SSMC} build ${cache}/${name}.ssm -o ${cache}/${name} --time-passes
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  string(FIND "${err}" "cache hit" hit)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "build ${name} failed: ${err}")
  elseif(expect_hit AND hit EQUAL -1)
    message(FATAL_ERROR "build ${name}: expected a cache hit\n${err}")
  elseif(NOT expect_hit AND NOT hit EQUAL -1)
    message(FATAL_ERROR "build ${name}: expected a cache miss (evicted)\n${err}")
  endif()
endfunction()
foreach(name a b c)
  string(REPLACE "model sv {" "model sv {\n  param unused_${name} = 1;" variant "${model}")
  file(WRITE ${cache}/${name}.ssm "${variant}")
endforeach()
set(cap 0)
lru_build(a FALSE)
file(GLOB first_entry ${lru}/*)
list(FILTER first_entry EXCLUDE REGEX "\\.messages$")
file(SIZE ${first_entry} entry_size)
math(EXPR cap "${entry_size} * 5 / 2")
lru_build(b FALSE)
lru_build(a TRUE)  # a is now the more recently used
lru_build(c FALSE) # over the cap: b goes
lru_build(a TRUE)
lru_build(c TRUE)
lru_build(b FALSE) # over the cap again: a, used before c, goes
lru_build(c TRUE)
lru_build(a FALSE)

# ssmc cache reports the entries (two fit under the cap) and --clear removes them.
function(cache_info expect)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env SSMC_CACHE_DIR=${lru} SSMC_CACHE_SIZE=${cap}
                          ${SSMC} cache ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "${expect}")
    message(FATAL_ERROR "ssmc cache ${ARGN}: expected '${expect}' (status ${rc})\n${out}${err}")
  endif()
endfunction()
cache_info("directory  ${lru}\nentries    2\n")
cache_info("removed 2 entries.*entries    0\nsize       0 bytes\n" --clear)
lru_build(c FALSE)

# A size that is not one is an error naming the variable, not a silent default.
execute_process(COMMAND ${CMAKE_COMMAND} -E env SSMC_CACHE_DIR=${lru} SSMC_CACHE_SIZE=5gigs
                        ${SSMC} build ${cache}/a.ssm -o ${cache}/bad-size
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 1 OR NOT err MATCHES "SSMC_CACHE_SIZE is '5gigs'")
  message(FATAL_ERROR "expected status 1 and the SSMC_CACHE_SIZE error, got ${rc}:\n${err}")
endif()
