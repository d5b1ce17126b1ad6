# CUDA: every .cu file under src/ is compiled by nvcc (sm_90 + PTX) as a standalone object when nvcc
# exists, so a kernel that does not compile fails the build even without a GPU (target
# xtrain_cuda_check, in ALL). The CUDA bindings (src/xtrain/<area>/**/cuda/*.cpp) and the kernels
# are built into their areas only when LibTorch itself has CUDA (a GPU machine's PyTorch 2.x):
# then the CUDA language is enabled here and xtrain_area() (src/CMakeLists.txt) adds them.
find_program(XTRAIN_NVCC nvcc PATHS /usr/local/cuda/bin)
set(XTRAIN_GLOBAL_DEFINES "")
if(TARGET torch_cuda OR TORCH_CUDA_LIBRARIES)
  set(XTRAIN_WITH_CUDA ON)
  list(APPEND XTRAIN_GLOBAL_DEFINES XTRAIN_WITH_CUDA=1)
else()
  set(XTRAIN_WITH_CUDA OFF)
endif()

if(XTRAIN_WITH_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90)  # H100/H200; override with -DCMAKE_CUDA_ARCHITECTURES=...
  endif()
  if(XTRAIN_NVCC AND NOT CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_COMPILER ${XTRAIN_NVCC})
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit REQUIRED)
elseif(XTRAIN_NVCC)
  # Compile check only: one object per .cu, with nvcc's dependency file so header edits rebuild it.
  file(GLOB_RECURSE xtrain_cu_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/*.cu)
  set(xtrain_cu_objects "")
  foreach(cu ${xtrain_cu_sources})
    file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR}/src ${cu})
    set(obj ${CMAKE_BINARY_DIR}/cuda_check/${rel}.o)
    get_filename_component(obj_dir ${obj} DIRECTORY)
    add_custom_command(
      OUTPUT ${obj}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${obj_dir}
      COMMAND ${XTRAIN_NVCC} -gencode "arch=compute_90,code=[sm_90,compute_90]" -std=c++17 -O3
              -I${PROJECT_SOURCE_DIR}/src -MD -MF ${obj}.d -c ${cu} -o ${obj}
      DEPENDS ${cu}
      DEPFILE ${obj}.d
      COMMENT "nvcc (compile check) ${rel}"
      VERBATIM)
    list(APPEND xtrain_cu_objects ${obj})
  endforeach()
  if(xtrain_cu_objects)
    add_custom_target(xtrain_cuda_check ALL DEPENDS ${xtrain_cu_objects})
  endif()
endif()
