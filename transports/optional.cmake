# Transports that need a library (UCX, rdma-core): built only when it is
# found. Included twice by the top-level CMakeLists.txt:
#   before the layers: finds the libraries and defines WEFT_HAVE_UCX /
#     WEFT_HAVE_IBVERBS for every target;
#   weft_optional_transports() after weft_transports exists: drops the
#     sources of what is missing and links what is found.
# In transports/ibverbs/, the files that include the verbs header are named
# ibverbs_*.cc (the transport, its peer, its device, the verbs half of gdr);
# the others (parsers, state machines, credit accounting) always build, so
# their unit tests run everywhere.
option(WEFT_WITH_UCX "Build the ucx transport when UCX is found" ON)
option(WEFT_WITH_IBVERBS "Build the ibverbs transport when rdma-core is found" ON)

set(WEFT_OPTIONAL_LIBS "")
find_package(PkgConfig QUIET)
if(WEFT_WITH_UCX AND PkgConfig_FOUND)
  pkg_check_modules(UCX QUIET IMPORTED_TARGET ucx)
endif()
if(UCX_FOUND)
  message(STATUS "ucx transport: UCX ${UCX_VERSION}")
  add_compile_definitions(WEFT_HAVE_UCX=1)
  list(APPEND WEFT_OPTIONAL_LIBS PkgConfig::UCX)
else()
  message(STATUS "ucx transport skipped: UCX not found (apt install libucx-dev)")
endif()

if(WEFT_WITH_IBVERBS)
  find_path(IBVERBS_INCLUDE_DIR infiniband/verbs.h)
  find_library(IBVERBS_LIBRARY ibverbs)
endif()
if(IBVERBS_INCLUDE_DIR AND IBVERBS_LIBRARY)
  message(STATUS "ibverbs transport: ${IBVERBS_LIBRARY}")
  add_compile_definitions(WEFT_HAVE_IBVERBS=1)
  list(APPEND WEFT_OPTIONAL_LIBS ${IBVERBS_LIBRARY})
  set(WEFT_IBVERBS_FOUND ON)
else()
  message(STATUS "ibverbs transport skipped: rdma-core not found (apt install libibverbs-dev)")
endif()

function(weft_optional_transports)
  get_target_property(srcs weft_transports SOURCES)
  if(NOT UCX_FOUND)
    list(FILTER srcs EXCLUDE REGEX "/transports/ucx/")
  endif()
  if(NOT WEFT_IBVERBS_FOUND)
    list(FILTER srcs EXCLUDE REGEX "/transports/ibverbs/ibverbs_[^/]*\\.cc$")
  endif()
  set_target_properties(weft_transports PROPERTIES SOURCES "${srcs}")
  if(WEFT_OPTIONAL_LIBS)
    target_link_libraries(weft_transports PUBLIC ${WEFT_OPTIONAL_LIBS})
  endif()
endfunction()
