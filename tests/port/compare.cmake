# SPDX-License-Identifier: BSD-3-Clause
# cmake -DPROGRAMS="a;b;c" [-DLAUNCH="mpiexec;-n;2"] -P compare.cmake
# Runs each program and fails unless all print exactly the same output: the
# original program, its port built passive and its port built active.
set(_first "")
set(_first_name "")
foreach(_p IN LISTS PROGRAMS)
  execute_process(COMMAND ${LAUNCH} ${_p} OUTPUT_VARIABLE _out RESULT_VARIABLE _rc ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "${_p} failed (${_rc}): ${_err}")
  endif()
  if(_first_name STREQUAL "")
    set(_first "${_out}")
    set(_first_name "${_p}")
    message("${_out}")
  elseif(NOT _out STREQUAL _first)
    message(FATAL_ERROR "outputs differ:\n${_first_name}:\n${_first}\n${_p}:\n${_out}")
  endif()
endforeach()
list(LENGTH PROGRAMS _n)
message("port_compare: ${_n} programs, identical output")
