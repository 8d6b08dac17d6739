# Finds kforge's dependencies and states which optional parts are enabled.
# Debian: packages under /usr. GPU machines: Debian packages unpacked into a
# prefix (see scripts/gpu-deps.sh) plus PyTorch's LibTorch and NCCL.

find_package(Threads REQUIRED)
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_package(absl CONFIG REQUIRED)
find_package(prometheus-cpp CONFIG REQUIRED COMPONENTS core)
# Certificate checks and token digests (gRPC already links the same OpenSSL).
find_package(OpenSSL REQUIRED)

find_program(KFORGE_PROTOC protoc REQUIRED)
find_program(KFORGE_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)

# LibTorch: Debian's libtorch-dev, or the one inside the installed PyTorch.
if(KFORGE_TORCH_FROM_PYTHON)
  set(_kf_py "${KFORGE_PYTHON}")
  if(NOT _kf_py)
    find_program(_kf_py python3 REQUIRED)
  endif()
  execute_process(
    COMMAND "${_kf_py}" -c "import torch; print(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE _kf_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _kf_rc)
  if(NOT _kf_rc EQUAL 0)
    message(FATAL_ERROR "KFORGE_TORCH_FROM_PYTHON: '${_kf_py}' cannot import torch")
  endif()
  list(APPEND CMAKE_PREFIX_PATH "${_kf_torch_prefix}")
endif()
find_package(Torch REQUIRED)
# PyTorch's wheels carry parts of libstdc++ (std::filesystem among them)
# linked into libtorch and export them. Whatever precedes libtorch in a
# process's symbol lookup order decides which copy our calls run, and
# libtorch's copies of some functions jump to address 0 (seen on the GPU
# machine: remove_all in the verifier's sandbox cleanup and the learner's
# checkpoint pruning). Two things put libtorch first: a shared libstdc++
# named after it, and a compiler that links libstdc++ statically (the GPU
# image's /opt/gcc/bin/g++ does: its archive is searched last, after
# libtorch has satisfied those symbols). So every binary names the shared
# libstdc++.so.6, by path, first among its needed libraries.
# tests/unit/common/std_library_binding_test.cc checks the binding.
find_file(KFORGE_LIBSTDCXX libstdc++.so.6
  PATHS ${CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES} /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib
        /lib/x86_64-linux-gnu
  NO_DEFAULT_PATH)
if(NOT KFORGE_LIBSTDCXX)
  message(FATAL_ERROR "kforge: no shared libstdc++.so.6 found for ${CMAKE_CXX_COMPILER}; "
                      "set KFORGE_LIBSTDCXX to its path")
endif()
add_link_options("LINKER:--push-state,--no-as-needed" "${KFORGE_LIBSTDCXX}" "LINKER:--pop-state")
# Torch's config adds its flags globally through TORCH_CXX_FLAGS; keep them
# to the targets that link torch instead.
set(KFORGE_HAVE_CUDA OFF)
if(TORCH_CUDA_LIBRARIES OR CUDA_FOUND)
  set(KFORGE_HAVE_CUDA ON)
endif()

# NCCL: from PyTorch's nvidia-nccl package or the system.
set(KFORGE_HAVE_NCCL OFF)
if(KFORGE_ENABLE_NCCL AND KFORGE_HAVE_CUDA)
  set(_kf_nccl_hints "")
  if(_kf_py)
    execute_process(
      COMMAND "${_kf_py}" -c
        "import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) if nvidia.nccl.__file__ else list(nvidia.nccl.__path__)[0])"
      OUTPUT_VARIABLE _kf_nccl_root OUTPUT_STRIP_TRAILING_WHITESPACE
      RESULT_VARIABLE _kf_rc ERROR_QUIET)
    if(_kf_rc EQUAL 0)
      list(APPEND _kf_nccl_hints "${_kf_nccl_root}")
    endif()
  endif()
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_kf_nccl_hints} PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_kf_nccl_hints} PATH_SUFFIXES lib)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(KFORGE_HAVE_NCCL ON)
    add_library(kforge_nccl INTERFACE)
    target_include_directories(kforge_nccl INTERFACE ${NCCL_INCLUDE_DIR})
    target_link_libraries(kforge_nccl INTERFACE ${NCCL_LIBRARY})
  endif()
endif()

separate_arguments(KFORGE_TORCH_CXX_FLAGS UNIX_COMMAND "${TORCH_CXX_FLAGS}")
