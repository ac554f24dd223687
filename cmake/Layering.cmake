# Layer bookkeeping: one static library per layer under src/<layer>/, and a
# build-time check that no file includes a header of a layer its own layer
# does not depend on (cmake/check_layering.cmake).

set(TALARIA_LAYERING_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/check_layering.cmake)

# talaria_define_layers(SPEC...): each SPEC is `name` or `name=dep+dep`,
# lowest layer first (see check_layering.cmake). The joined spec is kept in
# TALARIA_LAYER_SPEC for the layer check's own tests.
function(talaria_define_layers)
  string(REPLACE ";" "|" _spec "${ARGN}")
  set(TALARIA_LAYER_SPEC "${_spec}" CACHE INTERNAL "Talaria layers and their dependencies, lowest first")
  file(GLOB_RECURSE _sources CONFIGURE_DEPENDS
       ${CMAKE_SOURCE_DIR}/src/*.h ${CMAKE_SOURCE_DIR}/src/*.cc
       ${CMAKE_SOURCE_DIR}/apps/*.h ${CMAKE_SOURCE_DIR}/apps/*.cc)
  set(_stamp ${CMAKE_BINARY_DIR}/layering.stamp)
  add_custom_command(
    OUTPUT ${_stamp}
    COMMAND ${CMAKE_COMMAND} -DROOT=${CMAKE_SOURCE_DIR} "-DLAYERS=${_spec}"
            -DSTAMP=${_stamp} -P ${TALARIA_LAYERING_SCRIPT}
    DEPENDS ${_sources} ${TALARIA_LAYERING_SCRIPT}
    COMMENT "Checking layer dependencies"
    VERBATIM)
  add_custom_target(talaria_layering_check DEPENDS ${_stamp})
endfunction()

# talaria_layer(NAME SOURCES ... DEPS ...): the library talaria_<NAME>.
function(talaria_layer name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(talaria_${name} STATIC ${ARG_SOURCES})
  target_include_directories(talaria_${name} PUBLIC ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(talaria_${name} PUBLIC ${ARG_DEPS})
  add_dependencies(talaria_${name} talaria_layering_check)
endfunction()
