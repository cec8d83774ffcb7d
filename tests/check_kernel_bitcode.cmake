# Checks kernel_lib.bc (run by CTest as `cmake -DNM=... -DBITCODE=... -DHEADER=... -DCXX=...
# -DINCLUDE=... -P this`): it defines every function declared in kernel/kernel_lib.h, has no
# global constructors, and needs nothing at link time beyond libm, since it is linked into every
# generated kernel module.
cmake_minimum_required(VERSION 3.20)
execute_process(COMMAND ${NM} ${BITCODE} OUTPUT_VARIABLE symbols RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} ${BITCODE} failed")
endif()

# The header declares most functions through a macro list (SSM_SCALAR_DISTRIBUTIONS): read it
# preprocessed.
execute_process(COMMAND ${CXX} -std=c++20 -E -P -I${INCLUDE} -I/usr/include ${HEADER}
                OUTPUT_VARIABLE header RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${CXX} -E ${HEADER} failed")
endif()
string(REGEX MATCHALL "double (ssm_[a-z0-9_]+)\\(" declared "${header}")
list(LENGTH declared n_declared)
if(n_declared LESS 20)
  message(FATAL_ERROR "found only ${n_declared} declarations in ${HEADER}")
endif()
foreach(decl IN LISTS declared)
  string(REGEX REPLACE "double (ssm_[a-z0-9_]+)\\(" "\\1" name "${decl}")
  if(NOT symbols MATCHES " T ${name}\n")
    message(FATAL_ERROR "kernel_lib.bc does not define ${name}")
  endif()
endforeach()

if(symbols MATCHES "_GLOBAL__sub_I|ios_base")
  message(FATAL_ERROR "kernel_lib.bc has a global constructor:\n${symbols}")
endif()

set(libm log log1p exp expm1 pow sin cos sincos tanh lgamma erf erfc)
string(REGEX MATCHALL " U [A-Za-z0-9_.]+" undefined "${symbols}")
foreach(u IN LISTS undefined)
  string(SUBSTRING "${u}" 3 -1 name)
  if(NOT name IN_LIST libm)
    message(FATAL_ERROR "kernel_lib.bc needs '${name}', which is not in libm")
  endif()
endforeach()
message(STATUS "kernel_lib.bc: ${n_declared} functions, no constructors, libm only")
