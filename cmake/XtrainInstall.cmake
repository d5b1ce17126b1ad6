# `cmake --install build --prefix P`: xtrain as a library for other CMake projects (examples/).
#   P/include/xtrain/<area>/*.h       the public headers, with the include paths of the tree
#   P/lib/libxtrain_<area>.a           every area's static library (and xtrain_pch's)
#   P/bin/xtrain                       the program; it exports its symbols, so plugins resolve from it
#   P/lib/cmake/xtrain/                xtrainConfig.cmake, its version file and the exported targets
# find_package(xtrain) then gives:
#   xtrain::xtrain      every area and its link dependencies (LibTorch, gloo, dnnl, liburing, onnx ...)
#   xtrain::plugin_api  headers and LibTorch's flags only: for a --plugin shared library, whose xtrain
#                       symbols come from the running `xtrain` program (one registry, not a copy per .so)
#   xtrain::exe         the installed program (also in ${XTRAIN_EXECUTABLE})
# Included from the top CMakeLists.txt after src/.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(XTRAIN_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/xtrain)

# All areas as one target.
add_library(xtrain_library INTERFACE)
foreach(area ${XTRAIN_AREAS})
  target_link_libraries(xtrain_library INTERFACE xtrain_${area})
  set_target_properties(xtrain_${area} PROPERTIES EXPORT_NAME ${area})
endforeach()
set_target_properties(xtrain_library PROPERTIES EXPORT_NAME xtrain)
set_target_properties(xtrain_pch PROPERTIES EXPORT_NAME pch)
add_library(xtrain::xtrain ALIAS xtrain_library)

# Plugins: no xtrain library (the program provides every xtrain symbol), the same headers and flags.
add_library(xtrain_plugin_api INTERFACE)
target_include_directories(xtrain_plugin_api INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/src>
                                                       $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_link_libraries(xtrain_plugin_api INTERFACE torch nlohmann_json::nlohmann_json Threads::Threads)
target_compile_definitions(xtrain_plugin_api INTERFACE USE_C10D_GLOO ${XTRAIN_GLOBAL_DEFINES})
set_target_properties(xtrain_plugin_api PROPERTIES EXPORT_NAME plugin_api)
add_library(xtrain::plugin_api ALIAS xtrain_plugin_api)

set_target_properties(xtrain PROPERTIES EXPORT_NAME exe)

list(TRANSFORM XTRAIN_AREAS PREPEND xtrain_ OUTPUT_VARIABLE _xtrain_area_targets)
install(TARGETS xtrain_pch ${_xtrain_area_targets} xtrain_library xtrain_plugin_api xtrain
        EXPORT xtrainTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# SentencePiece's shim (src/spm_shim), which data/tokenizer dlopen()s from <bin>/../<libdir>.
install(TARGETS xtrain_spm LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/src/xtrain DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(EXPORT xtrainTargets NAMESPACE xtrain:: DESTINATION ${XTRAIN_INSTALL_CMAKEDIR})

# What xtrainConfig.cmake must find again for the exported link interfaces.
set(XTRAIN_WITH_CUDA_FOR_CONFIG ${XTRAIN_WITH_CUDA})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/xtrainConfig.cmake.in
  ${CMAKE_BINARY_DIR}/xtrainConfig.cmake INSTALL_DESTINATION ${XTRAIN_INSTALL_CMAKEDIR}
  PATH_VARS CMAKE_INSTALL_BINDIR)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/xtrainConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/xtrainConfig.cmake ${CMAKE_BINARY_DIR}/xtrainConfigVersion.cmake
        DESTINATION ${XTRAIN_INSTALL_CMAKEDIR})

# The Python package (src/xtrain/python): P/lib/python3/dist-packages/xtrain, so
# `PYTHONPATH=P/lib/python3/dist-packages /usr/bin/python3 -c "import xtrain"` works (for P=/usr,
# Debian's python3 looks there without PYTHONPATH).
set(XTRAIN_PYTHON_INSTALL_DIR lib/python3/dist-packages CACHE STRING "Where cmake --install puts the xtrain package")
install(TARGETS xtrain_python LIBRARY DESTINATION ${XTRAIN_PYTHON_INSTALL_DIR}/xtrain)
install(FILES ${XTRAIN_PYTHON_PACKAGE_FILES} DESTINATION ${XTRAIN_PYTHON_INSTALL_DIR}/xtrain)
