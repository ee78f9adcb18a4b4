# Which nccl.h the NCCL shim implements: WEFT_NCCL_INCLUDE_DIR when set, else
# the newest of the toolkit's (CUDA_HOME, CUDA_PATH, /usr/local/cuda) and the
# one of PyPI's nvidia-nccl wheel in Python3_EXECUTABLE's environment (the
# NCCL that PyTorch ships and loads). The shim tracks the newest ABI it can
# see, so that a framework built against it finds every symbol it imports.
#
# Sets WEFT_NCCL_INCLUDE_DIR (nccl.h), WEFT_NCCL_CUDA_INCLUDE_DIR
# (cuda_runtime.h, which nccl.h includes: beside it, or the toolkit's, or
# the wheel's nvidia/cu13) and WEFT_NCCL_VERSION_CODE.

function(weft_nccl_version_of dir out)
  set(code 0)
  if(EXISTS ${dir}/nccl.h)
    file(STRINGS ${dir}/nccl.h line REGEX "^#define NCCL_VERSION_CODE ")
    string(REGEX REPLACE "^#define NCCL_VERSION_CODE +([0-9]+).*" "\\1" code "${line}")
  endif()
  set(${out} "${code}" PARENT_SCOPE)
endfunction()

set(_weft_nccl_candidates "")
foreach(_root $ENV{CUDA_HOME} $ENV{CUDA_PATH} /usr/local/cuda)
  list(APPEND _weft_nccl_candidates ${_root}/include)
endforeach()
set(_weft_wheel_cuda "")
set(_weft_py ${Python3_EXECUTABLE})
if(NOT _weft_py AND Python_EXECUTABLE)
  set(_weft_py ${Python_EXECUTABLE})  # scikit-build-core's name for it
endif()
if(_weft_py)
  # Without pip's build-isolation overlay (as python/CMakeLists.txt asks
  # for torch): the environment weft is installed into.
  execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=PYTHONPATH --unset=PYTHONNOUSERSITE
    ${_weft_py} -c
    "import importlib.util as u, os
for name, sub in (('nvidia.nccl', 'include'), ('nvidia.cu13', 'include')):
    s = u.find_spec(name)
    print(os.path.join(list(s.submodule_search_locations)[0], sub) if s else '')"
    OUTPUT_VARIABLE _weft_wheel_dirs ERROR_QUIET RESULT_VARIABLE _weft_rc
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_weft_rc EQUAL 0)
    string(REPLACE "\n" ";" _weft_wheel_dirs "${_weft_wheel_dirs}")
    list(LENGTH _weft_wheel_dirs _n)
    if(_n EQUAL 2)
      list(GET _weft_wheel_dirs 0 _weft_wheel_nccl)
      list(GET _weft_wheel_dirs 1 _weft_wheel_cuda)
      if(_weft_wheel_nccl)
        list(APPEND _weft_nccl_candidates ${_weft_wheel_nccl})
      endif()
    endif()
  endif()
endif()

if(NOT WEFT_NCCL_INCLUDE_DIR)
  set(_best "")
  set(_best_code 0)
  foreach(_dir ${_weft_nccl_candidates})
    weft_nccl_version_of(${_dir} _code)
    if(_code GREATER _best_code)
      set(_best ${_dir})
      set(_best_code ${_code})
    endif()
  endforeach()
  if(_best)
    set(WEFT_NCCL_INCLUDE_DIR ${_best} CACHE PATH "nccl.h the NCCL shim implements" FORCE)
  endif()
endif()

if(WEFT_NCCL_INCLUDE_DIR)
  weft_nccl_version_of(${WEFT_NCCL_INCLUDE_DIR} WEFT_NCCL_VERSION_CODE)
  set(WEFT_NCCL_CUDA_INCLUDE_DIR "")
  foreach(_dir ${WEFT_NCCL_INCLUDE_DIR} $ENV{CUDA_HOME}/include $ENV{CUDA_PATH}/include
      /usr/local/cuda/include ${_weft_wheel_cuda})
    if(NOT WEFT_NCCL_CUDA_INCLUDE_DIR AND EXISTS ${_dir}/cuda_runtime.h)
      set(WEFT_NCCL_CUDA_INCLUDE_DIR ${_dir})
    endif()
  endforeach()
endif()
