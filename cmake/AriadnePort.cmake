# SPDX-License-Identifier: BSD-3-Clause
# ariadne_port_sources(TARGET <target> SOURCES <file.c>...
#                      [FUSED] [ACTIVE_TYPES <name>...] [SUFFIX <suffix>] [FLAGS <flag>...]
#                      [DEPENDS <file>...] [PORTED <function>...] [PORTED_FILE <file>])
#
# Runs ariadne-port at build time on the plain double SOURCES and compiles the
# ported files into <target>, so that a project keeps its double code as the
# one source of truth. The sources (headers may be among them) are ported in
# one run, as one code, parsed with the target's include directories and
# definitions, the sources' own directories and FLAGS.
# FUSED tapes each assignment as one statement (the fast build); SUFFIX is
# appended to the names the files define, so that the primal and the port
# can be linked into one program. A .c file that a source #includes (a unity
# build) is ported with it and written where the ported source's #include
# finds it; name such files in DEPENDS so that editing them ports again.
# PORTED names functions that another call ports (another target, another
# directory), PORTED_FILE a file of such names, one a line; a function no
# input defines and nothing names keeps its double declaration, and a call
# passing it active values is reported.
# The ported files are written under the build directory,
# ariadne_port/<target>/<port|port_fused><suffix>/, and that directory is put
# first on the target's include path: a driver includes a ported header with
# angle brackets (`#include <model.h>`), which finds it before the primal
# header even when the driver sits beside the primal sources.
# Installed with Ariadne's CMake package.
function(ariadne_port_sources)
  cmake_parse_arguments(ARG "FUSED" "TARGET;SUFFIX;PORTED_FILE" "SOURCES;ACTIVE_TYPES;FLAGS;DEPENDS;PORTED" ${ARGN})
  if(NOT ARG_TARGET OR NOT ARG_SOURCES)
    message(FATAL_ERROR "ariadne_port_sources: TARGET and SOURCES are required")
  endif()
  if(NOT TARGET Ariadne::port)
    message(FATAL_ERROR "ariadne_port_sources: Ariadne was built without ariadne-port (libclang was not found)")
  endif()
  set(_mode port)
  set(_opts "")
  if(ARG_FUSED)
    set(_mode port_fused)
    list(APPEND _opts --fused)
  endif()
  foreach(_t IN LISTS ARG_ACTIVE_TYPES)
    list(APPEND _opts --active-type ${_t})
  endforeach()
  if(ARG_SUFFIX)
    list(APPEND _opts --suffix ${ARG_SUFFIX})
  endif()
  set(_deps "")
  foreach(_f IN LISTS ARG_PORTED)
    list(APPEND _opts --ported ${_f})
  endforeach()
  if(ARG_PORTED_FILE)
    get_filename_component(_pf ${ARG_PORTED_FILE} ABSOLUTE)
    list(APPEND _opts --ported-file ${_pf})
    list(APPEND _deps ${_pf})
  endif()
  set(_outdir ${CMAKE_CURRENT_BINARY_DIR}/ariadne_port/${ARG_TARGET}/${_mode}${ARG_SUFFIX})
  # The target's include directories, less the output directory (put first
  # on them below): the tool parses the primal sources, never a port.
  string(REGEX REPLACE "([][+.*()^$?|\\])" "\\\\\\1" _outre "${_outdir}")
  set(_inc "$<FILTER:$<TARGET_PROPERTY:${ARG_TARGET},INCLUDE_DIRECTORIES>,EXCLUDE,^${_outre}$>")
  set(_def "$<TARGET_PROPERTY:${ARG_TARGET},COMPILE_DEFINITIONS>")
  set(_outs "")
  set(_dirs "")
  set(_abss "")
  foreach(_src IN LISTS ARG_SOURCES)
    get_filename_component(_abs ${_src} ABSOLUTE)
    get_filename_component(_name ${_src} NAME)
    get_filename_component(_dir ${_abs} DIRECTORY)
    list(APPEND _dirs ${_dir})
    list(APPEND _abss ${_abs})
    list(APPEND _outs ${_outdir}/${_name})
  endforeach()
  # One run for all the sources: they are ported as one code, so calls
  # between them pass ad_real and they agree on the type of MPI requests.
  set(_idirs "")
  foreach(_dir IN LISTS _dirs)
    list(APPEND _idirs -I${_dir})
  endforeach()
  list(REMOVE_DUPLICATES _idirs)
  add_custom_command(OUTPUT ${_outs}
    COMMAND Ariadne::port ${_opts} -o ${_outdir} ${_abss} --
            ${_idirs} "$<$<BOOL:${_inc}>:-I$<JOIN:${_inc},;-I>>" "$<$<BOOL:${_def}>:-D$<JOIN:${_def},;-D>>"
            ${ARG_FLAGS}
    DEPENDS ${_abss} ${ARG_DEPENDS} ${_deps} Ariadne::port
    COMMENT "ariadne-port ${_mode}: ${ARG_SOURCES}"
    COMMAND_EXPAND_LISTS VERBATIM)
  list(REMOVE_DUPLICATES _dirs)
  target_sources(${ARG_TARGET} PRIVATE ${_outs})
  # The ported files include their neighbours' headers as the originals do.
  # The output directory comes first on the include path, so that a driver's
  # `#include <model.h>` finds the ported header, not the primal one. (A
  # quoted include looks in the including file's own directory before any
  # include path: a driver beside the primal header that writes
  # `#include "model.h"` gets the primal one.)
  target_include_directories(${ARG_TARGET} BEFORE PRIVATE ${_outdir})
  target_include_directories(${ARG_TARGET} PRIVATE ${_dirs})
endfunction()
