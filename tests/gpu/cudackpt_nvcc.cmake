# cudackpt_nvcc.cmake: builds the small CUDA programs of tests/gpu and
# tests/bench with nvcc when CMake finds it, and leaves them out (the GPU
# tests then skip) when it does not.  A custom command rather than
# enable_language(CUDA): the programs need exact nvcc flags only, not
# CMake's CUDA toolchain support (and older CMake releases do not know
# newer nvcc versions).
# Included by each directory that builds one (variables are per directory;
# check_language caches its result, so the search runs once).
include(CheckLanguage)
check_language(CUDA)

set(CUDACKPT_CUDA_ARCH "90" CACHE STRING
  "GPU architecture of the GPU test programs: sm_N code plus compute_N PTX")
set(CUDACKPT_NVCC "${CMAKE_CUDA_COMPILER}")
if(NOT CUDACKPT_NVCC AND CUDAToolkit_NVCC_EXECUTABLE)
  set(CUDACKPT_NVCC "${CUDAToolkit_NVCC_EXECUTABLE}")
endif()
get_property(_cudackpt_nvcc_said GLOBAL PROPERTY CUDACKPT_NVCC_SAID)
if(NOT _cudackpt_nvcc_said)
  set_property(GLOBAL PROPERTY CUDACKPT_NVCC_SAID TRUE)
  if(CUDACKPT_NVCC)
    message(STATUS "GPU test programs: built with ${CUDACKPT_NVCC} for sm_${CUDACKPT_CUDA_ARCH}")
  else()
    message(STATUS "GPU test programs: nvcc not found, not built (the GPU tests will skip)")
  endif()
endif()

# cudackpt_add_cuda_program(NAME SOURCE): builds ${CMAKE_CURRENT_BINARY_DIR}/NAME
# and a target NAME (part of ALL).  Does nothing without nvcc.
function(cudackpt_add_cuda_program name source)
  if(NOT CUDACKPT_NVCC)
    return()
  endif()
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${name})
  set(arch ${CUDACKPT_CUDA_ARCH})
  set(ccbin)
  if(CMAKE_CUDA_HOST_COMPILER)
    set(ccbin -ccbin ${CMAKE_CUDA_HOST_COMPILER})
  endif()
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CUDACKPT_NVCC} ${ccbin} -O2 -std=c++17
            -gencode arch=compute_${arch},code=sm_${arch}
            -gencode arch=compute_${arch},code=compute_${arch}
            -Xcompiler=-Wall,-Wextra -Werror=all-warnings
            -o ${out} ${CMAKE_CURRENT_SOURCE_DIR}/${source}
    DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${source}
    COMMENT "nvcc ${source} -> ${name}"
    VERBATIM)
  add_custom_target(${name} ALL DEPENDS ${out})
  set_property(TARGET ${name} PROPERTY CUDACKPT_OUTPUT ${out})
endfunction()
