# CUDA: every .cu file under src/ is compiled by nvcc (sm_90 + PTX) as a standalone object when nvcc
# exists, so a kernel that does not compile fails the build even without a GPU. The CUDA bindings are
# linked only when LibTorch itself has CUDA (a GPU machine's PyTorch 2.x).
find_program(XTRAIN_NVCC nvcc PATHS /usr/local/cuda/bin)
set(XTRAIN_GLOBAL_DEFINES "")
if(TARGET torch_cuda OR TORCH_CUDA_LIBRARIES)
  set(XTRAIN_WITH_CUDA ON)
  list(APPEND XTRAIN_GLOBAL_DEFINES XTRAIN_WITH_CUDA=1)
else()
  set(XTRAIN_WITH_CUDA OFF)
endif()
