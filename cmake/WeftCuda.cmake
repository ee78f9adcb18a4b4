# CUDA support: the kernels of kernels/cuda and the runtime layer of
# src/cuda, when WEFT_WITH_CUDA is on and nvcc is found. Without either,
# src/cuda/runtime_off.cc stands in and everything else builds as before.
#
# The runtime is linked statically (CUDA::cudart_static, its symbols kept
# local): libweft.so needs no libcudart.so and loads on machines without the
# toolkit or a driver, where cudaState() reports "no CUDA device".
#
# Included from the top-level CMakeLists.txt after the kernels layer; adds
# the layers weft_cuda_kernels (with CUDA) and weft_cuda, and defines
# weft_link_cuda(target) for the libraries that take every layer's objects.

option(WEFT_WITH_CUDA "Build the CUDA kernels and stream-ordered collectives when nvcc is found" ON)
set(WEFT_CUDA_ARCHS "80-real;90" CACHE STRING
  "CMAKE_CUDA_ARCHITECTURES for weft's kernels (default: sm_80 and sm_90 code, compute_90 PTX)")

set(WEFT_CUDA OFF)
if(WEFT_WITH_CUDA)
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES ${WEFT_CUDA_ARCHS})
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(WEFT_CUDA ON)
    message(STATUS "CUDA: ${CMAKE_CUDA_COMPILER} (${CMAKE_CUDA_COMPILER_VERSION}), "
      "architectures ${CMAKE_CUDA_ARCHITECTURES}")
  else()
    message(STATUS "CUDA: nvcc not found, building without CUDA")
  endif()
endif()

if(WEFT_CUDA)
  add_subdirectory(${PROJECT_SOURCE_DIR}/kernels/cuda ${PROJECT_BINARY_DIR}/kernels/cuda)
  weft_layer(weft_cuda src/cuda/mem_rules.cc src/cuda/runtime.cc src/cuda/stream_*.cc src/cuda/pieces.cc
    src/cuda/device_local_work.cc src/cuda/local_work_choice.cc src/cuda/device_path.cc
    src/cuda/device_setup.cc)
  target_include_directories(weft_cuda SYSTEM PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(weft_cuda PUBLIC CUDA::cudart_static)
else()
  weft_layer(weft_cuda src/cuda/mem_rules.cc src/cuda/runtime_off.cc src/cuda/stream_*.cc src/cuda/pieces.cc
    src/cuda/device_local_work_off.cc src/cuda/local_work_choice.cc src/cuda/device_path.cc
    src/cuda/device_setup.cc)
endif()

function(weft_link_cuda target)
  if(WEFT_CUDA)
    target_link_libraries(${target} PRIVATE CUDA::cudart_static)
    target_link_options(${target} PRIVATE -Wl,--exclude-libs,libcudart_static.a)
  endif()
endfunction()
